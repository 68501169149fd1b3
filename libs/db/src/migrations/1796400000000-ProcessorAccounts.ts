import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Merchants' processor accounts (decisions §13): one per merchant and division_number ('' is the
 * merchant's default). The config file (API keys included) is sealed like card data (AES-256-GCM,
 * key id per row for rotation); only the processor name and raw_card_data are in clear.
 */
export class ProcessorAccounts1796400000000 implements MigrationInterface {
  name = 'ProcessorAccounts1796400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE processor_accounts (
        id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        merchant_id uuid NOT NULL REFERENCES merchants(id) ON DELETE CASCADE,
        division_number varchar(64) NOT NULL DEFAULT '',
        processor varchar(16) NOT NULL CHECK (processor IN ('sandbox', 'stripe', 'adyen')),
        raw_card_data boolean NOT NULL DEFAULT false,
        config_enc text NOT NULL,
        config_key_id varchar(32) NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        UNIQUE (merchant_id, division_number)
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE processor_accounts`);
  }
}
