import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Policy experiments (issue 11): a merchant's retry-policy variants run side by side. Variants are
 * immutable once created (a change is a new experiment), and each transaction keeps the arm it was
 * assigned at intake, so stopping or replacing an experiment never alters transactions in flight.
 * At most one experiment runs per merchant (the partial unique index).
 */
export class PolicyExperiments1797900000000 implements MigrationInterface {
  name = 'PolicyExperiments1797900000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE policy_experiments (
        id varchar(40) PRIMARY KEY,
        merchant_id uuid NOT NULL REFERENCES merchants(id) ON DELETE CASCADE,
        name varchar(100) NOT NULL,
        holdout_share numeric(4,3) NOT NULL,
        holdout_policy varchar(64) NOT NULL,
        variants jsonb NOT NULL,
        status varchar(16) NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'stopped')),
        created_at timestamptz NOT NULL DEFAULT now(),
        stopped_at timestamptz
      )`);
    await q.query(
      `CREATE UNIQUE INDEX policy_experiments_running ON policy_experiments (merchant_id) WHERE status = 'running'`,
    );
    await q.query(`CREATE INDEX policy_experiments_merchant ON policy_experiments (merchant_id, created_at DESC)`);
    await q.query(
      `ALTER TABLE transactions ADD COLUMN experiment_id varchar(40), ADD COLUMN experiment_arm varchar(64)`,
    );
    await q.query(
      `CREATE INDEX transactions_experiment ON transactions (experiment_id, experiment_arm) WHERE experiment_id IS NOT NULL`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS transactions_experiment`);
    await q.query(`ALTER TABLE transactions DROP COLUMN experiment_id, DROP COLUMN experiment_arm`);
    await q.query(`DROP TABLE policy_experiments`);
  }
}
