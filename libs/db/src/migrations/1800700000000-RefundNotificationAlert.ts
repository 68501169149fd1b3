import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * When the refund batcher raised the operator alert for a refund the processor accepted without a
 * result (Adyen `received`) whose notification has not come after REFUND_NOTIFICATION_ALERT_AFTER:
 * one error log per refund. A nullable column without a default: no table rewrite.
 */
export class RefundNotificationAlert1800700000000 implements MigrationInterface {
  name = 'RefundNotificationAlert1800700000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE refunds ADD COLUMN alerted_at timestamptz NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE refunds DROP COLUMN alerted_at`);
  }
}
