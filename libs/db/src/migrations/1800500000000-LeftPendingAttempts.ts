import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Prepared attempts still pending, by their in-flight mark: the retry worker's sweep of attempts
 * whose job ended without recording them (AttemptsRepository.leftPendingPrepared) reads the oldest
 * on every tick. Small (only attempts at the processor right now), and cheap to keep: an attempt is
 * inserted without `prepared_at` (no entry), and the in-flight mark that adds its one entry already
 * changes an indexed column (attempts_card_merchant), so no HOT update is lost.
 *
 * Built CONCURRENTLY, outside a migration transaction, so that attempts are written while it builds;
 * an interrupted build's invalid index is dropped and built again on the next run.
 */
export class LeftPendingAttempts1800500000000 implements MigrationInterface {
  name = 'LeftPendingAttempts1800500000000';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX CONCURRENTLY IF EXISTS attempts_left_pending`);
    await q.query(
      `CREATE INDEX CONCURRENTLY attempts_left_pending ON attempts (prepared_at)
        WHERE state = 'pending' AND prepared_at IS NOT NULL`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    // A revert may run inside a transaction (TypeORM's undo): a plain statement.
    await q.query(`DROP INDEX IF EXISTS attempts_left_pending`);
  }
}
