import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Jobs that failed for good (out of attempts, or unrecoverable) are rows: one per (queue, job id),
 * open until an operator redrives it. Their outbox rows are marked `failed_at`, so the sweeper no
 * longer re-adds them forever; the sweeper's index leaves them out.
 */
export class FailedJobs1796100000000 implements MigrationInterface {
  name = 'FailedJobs1796100000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE failed_jobs (
        queue varchar(64) NOT NULL,
        job_id varchar(255) NOT NULL,
        job_name varchar(64) NOT NULL,
        payload jsonb NOT NULL,
        outbox_id uuid,
        attempts int NOT NULL,
        last_error text NOT NULL,
        failed_at timestamptz NOT NULL DEFAULT now(),
        failure_count int NOT NULL DEFAULT 1,
        redriven_at timestamptz,
        redrive_count int NOT NULL DEFAULT 0,
        PRIMARY KEY (queue, job_id)
      )`);
    await q.query(`CREATE INDEX failed_jobs_open ON failed_jobs (failed_at) WHERE redriven_at IS NULL`);
    await q.query(`ALTER TABLE outbox ADD COLUMN failed_at timestamptz`);
    await q.query(`DROP INDEX outbox_open`);
    await q.query(`CREATE INDEX outbox_open ON outbox (created_at) WHERE completed_at IS NULL AND failed_at IS NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX outbox_open`);
    await q.query(`CREATE INDEX outbox_open ON outbox (created_at) WHERE completed_at IS NULL`);
    await q.query(`ALTER TABLE outbox DROP COLUMN failed_at`);
    await q.query(`DROP TABLE failed_jobs`);
  }
}
