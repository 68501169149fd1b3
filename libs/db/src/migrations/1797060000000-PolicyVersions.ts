import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The retry policy that plans each transaction (recorded at intake: a config change never alters
 * transactions in flight; NULL = the UTC heuristics that planned everything before versions), why
 * its next attempt was planned where it is (copied onto the attempt when it is made), and the
 * learner's evidence: attempts and approvals per slot (libs/domain attempt-slots.ts), per merchant
 * and across merchants ('' = all merchants).
 */
export class PolicyVersions1797060000000 implements MigrationInterface {
  name = 'PolicyVersions1797060000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE transactions ADD COLUMN policy_version varchar(64), ADD COLUMN next_attempt_plan jsonb`);
    await q.query(`ALTER TABLE attempts ADD COLUMN plan jsonb`);
    await q.query(`
      CREATE TABLE policy_slot_stats (
        scope varchar(64) NOT NULL,
        decline_class varchar(16) NOT NULL,
        day_after_failure smallint NOT NULL,
        local_hour smallint NOT NULL,
        attempts integer NOT NULL DEFAULT 0,
        approvals integer NOT NULL DEFAULT 0,
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (scope, decline_class, day_after_failure, local_hour)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE policy_slot_stats`);
    await q.query(`ALTER TABLE attempts DROP COLUMN plan`);
    await q.query(`ALTER TABLE transactions DROP COLUMN policy_version, DROP COLUMN next_attempt_plan`);
  }
}
