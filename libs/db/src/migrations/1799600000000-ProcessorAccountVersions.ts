import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Processor accounts are versions, and an attempt names the one that charged it.
 *
 * `processor set` replaced a division's account in place and `processor remove` deleted it, and every
 * lookup, late-capture watch, refund and settlement check asked the merchant's account as it was NOW.
 * An attempt whose answer was lost at Stripe, looked up after the merchant moved to Adyen (or after
 * the account was removed, falling back to the sandbox), was replayed at the new processor: a second
 * charge there, or a "not charged" verdict, while the first processor held the money; a refund of a
 * capture went to a processor that never saw it.
 *
 * Now a change retires the division's current row (retired_at) and inserts a new one; a removal
 * retires it. Retired rows are kept (their sealed configs, re-sealed on key rotation like the others)
 * so that an attempt's charge, lookups and refund go through `attempts.processor_account_id`, set
 * with the in-flight mark (NULL: the app's PROCESSOR). No foreign key: an account row is never
 * deleted but with its merchant, and the attempts' hot path need not check it.
 *
 * Attempts prepared before this migration are given their division's account as it is now, the best
 * knowledge there is (what every lookup used until now).
 */
export class ProcessorAccountVersions1799600000000 implements MigrationInterface {
  name = 'ProcessorAccountVersions1799600000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE processor_accounts ADD COLUMN retired_at timestamptz`);
    await q.query(
      `ALTER TABLE processor_accounts DROP CONSTRAINT IF EXISTS processor_accounts_merchant_id_division_number_key`,
    );
    await q.query(
      `CREATE UNIQUE INDEX processor_accounts_current ON processor_accounts (merchant_id, division_number)
        WHERE retired_at IS NULL`,
    );
    await q.query(`ALTER TABLE attempts ADD COLUMN processor_account_id uuid`);
    await q.query(
      `UPDATE attempts a SET processor_account_id = (
          SELECT p.id FROM processor_accounts p
           WHERE p.merchant_id = t.merchant_id AND p.division_number IN (COALESCE(t.division_number, ''), '')
           ORDER BY p.division_number = '' LIMIT 1)
         FROM transactions t
        WHERE t.id = a.transaction_id AND a.prepared_at IS NOT NULL
          AND EXISTS (SELECT 1 FROM processor_accounts p WHERE p.merchant_id = t.merchant_id)`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE attempts DROP COLUMN processor_account_id`);
    await q.query(`DELETE FROM processor_accounts WHERE retired_at IS NOT NULL`);
    await q.query(`DROP INDEX processor_accounts_current`);
    await q.query(
      `ALTER TABLE processor_accounts ADD CONSTRAINT processor_accounts_merchant_id_division_number_key
         UNIQUE (merchant_id, division_number)`,
    );
    await q.query(`ALTER TABLE processor_accounts DROP COLUMN retired_at`);
  }
}
