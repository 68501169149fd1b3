import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Retention (issue 14): when a transaction's card data was erased (its sealed card number,
 * network-token cryptogram and account-updater JWE removed; fingerprint, BIN, last four and
 * expiry kept for the network rules and the reads), and the indexes the batched retention
 * deletes walk so they never scan a table.
 */
export class Retention1798300000000 implements MigrationInterface {
  name = 'Retention1798300000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE transactions ADD COLUMN card_erased_at timestamptz`);
    await q.query(`ALTER TABLE payment_methods ADD COLUMN card_erased_at timestamptz`);
    // Transactions still holding card data, oldest change first (the erasure's walk).
    await q.query(`
      CREATE INDEX transactions_card_data_held ON transactions (status_changed_at)
       WHERE card_erased_at IS NULL
         AND (card_enc IS NOT NULL OR card_jwe IS NOT NULL OR cryptogram IS NOT NULL OR account_update_jwe IS NOT NULL)`);
    await q.query(`
      CREATE INDEX payment_methods_card_data_held ON payment_methods (last_seen_at)
       WHERE card_erased_at IS NULL
         AND (card_enc IS NOT NULL OR cryptogram_enc IS NOT NULL OR account_update_jwe IS NOT NULL)`);
    await q.query(`CREATE INDEX outbox_completed ON outbox (completed_at) WHERE completed_at IS NOT NULL`);
    await q.query(
      `CREATE INDEX webhook_messages_delivered ON webhook_messages (delivered_at) WHERE status = 'delivered'`,
    );
    await q.query(`CREATE INDEX sandbox_operations_created ON sandbox_operations (created_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    for (const i of [
      'sandbox_operations_created',
      'webhook_messages_delivered',
      'outbox_completed',
      'payment_methods_card_data_held',
      'transactions_card_data_held',
    ]) {
      await q.query(`DROP INDEX IF EXISTS ${i}`);
    }
    await q.query(`ALTER TABLE payment_methods DROP COLUMN card_erased_at`);
    await q.query(`ALTER TABLE transactions DROP COLUMN card_erased_at`);
  }
}
