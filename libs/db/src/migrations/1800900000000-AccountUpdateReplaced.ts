import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The card data the account updater replaced on a payment method (the merchant's last data: card
 * fingerprint and expiry), so that the merchant's next transaction sent with that same data is read
 * as stale, not newer: the payment method keeps the renewal (decisions §15). Null where the updater
 * never changed the card, and for rows updated before it (the merchant's data wins there, as before).
 * A nullable column without a default: no table rewrite.
 */
export class AccountUpdateReplaced1800900000000 implements MigrationInterface {
  name = 'AccountUpdateReplaced1800900000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE payment_methods ADD COLUMN account_update_replaced jsonb NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE payment_methods DROP COLUMN account_update_replaced`);
  }
}
