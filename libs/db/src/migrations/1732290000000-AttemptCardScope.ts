import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Card history per card per merchant (network-rules.config.ts): attempts remember when they were
 * handed to the processor (prepared_at: in flight until processed_at) and which card data they sent
 * (card_data_version: a hash of the expiry, so a card block lifts when the card data changes).
 */
export class AttemptCardScope1732290000000 implements MigrationInterface {
  name = 'AttemptCardScope1732290000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE attempts ADD COLUMN prepared_at timestamptz, ADD COLUMN card_data_version varchar(64)`);
    // Attempts already recorded were prepared when they were processed.
    await q.query(`UPDATE attempts SET prepared_at = processed_at WHERE processed_at IS NOT NULL`);
    await q.query(`CREATE INDEX attempts_card_merchant ON attempts (merchant_id, card_hmac, prepared_at)`);
    // Card blocks never lapse: their lookup is not bounded by the history window.
    await q.query(
      `CREATE INDEX attempts_card_blocks ON attempts (merchant_id, card_hmac)
        WHERE state = 'declined' AND auth_code_description = 'Hard Failure'`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS attempts_card_blocks`);
    await q.query(`DROP INDEX IF EXISTS attempts_card_merchant`);
    await q.query(`ALTER TABLE attempts DROP COLUMN card_data_version, DROP COLUMN prepared_at`);
  }
}
