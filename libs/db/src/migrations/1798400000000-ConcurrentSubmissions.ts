import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Concurrent submissions of one merchant (issue 14): the intake no longer serialises a merchant's
 * submissions on one lock. One subscription in recovery at a time (RET003) is held by this unique
 * index instead: a second submission racing the first on a subscription waits at the index for
 * the first to commit, fails, and runs again, now seeing it. The service has always kept this
 * invariant (under the lock), so existing rows satisfy it.
 */
export class ConcurrentSubmissions1798400000000 implements MigrationInterface {
  name = 'ConcurrentSubmissions1798400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS transactions_recovering_subscription`);
    await q.query(
      `CREATE UNIQUE INDEX transactions_recovering_subscription ON transactions (merchant_id, subscription_id)
       WHERE status IN ('Failed', 'In Retry', 'Stop Requested') AND review_status <> 'rejected'`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS transactions_recovering_subscription`);
    await q.query(
      `CREATE INDEX transactions_recovering_subscription ON transactions (merchant_id, subscription_id)
       WHERE status IN ('Failed', 'In Retry', 'Stop Requested') AND review_status <> 'rejected'`,
    );
  }
}
