import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A replay generation per push message. A replay resets attempt_count, so the delivery job id
 * `<message_id>-<attempt>` alone would repeat and BullMQ (which keeps completed jobs for a while)
 * would ignore the re-add; the dispatcher puts the generation into the job id instead.
 */
export class WebhookReplayCount1795400000000 implements MigrationInterface {
  name = 'WebhookReplayCount1795400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE webhook_messages ADD COLUMN replay_count int NOT NULL DEFAULT 0`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE webhook_messages DROP COLUMN replay_count`);
  }
}
