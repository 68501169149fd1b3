import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Attempt states as a closed set, with `unknown` (the processor gave no decision: it may have
 * charged) beside pending, captured, declined and error (settled as not charged). The
 * reconciliation looks attempts up by `lookup_after` (next lookup due) and raises its operator
 * alert once per attempt (`alerted_at`).
 */
export class AttemptUnknownState1796000000000 implements MigrationInterface {
  name = 'AttemptUnknownState1796000000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `ALTER TABLE attempts ADD CONSTRAINT attempts_state_known
         CHECK (state IN ('pending', 'unknown', 'captured', 'declined', 'error'))`,
    );
    await q.query(`ALTER TABLE attempts ADD COLUMN lookup_after timestamptz, ADD COLUMN alerted_at timestamptz`);
    // The reconciliation's reads: unknown attempts, and errors still watched for a late capture.
    await q.query(`CREATE INDEX attempts_unknown ON attempts (lookup_after) WHERE state = 'unknown'`);
    await q.query(`CREATE INDEX attempts_late_watch ON attempts (processed_at) WHERE state = 'error'`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX attempts_late_watch`);
    await q.query(`DROP INDEX attempts_unknown`);
    // Unknown attempts read as pending again: the old code looks a prepared pending attempt up.
    await q.query(`UPDATE attempts SET state = 'pending' WHERE state = 'unknown'`);
    await q.query(`ALTER TABLE attempts DROP COLUMN lookup_after, DROP COLUMN alerted_at`);
    await q.query(`ALTER TABLE attempts DROP CONSTRAINT attempts_state_known`);
  }
}
