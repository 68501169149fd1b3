import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What an Adyen AUTHORISATION webhook says about a refusal, beyond its `reason` text: the raw network
 * code (additionalData.refusalReasonRaw), the Mastercard advice (additionalData.merchantAdviceCode)
 * and the brand (the item's paymentMethod), so that a decline resolved by a notification binds the
 * card as the same decline answered at once. Nullable columns without defaults: no table rewrite.
 */
export class NotificationRefusalDetail1801200000000 implements MigrationInterface {
  name = 'NotificationRefusalDetail1801200000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `ALTER TABLE processor_notifications ADD COLUMN refusal_reason_raw text NULL,
         ADD COLUMN merchant_advice_code text NULL, ADD COLUMN payment_method varchar(64) NULL`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(
      `ALTER TABLE processor_notifications DROP COLUMN refusal_reason_raw, DROP COLUMN merchant_advice_code,
         DROP COLUMN payment_method`,
    );
  }
}
