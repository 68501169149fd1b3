import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * original_declines.response_code holds the submission's auth_code, which the API takes up to 64
 * characters (transactions.auth_code is varchar(64)): at 16, one long code with a binding advice code
 * failed the whole submission's review on every retry.
 */
export class OriginalDeclineCodes1799950000000 implements MigrationInterface {
  name = 'OriginalDeclineCodes1799950000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE original_declines ALTER COLUMN response_code TYPE varchar(64)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE original_declines ALTER COLUMN response_code TYPE varchar(16)`);
  }
}
