import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Two indexes of attempts that no query reads (issue 14): the card history is read per merchant
 * (attempts_card_merchant), and pending attempts are never listed by age. Every attempt the tick
 * writes, and every update of one, paid for them.
 */
export class UnreadAttemptIndexes1798600000000 implements MigrationInterface {
  name = 'UnreadAttemptIndexes1798600000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS attempts_card_history`);
    await q.query(`DROP INDEX IF EXISTS attempts_in_flight`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX attempts_card_history ON attempts (card_hmac, processed_at)`);
    await q.query(`CREATE INDEX attempts_in_flight ON attempts (created_at) WHERE state = 'pending'`);
  }
}
