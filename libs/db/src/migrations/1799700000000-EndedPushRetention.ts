import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Push messages that ended `gone` (the receiver answered 410) or `no_endpoint` (the merchant had no
 * webhook URL) are deleted after WEBHOOK_RETENTION like delivered and dead ones (they hold customer
 * data in their bodies and were kept for ever). Their retention sweep finds them by this partial
 * index on their last change, without reading the table.
 */
export class EndedPushRetention1799700000000 implements MigrationInterface {
  name = 'EndedPushRetention1799700000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE INDEX webhook_messages_ended ON webhook_messages (updated_at) WHERE status IN ('gone', 'no_endpoint')`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX webhook_messages_ended`);
  }
}
