import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The card-data erasure also erases the card in the bodies of the erased transactions' push
 * messages, whatever their status (a dead message is kept to be replayed with its stored body; a
 * delivered one may be kept longer than the refund window). The erasure finds a batch's messages by
 * their transaction_id through this index, never by reading the table.
 *
 * Built CONCURRENTLY, outside a migration transaction, so that pushes are written (INSERT, on the
 * recovery's hot path) while it builds. An interrupted build leaves an invalid index: the migration
 * drops it and builds again when it runs next.
 */
export class ErasedPushBodies1800200000000 implements MigrationInterface {
  name = 'ErasedPushBodies1800200000000';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX CONCURRENTLY IF EXISTS webhook_messages_transaction`);
    await q.query(`CREATE INDEX CONCURRENTLY webhook_messages_transaction ON webhook_messages (transaction_id)`);
  }

  async down(q: QueryRunner): Promise<void> {
    // A revert may run inside a transaction (TypeORM's undo): a plain drop, as short.
    await q.query(`DROP INDEX IF EXISTS webhook_messages_transaction`);
  }
}
