import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Processor notifications (Adyen standard webhooks): each item Adyen posts, once its HMAC verified
 * against a merchant's Adyen account, is a row here, written with its outbox row before Adyen gets
 * `[accepted]`; the retry worker acts on it and sets processed_at. One row per merchant whose account
 * verified it: Adyen's own identity of an event (merchant account, eventCode, pspReference, success)
 * is unique per merchant, so the same notification delivered twice inserts nothing the second time.
 */
export class ProcessorNotifications1800600000000 implements MigrationInterface {
  name = 'ProcessorNotifications1800600000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE processor_notifications (
        id uuid PRIMARY KEY DEFAULT retain_uuid_v7(),
        processor varchar(16) NOT NULL,
        merchant_id uuid NOT NULL REFERENCES merchants(id) ON DELETE CASCADE,
        account_id uuid NOT NULL,
        merchant_account_code varchar(255) NOT NULL,
        event_code varchar(64) NOT NULL,
        success boolean NOT NULL,
        psp_reference varchar(128) NOT NULL,
        original_reference varchar(128),
        merchant_reference varchar(255),
        amount_value bigint NOT NULL,
        currency varchar(3) NOT NULL,
        reason text,
        event_date varchar(64),
        live boolean NOT NULL,
        received_at timestamptz NOT NULL DEFAULT now(),
        processed_at timestamptz,
        outcome text,
        UNIQUE (merchant_id, processor, merchant_account_code, event_code, psp_reference, success)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE processor_notifications`);
  }
}
