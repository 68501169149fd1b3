import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The payment methods of a merchant's account (decisions §15): every payment method seen for an
 * `account.id`, latest data wins per `payment_method.id`, card data sealed like the transactions'.
 * Transactions and attempts point at the one they charge; merchants may register the public key
 * that enables the account updater (updated numbers are offered back only encrypted to it).
 */
export class AccountPaymentMethods1797200000000 implements MigrationInterface {
  name = 'AccountPaymentMethods1797200000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE payment_methods (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        vid varchar(40) NOT NULL UNIQUE,
        merchant_id uuid NOT NULL REFERENCES merchants(id) ON DELETE CASCADE,
        account_id varchar(128) NOT NULL,
        pm_id varchar(128) NOT NULL,
        is_primary boolean NOT NULL DEFAULT true,
        is_tokenized boolean NOT NULL DEFAULT false,
        is_network_token smallint,
        card_kind varchar(8) NOT NULL,
        card_enc text,
        card_key_id varchar(32),
        card_hmac char(64),
        card_hmac_key_id varchar(32),
        card_bin varchar(8),
        card_last4 char(4),
        card_network varchar(16),
        account_hash char(40),
        expiration_date char(6),
        cryptogram_enc text,
        cryptogram_key_id varchar(32),
        eci_indicator varchar(16),
        payment_method jsonb NOT NULL,
        last_seen_at timestamptz NOT NULL,
        account_updated boolean NOT NULL DEFAULT false,
        account_updated_at timestamptz,
        account_update_jwe text,
        updater_checked_version varchar(64),
        ended_at timestamptz,
        ended_reason text,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (merchant_id, account_id, pm_id)
      )`);
    await q.query(`ALTER TABLE transactions ADD COLUMN payment_method_ref uuid REFERENCES payment_methods(id)`);
    await q.query(`ALTER TABLE transactions ADD COLUMN account_updated boolean NOT NULL DEFAULT false`);
    await q.query(`ALTER TABLE transactions ADD COLUMN account_update_jwe text`);
    await q.query(`ALTER TABLE attempts ADD COLUMN payment_method_ref uuid REFERENCES payment_methods(id)`);
    await q.query(`ALTER TABLE attempts ADD COLUMN payment_method_view jsonb`);
    await q.query(`ALTER TABLE merchants ADD COLUMN updater_public_key jsonb`);
    await q.query(`ALTER TABLE merchants ADD COLUMN updater_key_alg varchar(32)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE merchants DROP COLUMN updater_key_alg`);
    await q.query(`ALTER TABLE merchants DROP COLUMN updater_public_key`);
    await q.query(`ALTER TABLE attempts DROP COLUMN payment_method_view`);
    await q.query(`ALTER TABLE attempts DROP COLUMN payment_method_ref`);
    await q.query(`ALTER TABLE transactions DROP COLUMN account_update_jwe`);
    await q.query(`ALTER TABLE transactions DROP COLUMN account_updated`);
    await q.query(`ALTER TABLE transactions DROP COLUMN payment_method_ref`);
    await q.query(`DROP TABLE payment_methods`);
  }
}
