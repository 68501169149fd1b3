import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `Idempotency-Key` on POST /v1/retain/refunds (Stripe's convention, decisions: "what a merchant
 * integrating a payment API would expect"): a partial refund sent again after a lost response made
 * a second refund. A key is claimed (row inserted) in the call's database transaction before its
 * refunds, and its answer stored in the same transaction: a concurrent call with the key waits on
 * the row, then replays the answer. Keys are kept 24 hours (retention).
 */
export class RefundIdempotencyKeys1799800000000 implements MigrationInterface {
  name = 'RefundIdempotencyKeys1799800000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE refund_idempotency_keys (
        merchant_id uuid NOT NULL REFERENCES merchants(id) ON DELETE CASCADE,
        key varchar(255) NOT NULL,
        request_hash char(64) NOT NULL,
        status_code int,
        response jsonb,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (merchant_id, key)
      )`);
    await q.query(`CREATE INDEX refund_idempotency_keys_created ON refund_idempotency_keys (created_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE refund_idempotency_keys`);
  }
}
