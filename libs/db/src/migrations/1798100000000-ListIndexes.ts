import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Reads whose plans do not depend on luck (issue 14): the status index carries the list's whole
 * sort key (submitted_ts, vid), so a list filtered by status is one ordered index range per status
 * (TransactionsRepository listQuery), never a walk of the merchant's whole list. It replaces the
 * index without the tie-breaker.
 */
export class ListIndexes1798100000000 implements MigrationInterface {
  name = 'ListIndexes1798100000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE INDEX transactions_status_list ON transactions (merchant_id, status, submitted_ts DESC, vid DESC)`,
    );
    await q.query(`DROP INDEX IF EXISTS transactions_status`);
    // A subscription's or an account's list in order; the duplicate check's subscriptions still in recovery.
    await q.query(
      `CREATE INDEX transactions_subscription_list ON transactions (merchant_id, subscription_id, submitted_ts DESC, vid DESC)`,
    );
    await q.query(
      `CREATE INDEX transactions_account_list ON transactions (merchant_id, account_id, submitted_ts DESC, vid DESC)`,
    );
    await q.query(`DROP INDEX IF EXISTS transactions_subscription`);
    await q.query(`DROP INDEX IF EXISTS transactions_account`);
    await q.query(
      `CREATE INDEX transactions_recovering_subscription ON transactions (merchant_id, subscription_id)
       WHERE status IN ('Failed', 'In Retry', 'Stop Requested') AND review_status <> 'rejected'`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS transactions_recovering_subscription`);
    await q.query(`CREATE INDEX transactions_subscription ON transactions (merchant_id, subscription_id)`);
    await q.query(`CREATE INDEX transactions_account ON transactions (merchant_id, account_id)`);
    await q.query(`DROP INDEX IF EXISTS transactions_subscription_list`);
    await q.query(`DROP INDEX IF EXISTS transactions_account_list`);
    await q.query(`CREATE INDEX transactions_status ON transactions (merchant_id, status, submitted_ts DESC)`);
    await q.query(`DROP INDEX IF EXISTS transactions_status_list`);
  }
}
