import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Runs `ddl` unless a constraint named `name` exists: this migration's steps can run again. */
const unlessConstraint = (name: string, ddl: string): string =>
  `DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = '${name}') THEN ${ddl}; END IF; END $$`;

/**
 * A transaction's submission and merchant checked by one foreign key, (submission_id, merchant_id)
 * to submissions (id, merchant_id), instead of two (issue 14, intake).
 *
 * Each foreign key is a check per inserted row: a 1000-row POST ran 2,000 of them inside its
 * INSERTs, 12-18 ms of Postgres time on the critical path (EXPLAIN ANALYZE's trigger times on the
 * fourth session's machine; 7-9 ms with the one), and every concurrent POST of a merchant took a
 * key-share lock on the same merchants row 1,000 times. The composite key is one check per row,
 * against the submission row the same database transaction has just written. It holds more than
 * the two did: a transaction belongs to its submission's merchant. The merchant still exists
 * through submissions' own foreign key.
 *
 * Outside a migration transaction, so that checking the existing rows (VALIDATE, a read of every
 * transaction) does not stop writes: each step alone is short or takes no lock that blocks
 * INSERTs, and each can run again if the migration is interrupted.
 */
export class SubmissionScopedTransactions1799000000000 implements MigrationInterface {
  name = 'SubmissionScopedTransactions1799000000000';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      unlessConstraint(
        'submissions_id_merchant',
        'ALTER TABLE submissions ADD CONSTRAINT submissions_id_merchant UNIQUE (id, merchant_id)',
      ),
    );
    await q.query(
      unlessConstraint(
        'transactions_submission_merchant_fkey',
        `ALTER TABLE transactions ADD CONSTRAINT transactions_submission_merchant_fkey
           FOREIGN KEY (submission_id, merchant_id) REFERENCES submissions (id, merchant_id) NOT VALID`,
      ),
    );
    await q.query(`ALTER TABLE transactions VALIDATE CONSTRAINT transactions_submission_merchant_fkey`);
    await q.query(
      `ALTER TABLE transactions DROP CONSTRAINT IF EXISTS transactions_merchant_id_fkey,
         DROP CONSTRAINT IF EXISTS transactions_submission_id_fkey`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(
      `ALTER TABLE transactions
         ADD CONSTRAINT transactions_merchant_id_fkey FOREIGN KEY (merchant_id) REFERENCES merchants (id),
         ADD CONSTRAINT transactions_submission_id_fkey FOREIGN KEY (submission_id) REFERENCES submissions (id)`,
    );
    await q.query(`ALTER TABLE transactions DROP CONSTRAINT transactions_submission_merchant_fkey`);
    await q.query(`ALTER TABLE submissions DROP CONSTRAINT submissions_id_merchant`);
  }
}
