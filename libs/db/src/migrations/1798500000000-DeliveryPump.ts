import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The dispatcher's pump claims pushes straight from Postgres (issue 14): new messages (no attempt
 * yet, next_attempt_at NULL) oldest first need their own index; retries use webhook_messages_due.
 */
export class DeliveryPump1798500000000 implements MigrationInterface {
  name = 'DeliveryPump1798500000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE INDEX webhook_messages_fresh ON webhook_messages (created_at)
        WHERE status = 'pending' AND next_attempt_at IS NULL`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS webhook_messages_fresh`);
  }
}
