import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A merchant's accounts by `account.id`, so that an account's `external_id` is unique within the
 * merchant's data (service-spec: "Creating an account with an existing external_id returns
 * `Failed to update Account`"). The intake checks it under the merchant's submission lock; the
 * partial unique index is the backstop. Filled from the accounts already submitted (the newest
 * row of each account; an external_id two accounts already share stays with the first written).
 */
export class MerchantAccounts1797350000000 implements MigrationInterface {
  name = 'MerchantAccounts1797350000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE merchant_accounts (
        merchant_id uuid NOT NULL REFERENCES merchants(id) ON DELETE CASCADE,
        account_id varchar(128) NOT NULL,
        external_id varchar(128),
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (merchant_id, account_id)
      )`);
    await q.query(`
      CREATE UNIQUE INDEX merchant_accounts_external_id ON merchant_accounts (merchant_id, external_id)
      WHERE external_id IS NOT NULL`);
    await q.query(`
      INSERT INTO merchant_accounts (merchant_id, account_id, external_id)
      SELECT DISTINCT ON (merchant_id, account_id) merchant_id, account_id, NULLIF(account->>'external_id', '')
        FROM transactions
       WHERE account_id IS NOT NULL
       ORDER BY merchant_id, account_id, created_at DESC
      ON CONFLICT DO NOTHING`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE merchant_accounts`);
  }
}
