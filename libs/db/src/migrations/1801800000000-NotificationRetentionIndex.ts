import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The index retention's batched delete of processor notifications walks (oldest acted-on first), as
 * every other kind has one (migration Retention1798300000000). Without it each batch of 1,000 scanned
 * and sorted the whole table: a backlog of n notifications cost n/1,000 scans of n rows.
 */
export class NotificationRetentionIndex1801800000000 implements MigrationInterface {
  name = 'NotificationRetentionIndex1801800000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE INDEX processor_notifications_processed ON processor_notifications (processed_at)
        WHERE processed_at IS NOT NULL`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX processor_notifications_processed`);
  }
}
