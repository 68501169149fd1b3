import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The capture a refund returns when it is not the transaction's own: a late capture's refund names
 * its attempt, so the refund batcher (sending again what the retry worker's send left unanswered)
 * refunds that charge on its account, never the merchant's kept capture. Null: the transaction's
 * capture. A nullable column without a default: no table rewrite.
 */
export class RefundedAttempt1800400000000 implements MigrationInterface {
  name = 'RefundedAttempt1800400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE refunds ADD COLUMN attempt_id uuid NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE refunds DROP COLUMN attempt_id`);
  }
}
