import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Forced deposit (service-spec `forced_deposit`, `previous_billing_count` -1): a merchant may turn
 * it on (off by default); a transaction whose recovery would end without money after soft declines
 * then gets one last attempt that captures without authorization, unless it was submitted with
 * `previous_billing_count` -1. The planned flag is copied to the attempt the scheduler creates.
 */
export class ForcedDeposit1798000000000 implements MigrationInterface {
  name = 'ForcedDeposit1798000000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE merchants ADD COLUMN forced_deposit boolean NOT NULL DEFAULT false`);
    await q.query(
      `ALTER TABLE transactions ADD COLUMN forced_deposit_planned boolean NOT NULL DEFAULT false,
         ADD COLUMN forced_deposit boolean NOT NULL DEFAULT false`,
    );
    await q.query(`ALTER TABLE attempts ADD COLUMN forced_deposit boolean NOT NULL DEFAULT false`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE attempts DROP COLUMN forced_deposit`);
    await q.query(`ALTER TABLE transactions DROP COLUMN forced_deposit_planned, DROP COLUMN forced_deposit`);
    await q.query(`ALTER TABLE merchants DROP COLUMN forced_deposit`);
  }
}
