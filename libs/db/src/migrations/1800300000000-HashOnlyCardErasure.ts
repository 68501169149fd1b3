import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Rows still holding card data: the predicates of RetentionRepository's erasure, word for word. */
const TRANSACTIONS_CARD_HELD = `card_erased_at IS NULL
  AND (card_enc IS NOT NULL OR card_jwe IS NOT NULL OR cryptogram IS NOT NULL OR account_update_jwe IS NOT NULL
       OR account_hash IS NOT NULL)`;
const PAYMENT_METHODS_CARD_HELD = `card_erased_at IS NULL
  AND (card_enc IS NOT NULL OR cryptogram_enc IS NOT NULL OR account_update_jwe IS NOT NULL OR account_hash IS NOT NULL)`;

/**
 * A card sent as a token or masked with the merchant's account_hash holds no sealed number, JWE,
 * cryptogram or updater JWE, so the erasure never selected it: its unkeyed SHA-1 stayed beside the
 * BIN and last four for ever. The erasure now also takes rows holding only an account_hash (each
 * once: it stamps card_erased_at); these partial indexes, whose predicates are the erasure's, replace
 * those of Retention1798300000000.
 *
 * Built CONCURRENTLY, outside a migration transaction, so that transactions and payment methods are
 * written while they build; an interrupted build's invalid index is dropped and built again on the
 * next run. The old indexes are dropped once the new ones are there.
 */
export class HashOnlyCardErasure1800300000000 implements MigrationInterface {
  name = 'HashOnlyCardErasure1800300000000';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX CONCURRENTLY IF EXISTS transactions_card_held`);
    await q.query(
      `CREATE INDEX CONCURRENTLY transactions_card_held ON transactions (status_changed_at) WHERE ${TRANSACTIONS_CARD_HELD}`,
    );
    await q.query(`DROP INDEX CONCURRENTLY IF EXISTS payment_methods_card_held`);
    await q.query(
      `CREATE INDEX CONCURRENTLY payment_methods_card_held ON payment_methods (last_seen_at) WHERE ${PAYMENT_METHODS_CARD_HELD}`,
    );
    await q.query(`DROP INDEX CONCURRENTLY IF EXISTS transactions_card_data_held`);
    await q.query(`DROP INDEX CONCURRENTLY IF EXISTS payment_methods_card_data_held`);
  }

  async down(q: QueryRunner): Promise<void> {
    // A revert may run inside a transaction (TypeORM's undo): plain statements.
    await q.query(`
      CREATE INDEX IF NOT EXISTS transactions_card_data_held ON transactions (status_changed_at)
       WHERE card_erased_at IS NULL
         AND (card_enc IS NOT NULL OR card_jwe IS NOT NULL OR cryptogram IS NOT NULL OR account_update_jwe IS NOT NULL)`);
    await q.query(`
      CREATE INDEX IF NOT EXISTS payment_methods_card_data_held ON payment_methods (last_seen_at)
       WHERE card_erased_at IS NULL
         AND (card_enc IS NOT NULL OR cryptogram_enc IS NOT NULL OR account_update_jwe IS NOT NULL)`);
    await q.query(`DROP INDEX IF EXISTS payment_methods_card_held`);
    await q.query(`DROP INDEX IF EXISTS transactions_card_held`);
  }
}
