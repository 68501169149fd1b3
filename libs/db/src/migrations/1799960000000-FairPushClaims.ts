import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The dispatcher's claim shares due pushes out between merchants (CLAIM_NEXT_DUE_SQL): it finds the
 * merchants with pending messages by a skip scan, and takes each one's oldest new messages and due
 * retries from that merchant's own range, so one merchant's backlog is never read through to reach
 * another's push. The per-merchant indexes replace the global ones of the oldest-first claim
 * (webhook_messages_fresh on created_at, webhook_messages_due on next_attempt_at), which nothing
 * else reads.
 */
export class FairPushClaims1799960000000 implements MigrationInterface {
  name = 'FairPushClaims1799960000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE INDEX webhook_messages_pending_merchant ON webhook_messages (merchant_id, next_attempt_at)
        WHERE status = 'pending'`,
    );
    await q.query(
      `CREATE INDEX webhook_messages_fresh_merchant ON webhook_messages (merchant_id, created_at)
        WHERE status = 'pending' AND next_attempt_at IS NULL`,
    );
    await q.query(`DROP INDEX IF EXISTS webhook_messages_fresh`);
    await q.query(`DROP INDEX IF EXISTS webhook_messages_due`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX webhook_messages_due ON webhook_messages (next_attempt_at) WHERE status = 'pending'`);
    await q.query(
      `CREATE INDEX webhook_messages_fresh ON webhook_messages (created_at)
        WHERE status = 'pending' AND next_attempt_at IS NULL`,
    );
    await q.query(`DROP INDEX IF EXISTS webhook_messages_fresh_merchant`);
    await q.query(`DROP INDEX IF EXISTS webhook_messages_pending_merchant`);
  }
}
