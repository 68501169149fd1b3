import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A processor that rate-limits a merchant (429 Retry-After) slows that merchant's attempts only:
 * the time before which no new attempt of the merchant is sent, per merchant.
 */
export class ProcessorThrottles1796500000000 implements MigrationInterface {
  name = 'ProcessorThrottles1796500000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE processor_throttles (
        merchant_id uuid PRIMARY KEY REFERENCES merchants(id) ON DELETE CASCADE,
        not_before timestamptz NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now()
      )`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE processor_throttles`);
  }
}
