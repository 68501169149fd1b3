import type { MigrationInterface, QueryRunner } from 'typeorm';

/** Primary keys per statement: each batch is a short statement of its own (no lock held for long). */
const BATCH = 2000;

/** Where an attempt's copy of the payment method, and a push body, hold the card (RetentionRepository). */
const ATTEMPT_CARD = `'{payment_method,credit_card}'`;
const PUSH_CARD = `'{content,payment_method,credit_card}'`;

/** `doc` with its card at `path` erased as today's erasure does: `account_hash` null, no `account_update_jwe`. */
const erasedCard = (doc: string, path: string): string =>
  `CASE WHEN jsonb_typeof(${doc} #> ${path}) = 'object'
        THEN jsonb_set(${doc}, ${path}, (${doc} #> ${path}) - 'account_update_jwe' || '{"account_hash": null}'::jsonb)
        ELSE ${doc} END`;

/** `doc` holds, at `path`, a card's hash or an updater's JWE. */
const holdsCard = (doc: string, path: string): string =>
  `((${doc} #> ${path}) ? 'account_update_jwe'
    OR jsonb_typeof((${doc} #> ${path}) -> 'account_hash') <> 'null')`;

/**
 * One pass over `table` by primary key, BATCH keys at a time: `update` is run with the batch's
 * bounds ($1 exclusive, $2 inclusive), each its own statement, committed at once (outside a migration
 * transaction), so that no row lock is held for longer than one short batch.
 */
async function byKeyRanges(q: QueryRunner, table: string, update: string): Promise<void> {
  let after = '00000000-0000-0000-0000-000000000000';
  for (;;) {
    const [last]: { hi: string }[] = await q.query(
      `SELECT id AS hi FROM (SELECT id FROM ${table} WHERE id > $1 ORDER BY id LIMIT ${BATCH}) b ORDER BY id DESC LIMIT 1`,
      [after],
    );
    if (!last) return;
    await q.query(update, [after, last.hi]);
    after = last.hi;
  }
}

/**
 * Card data that builds before today's erasure left on rows they had erased (card_erased_at set),
 * which the erasure never takes again (it selects `card_erased_at IS NULL`):
 * - the card's unkeyed SHA-1 (`account_hash`) on transactions and payment methods (erased before the
 *   hash was: with the BIN and last four kept it gives the number back);
 * - the hash and an account updater's JWE in the attempts' copies of the payment method and in the
 *   bodies of the transaction's push messages, whatever their status (erased before those copies were).
 * Each is erased as the erasure does today (RetentionRepository.transactionCardData and
 * paymentMethodCardData; its SQL copied here, as of this migration); card_erased_at is left as it was,
 * and so are the masked number, BIN, last four, expiry and fingerprint.
 *
 * Batched by primary key, outside a migration transaction: each batch is its own short statement,
 * committed at once, so the hot path never waits long. Run again after an interruption, it takes
 * what is left. Nothing to revert: down() does nothing.
 */
export class ReEraseLegacyCardData1801000000000 implements MigrationInterface {
  name = 'ReEraseLegacyCardData1801000000000';
  transaction = false;

  async up(q: QueryRunner): Promise<void> {
    await byKeyRanges(
      q,
      'transactions',
      `UPDATE transactions SET card_enc = NULL, card_key_id = NULL, card_jwe = NULL, cryptogram = NULL,
              account_update_jwe = NULL, account_hash = NULL
        WHERE id > $1 AND id <= $2 AND card_erased_at IS NOT NULL
          AND (card_enc IS NOT NULL OR card_jwe IS NOT NULL OR cryptogram IS NOT NULL
               OR account_update_jwe IS NOT NULL OR account_hash IS NOT NULL)`,
    );
    await byKeyRanges(
      q,
      'payment_methods',
      `UPDATE payment_methods SET card_enc = NULL, card_key_id = NULL, cryptogram_enc = NULL, cryptogram_key_id = NULL,
              account_update_jwe = NULL, account_hash = NULL
        WHERE id > $1 AND id <= $2 AND card_erased_at IS NOT NULL
          AND (card_enc IS NOT NULL OR cryptogram_enc IS NOT NULL OR account_update_jwe IS NOT NULL
               OR account_hash IS NOT NULL)`,
    );
    await byKeyRanges(
      q,
      'attempts',
      `UPDATE attempts a SET payment_method_view = ${erasedCard('a.payment_method_view', ATTEMPT_CARD)}
         FROM transactions t
        WHERE a.id > $1 AND a.id <= $2 AND t.id = a.transaction_id AND t.card_erased_at IS NOT NULL
          AND ${holdsCard('a.payment_method_view', ATTEMPT_CARD)}`,
    );
    await byKeyRanges(
      q,
      'webhook_messages',
      `UPDATE webhook_messages w SET body = ${erasedCard('w.body', PUSH_CARD)}
         FROM transactions t
        WHERE w.id > $1 AND w.id <= $2 AND t.id = w.transaction_id AND t.card_erased_at IS NOT NULL
          AND ${holdsCard('w.body', PUSH_CARD)}`,
    );
  }

  async down(): Promise<void> {
    // An erasure is not undone.
  }
}
