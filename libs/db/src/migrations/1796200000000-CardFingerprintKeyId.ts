import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The key id of each transaction's card fingerprint (card_hmac). Fingerprints get their own keys
 * (CARD_FINGERPRINT_KEY) instead of one derived from the first CARD_DATA_KEY, so a data key
 * rotation no longer resets every card's network-limit history. Existing fingerprints keep their
 * value and are marked `legacy` (derived the old way); a card seen again is stored under the
 * fingerprint it already has (libs/db card-fingerprints.ts). Attempts carry their transaction's
 * fingerprint and need no key id of their own.
 */
export class CardFingerprintKeyId1796200000000 implements MigrationInterface {
  name = 'CardFingerprintKeyId1796200000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE transactions ADD COLUMN card_hmac_key_id varchar(32)`);
    await q.query(`UPDATE transactions SET card_hmac_key_id = 'legacy' WHERE card_hmac IS NOT NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    // Fingerprints made under CARD_FINGERPRINT_KEY stay in card_hmac; the previous release, which
    // derives them from the data key, will not match them (their cards start a new history).
    await q.query(`ALTER TABLE transactions DROP COLUMN card_hmac_key_id`);
  }
}
