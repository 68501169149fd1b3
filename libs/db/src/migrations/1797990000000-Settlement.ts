import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Settlement (issue 12): the retry worker asks the processor, every SETTLEMENT_CHECK_INTERVAL,
 * which `Captured` transactions have settled and moves them to `Settled`. `settlement_checked_at`
 * orders the checks (least recently checked first), so captures an adapter never reports settled
 * cannot starve the others; the partial index keeps the query on the captured rows only.
 */
export class Settlement1797990000000 implements MigrationInterface {
  name = 'Settlement1797990000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `ALTER TABLE transactions ADD COLUMN settlement_checked_at timestamptz, ADD COLUMN settled_at timestamptz`,
    );
    await q.query(
      `CREATE INDEX transactions_awaiting_settlement ON transactions (settlement_checked_at NULLS FIRST, status_changed_at)
       WHERE status = 'Captured'`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS transactions_awaiting_settlement`);
    await q.query(`ALTER TABLE transactions DROP COLUMN settlement_checked_at, DROP COLUMN settled_at`);
  }
}
