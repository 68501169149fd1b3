import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The merchant's own decline of a submitted transaction, where it binds the card (network-rules.md):
 * a card block (Visa category 1 or 3, Mastercard MAC 03/21/42/99/01/04, hard codes) or a Mastercard
 * "retry after" delay (MAC 24-30). The card's history for the network limits was only `attempts`, so
 * after an original 41 the review's fallback charged the same card saved under another payment
 * method id, and the UTC policy planned a first attempt inside a MAC 30's 10 days. One row per such
 * transaction, written by the review; read with the card's attempts for that transaction's own
 * attempts (AttemptsRepository.cardHistory). Rare (most original declines bind nothing), never
 * deleted: a block does not lapse, as the attempts that carry one are never deleted either.
 */
export class OriginalDeclines1799900000000 implements MigrationInterface {
  name = 'OriginalDeclines1799900000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE original_declines (
        transaction_id uuid PRIMARY KEY,
        merchant_id uuid NOT NULL REFERENCES merchants(id) ON DELETE CASCADE,
        card_hmac char(64) NOT NULL,
        at timestamptz NOT NULL,
        amount_minor bigint NOT NULL,
        response_code varchar(16) NOT NULL,
        merchant_advice_code varchar(4),
        card_data_version varchar(64)
      )`);
    await q.query(`CREATE INDEX original_declines_card ON original_declines (merchant_id, card_hmac)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE original_declines`);
  }
}
