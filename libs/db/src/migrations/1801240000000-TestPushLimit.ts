import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The limit on a merchant's test pushes (WebhookMessagesRepository.testPushWait) counts the merchant's
 * test pushes on every request for one: this partial index holds only test pushes (a few per merchant),
 * so the count never reads through the merchant's other pushes (millions for a large one).
 *
 * Built CONCURRENTLY, outside a migration transaction, so that pushes are written (INSERT, on the
 * recovery's hot path) while it builds. An interrupted build leaves an invalid index: the migration
 * drops it and builds again when it runs next.
 */
export class TestPushLimit1801240000000 implements MigrationInterface {
  name = 'TestPushLimit1801240000000';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX CONCURRENTLY IF EXISTS webhook_messages_test_merchant`);
    await q.query(
      `CREATE INDEX CONCURRENTLY webhook_messages_test_merchant ON webhook_messages (merchant_id)
        WHERE event_name = 'test'`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    // A revert may run inside a transaction (TypeORM's undo): a plain drop, as short.
    await q.query(`DROP INDEX IF EXISTS webhook_messages_test_merchant`);
  }
}
