import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A refund the processor answered succeeded that may still fail (Stripe: a card refund can move from
 * `succeeded` to `failed`, with a `failure_reason`): the refund batcher reads it again (`GET
 * /v1/refunds/:id`) at `recheck_after`, until `recheck_until`; both null: never read again. The
 * partial index holds only the refunds still watched (few), so each batch finds those due without
 * reading the others.
 */
export class RefundRecheck1801250000000 implements MigrationInterface {
  name = 'RefundRecheck1801250000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE refunds ADD COLUMN recheck_after timestamptz NULL`);
    await q.query(`ALTER TABLE refunds ADD COLUMN recheck_until timestamptz NULL`);
    await q.query(`CREATE INDEX refunds_recheck_due ON refunds (recheck_after) WHERE recheck_after IS NOT NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS refunds_recheck_due`);
    await q.query(`ALTER TABLE refunds DROP COLUMN recheck_until`);
    await q.query(`ALTER TABLE refunds DROP COLUMN recheck_after`);
  }
}
