import type { DataSource, EntityManager } from 'typeorm';
import { AttemptEntity, TransactionEntity, type StoredPaymentMethod } from '../entities';
import { fixCardKeys } from '../migrations/1800100000100-FixedBreakdownKeys';

/** Something that runs SQL: the DataSource outside a transaction, an EntityManager inside one. */
type Sql = Pick<EntityManager, 'query'> | Pick<DataSource, 'query'>;

/** One payment method of a merchant's account (decisions §15), card data sealed. */
export interface PaymentMethodRow {
  id: string;
  vid: string;
  merchant_id: string;
  account_id: string;
  pm_id: string;
  is_primary: boolean;
  is_tokenized: boolean;
  is_network_token: number | null;
  card_kind: 'clear' | 'jwe' | 'masked' | 'token';
  card_enc: string | null;
  card_key_id: string | null;
  card_hmac: string | null;
  card_hmac_key_id: string | null;
  card_bin: string | null;
  card_last4: string | null;
  card_network: string | null;
  account_hash: string | null;
  expiration_date: string | null;
  cryptogram_enc: string | null;
  cryptogram_key_id: string | null;
  eci_indicator: string | null;
  payment_method: StoredPaymentMethod;
  last_seen_at: Date;
  account_updated: boolean;
  account_update_jwe: string | null;
  /** The merchant's card data the account updater replaced (fingerprint and expiry), or null. */
  account_update_replaced: { card_hmac: string | null; expiration_date: string | null } | null;
  updater_checked_version: string | null;
  ended_at: Date | null;
  ended_reason: string | null;
}

/** What the account updater changed on a card (the number itself only when it changed). */
export interface CardDataUpdate {
  expirationDate: string;
  card?: {
    cardEnc: string;
    cardKeyId: string;
    cardHmac: string | null;
    cardHmacKeyId: string | null;
    cardBin: string;
    cardLast4: string;
    /** Null: not shown (a hash beside the masked number gives the number back to whoever lacks the JWE). */
    accountHash: string | null;
    /** The new number's network (a card reissued on another network follows that network's rules). */
    cardNetwork: string | null;
    display: string;
  } | null;
  /** The updated card as a compact JWE to the merchant's updater key, or null (no key). */
  jwe: string | null;
}

/** The advisory lock of one customer (a merchant's account): one charge decision at a time. */
export const accountLockKey = (merchantId: string, accountId: string): string =>
  `retain:account:${merchantId}:${accountId}`;

/**
 * The submitted card data is exactly what the account updater replaced on the stored payment method
 * (the merchant's data from before the renewal: same card fingerprint and expiry): stale, not newer.
 * The payment method keeps the updater's data (decisions §15); anything else from the merchant wins.
 */
const STALE = `(p.account_updated AND p.account_update_replaced IS NOT NULL AND p.card_erased_at IS NULL
  AND p.account_update_replaced->>'card_hmac' IS NOT DISTINCT FROM EXCLUDED.card_hmac
  AND p.account_update_replaced->>'expiration_date' IS NOT DISTINCT FROM EXCLUDED.expiration_date)`;

/**
 * The same, on a payment method whose card data retention erased (card_erased_at), when the updater
 * renewed only the expiry (the payment method's fingerprint is the submission's): the row holds no
 * card number any more, so the submission's is taken, with the renewed expiry and the updater's fields
 * kept (the renewal is not lost). When the updater changed the number, that number is gone: the
 * merchant's data wins (CHANGED), as any new data.
 */
const STALE_ERASED = `(p.account_updated AND p.account_update_replaced IS NOT NULL AND p.card_erased_at IS NOT NULL
  AND p.card_hmac = EXCLUDED.card_hmac
  AND p.account_update_replaced->>'card_hmac' IS NOT DISTINCT FROM EXCLUDED.card_hmac
  AND p.account_update_replaced->>'expiration_date' IS NOT DISTINCT FROM EXCLUDED.expiration_date)`;

/** New card data (number or expiry) from the merchant, not the data the updater replaced. */
const CHANGED = `(NOT ${STALE} AND NOT ${STALE_ERASED} AND (p.card_hmac IS DISTINCT FROM EXCLUDED.card_hmac
  OR p.expiration_date IS DISTINCT FROM EXCLUDED.expiration_date))`;

/** A card-data column's new value: the stored one when the submission is stale (the expiry also after an erasure). */
const cardDataValue = (c: string): string =>
  c === 'expiration_date'
    ? `CASE WHEN ${STALE} OR ${STALE_ERASED} THEN p.${c} ELSE EXCLUDED.${c} END`
    : `CASE WHEN ${STALE} THEN p.${c} ELSE EXCLUDED.${c} END`;

/** The columns of the card data itself: kept from the payment method when the submission is stale. */
const cardData = [
  'is_tokenized',
  'is_network_token',
  'card_kind',
  'card_enc',
  'card_key_id',
  'card_hmac',
  'card_hmac_key_id',
  'card_bin',
  'card_last4',
  'card_network',
  'account_hash',
  'expiration_date',
  'payment_method',
];

/**
 * The payment methods of merchants' accounts: remembered from each reviewed transaction (latest
 * data wins per payment_method.id), tried in order when a transaction's card can no longer be
 * retried. Every method takes or reaches rows through the merchant id.
 */
export class PaymentMethodsRepository {
  /**
   * Remembers the transaction's payment method for its account: inserted, or updated when this
   * transaction's data is at least as recent as the stored one. New card data (number or expiry)
   * lifts an earlier end of that payment method. Data the account updater already replaced (the
   * merchant's data from before a renewal, sent again) is stale: the renewed card data stays (STALE);
   * on a payment method retention erased, the submission's card data is taken with the renewed expiry
   * (STALE_ERASED).
   * Returns the row id.
   */
  static async remember(
    m: EntityManager,
    merchantId: string,
    transactionId: string,
    vid: string,
    cryptogram: { value: string; keyId: string } | null,
  ): Promise<string | null> {
    const rows: { id: string }[] = await m.query(
      `INSERT INTO payment_methods AS p (vid, merchant_id, account_id, pm_id, is_primary, is_tokenized, is_network_token,
         card_kind, card_enc, card_key_id, card_hmac, card_hmac_key_id, card_bin, card_last4, card_network,
         account_hash, expiration_date, cryptogram_enc, cryptogram_key_id, eci_indicator, payment_method, last_seen_at)
       SELECT $3, t.merchant_id, t.account_id, t.payment_method->>'id',
              COALESCE((t.payment_method->>'primary')::int, 1) = 1, t.card_kind = 'token', t.is_network_token,
              t.card_kind, t.card_enc, t.card_key_id, t.card_hmac, t.card_hmac_key_id, t.card_bin, t.card_last4,
              t.card_network, t.account_hash, t.expiration_date, $4, $5, t.eci_indicator, t.payment_method,
              t.submitted_ts
         FROM transactions t WHERE t.id = $1 AND t.merchant_id = $2
       ON CONFLICT (merchant_id, account_id, pm_id) DO UPDATE SET
         is_primary = EXCLUDED.is_primary, ${cardData.map((c) => `${c} = ${cardDataValue(c)}`).join(', ')},
         cryptogram_enc = EXCLUDED.cryptogram_enc, cryptogram_key_id = EXCLUDED.cryptogram_key_id,
         eci_indicator = EXCLUDED.eci_indicator,
         last_seen_at = EXCLUDED.last_seen_at, card_erased_at = NULL,
         ended_at = CASE WHEN ${CHANGED} THEN NULL ELSE p.ended_at END,
         ended_reason = CASE WHEN ${CHANGED} THEN NULL ELSE p.ended_reason END,
         -- New card data from the merchant supersedes what the account updater had found.
         account_updated = CASE WHEN ${CHANGED} THEN false ELSE p.account_updated END,
         account_update_jwe = CASE WHEN ${CHANGED} THEN NULL ELSE p.account_update_jwe END,
         account_update_replaced = CASE WHEN ${CHANGED} THEN NULL ELSE p.account_update_replaced END,
         updated_at = now()
       WHERE EXCLUDED.last_seen_at >= p.last_seen_at
       RETURNING p.id`,
      [transactionId, merchantId, vid, cryptogram?.value ?? null, cryptogram?.keyId ?? null],
    );
    if (rows[0]) return rows[0].id;
    // Older than what is stored: the stored (newer) data wins.
    const [kept]: { id: string }[] = await m.query(
      `SELECT p.id FROM payment_methods p JOIN transactions t
          ON t.merchant_id = p.merchant_id AND t.account_id = p.account_id AND t.payment_method->>'id' = p.pm_id
        WHERE t.id = $1 AND t.merchant_id = $2`,
      [transactionId, merchantId],
    );
    return kept?.id ?? null;
  }

  /** The transaction of an attempt (no lock): the account updater's read before the attempt's steps. */
  static transactionOfAttempt(db: DataSource, attemptId: string): Promise<TransactionEntity | null> {
    return db
      .getRepository(TransactionEntity)
      .createQueryBuilder('t')
      .innerJoin(AttemptEntity, 'a', 'a.transaction_id = t.id')
      .where('a.id = :attemptId', { attemptId })
      .getOne();
  }

  /** The clear cryptogram the intake stored with a transaction (sealed into the payment method by the caller). */
  static async cryptogramOf(m: Sql, merchantId: string, transactionId: string): Promise<string | null> {
    const [row]: { cryptogram: string | null }[] = await m.query(
      `SELECT cryptogram FROM transactions WHERE id = $1 AND merchant_id = $2`,
      [transactionId, merchantId],
    );
    return row?.cryptogram ?? null;
  }

  static async get(m: Sql, merchantId: string, id: string): Promise<PaymentMethodRow | null> {
    const [row]: PaymentMethodRow[] = await m.query(
      `SELECT * FROM payment_methods WHERE id = $1 AND merchant_id = $2`,
      [id, merchantId],
    );
    return row ?? null;
  }

  /**
   * The account's payment methods not ended, in the order they are tried: primary, then most recently
   * seen. An erased card has no number left (nor a network token its cryptogram), but a processor's
   * token whose hash retention erased is still that token, as one sent without a hash is.
   */
  static alternatives(m: Sql, merchantId: string, accountId: string, except: string[]): Promise<PaymentMethodRow[]> {
    return m.query(
      `SELECT * FROM payment_methods
        WHERE merchant_id = $1 AND account_id = $2 AND ended_at IS NULL
          AND (card_erased_at IS NULL OR (card_kind = 'token' AND COALESCE(is_network_token, 0) = 0))
          AND NOT (id = ANY($3::uuid[]))
        ORDER BY is_primary DESC, last_seen_at DESC, created_at DESC`,
      [merchantId, accountId, except],
    );
  }

  /**
   * One charge decision at a time per customer (merchant account), held until the caller's
   * transaction ends: the in-flight check and the in-flight mark commit together.
   */
  static async lockAccount(m: EntityManager, merchantId: string, accountId: string): Promise<void> {
    await m.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [accountLockKey(merchantId, accountId)]);
  }

  /**
   * chargeInFlight of many customers in one statement: the `${merchantId}:${accountId}` of those
   * with another attempt at the processor right now (attempts in `except` left out).
   */
  static async chargesInFlight(
    m: Sql,
    accounts: readonly { merchantId: string; accountId: string }[],
    except: readonly string[],
  ): Promise<Set<string>> {
    if (accounts.length === 0) return new Set();
    const rows: { merchant_id: string; account_id: string }[] = await m.query(
      `SELECT DISTINCT t.merchant_id, t.account_id
         FROM unnest($1::uuid[], $2::text[]) AS c(merchant_id, account_id)
         JOIN transactions t ON t.merchant_id = c.merchant_id AND t.account_id = c.account_id
         JOIN attempts a ON a.transaction_id = t.id
        WHERE a.state = 'pending' AND a.prepared_at IS NOT NULL AND NOT (a.id = ANY($3::uuid[]))`,
      [accounts.map((a) => a.merchantId), accounts.map((a) => a.accountId), [...except]],
    );
    return new Set(rows.map((r) => `${r.merchant_id}:${r.account_id}`));
  }

  /** Many payment methods by id, each only with its own merchant's id (`get` of many). */
  static async getMany(
    m: Sql,
    refs: readonly { merchantId: string; id: string }[],
  ): Promise<Map<string, PaymentMethodRow>> {
    if (refs.length === 0) return new Map();
    const rows: PaymentMethodRow[] = await m.query(
      `SELECT p.* FROM unnest($1::uuid[], $2::uuid[]) AS r(id, merchant_id)
         JOIN payment_methods p ON p.id = r.id AND p.merchant_id = r.merchant_id`,
      [refs.map((r) => r.id), refs.map((r) => r.merchantId)],
    );
    return new Map(rows.map((r) => [r.id, r]));
  }

  /** Whether another attempt on this customer's transactions is at the processor right now. */
  static async chargeInFlight(
    m: Sql,
    merchantId: string,
    accountId: string,
    exceptAttemptId: string,
  ): Promise<boolean> {
    const rows: unknown[] = await m.query(
      `SELECT 1 FROM attempts a JOIN transactions t ON t.id = a.transaction_id
        WHERE a.state = 'pending' AND a.prepared_at IS NOT NULL AND a.id <> $3
          AND t.merchant_id = $1 AND t.account_id = $2 LIMIT 1`,
      [merchantId, accountId, exceptAttemptId],
    );
    return rows.length > 0;
  }

  /** The payment method can no longer be charged (account closed, token deleted, hard decline). */
  static async end(
    m: EntityManager,
    merchantId: string,
    id: string,
    reason: string,
    /** The card itself ends for the account: every payment method of it carrying the same card too. */
    opts: { sameCard?: boolean } = {},
  ): Promise<void> {
    if (!opts.sameCard) {
      await m.query(
        `UPDATE payment_methods SET ended_at = now(), ended_reason = $3, updated_at = now()
          WHERE id = $1 AND merchant_id = $2 AND ended_at IS NULL`,
        [id, merchantId, reason],
      );
      return;
    }
    await m.query(
      `UPDATE payment_methods p SET ended_at = now(), ended_reason = $3, updated_at = now()
         FROM payment_methods e
        WHERE e.id = $1 AND e.merchant_id = $2 AND p.merchant_id = e.merchant_id AND p.account_id = e.account_id
          AND p.ended_at IS NULL AND (p.id = e.id OR (e.card_hmac IS NOT NULL AND p.card_hmac = e.card_hmac))`,
      [id, merchantId, reason],
    );
  }

  /** The account updater was asked about this card data (not asked again for the same data). */
  static async markUpdaterChecked(
    m: EntityManager,
    merchantId: string,
    id: string,
    version: string | null,
  ): Promise<void> {
    await m.query(`UPDATE payment_methods SET updater_checked_version = $3 WHERE id = $1 AND merchant_id = $2`, [
      id,
      merchantId,
      version,
    ]);
  }

  /** New card data from the account updater: stored like any card, shown masked. */
  static async applyUpdate(m: EntityManager, merchantId: string, id: string, u: CardDataUpdate): Promise<void> {
    const c = u.card ?? null;
    await m.query(
      `UPDATE payment_methods SET
         -- The merchant's data it replaces (kept through later renewals): sent again, it is stale.
         account_update_replaced = CASE WHEN account_updated AND account_update_replaced IS NOT NULL
                                        THEN account_update_replaced
                                        ELSE jsonb_build_object('card_hmac', card_hmac, 'expiration_date', expiration_date) END,
         expiration_date = $3, account_updated = true, account_updated_at = now(),
         account_update_jwe = $4, ended_at = NULL, ended_reason = NULL, updated_at = now(),
         card_enc = COALESCE($5, card_enc), card_key_id = COALESCE($6, card_key_id),
         card_hmac = COALESCE($7, card_hmac), card_hmac_key_id = COALESCE($8, card_hmac_key_id),
         card_bin = COALESCE($9, card_bin), card_last4 = COALESCE($10, card_last4),
         account_hash = CASE WHEN $5::text IS NULL THEN account_hash ELSE $11 END,
         card_network = COALESCE($13, card_network),
         payment_method = CASE WHEN $12::text IS NULL THEN payment_method
                               ELSE jsonb_set(payment_method, '{card_account_display}', to_jsonb($12::text)) END
       WHERE id = $1 AND merchant_id = $2`,
      [
        id,
        merchantId,
        u.expirationDate,
        u.jwe,
        c?.cardEnc ?? null,
        c?.cardKeyId ?? null,
        c?.cardHmac ?? null,
        c?.cardHmacKeyId ?? null,
        c?.cardBin ?? null,
        c?.cardLast4 ?? null,
        c?.accountHash ?? null,
        c?.display ?? null,
        c?.cardNetwork ?? null,
      ],
    );
  }

  /**
   * The transaction charges this payment method from now on: its card columns become the payment
   * method's (the attempts read them). The clear cryptogram the intake stored is dropped: from now
   * on it exists only sealed in the payment method. The analytics card keys stay those of the card
   * the transaction had before (fixed now if the review had not fixed them yet: migration
   * FixedBreakdownKeys), so its figures stay under the card it failed on.
   */
  static async adopt(
    m: EntityManager,
    merchantId: string,
    transactionId: string,
    pmId: string,
    opts: { original?: boolean } = {},
  ): Promise<void> {
    // `original`: the payment method is the one the transaction was submitted with, so it is also the
    // card the original decline came from (set once), in the same statement.
    await m.query(
      `UPDATE transactions t SET payment_method_ref = p.id, card_kind = p.card_kind, card_enc = p.card_enc,
         original_payment_method_ref = CASE WHEN $4::boolean THEN coalesce(t.original_payment_method_ref, p.id)
                                            ELSE t.original_payment_method_ref END,
         card_key_id = p.card_key_id, card_hmac = p.card_hmac, card_hmac_key_id = p.card_hmac_key_id,
         card_bin = p.card_bin, card_last4 = p.card_last4, card_network = p.card_network,
         account_hash = p.account_hash, expiration_date = p.expiration_date, is_network_token = p.is_network_token,
         cryptogram = NULL, eci_indicator = p.eci_indicator, payment_method = p.payment_method,
         account_updated = p.account_updated, account_update_jwe = p.account_update_jwe, updated_at = now(),
         ${fixCardKeys('t')}
       FROM payment_methods p
       WHERE t.id = $1 AND t.merchant_id = $2 AND p.id = $3 AND p.merchant_id = $2`,
      [transactionId, merchantId, pmId, opts.original === true],
    );
  }

  /** A pending attempt charges another card than the one it was claimed with. */
  static async retargetAttempt(
    m: EntityManager,
    attemptId: string,
    card: { cardHmac: string | null; cardNetwork: string | null },
  ): Promise<void> {
    await m.query(`UPDATE attempts SET card_hmac = $2, card_network = $3 WHERE id = $1 AND prepared_at IS NULL`, [
      attemptId,
      card.cardHmac,
      card.cardNetwork,
    ]);
  }

  /**
   * The attempt, not sent yet, goes out on the card its transaction now holds (after the account
   * updater changed it): its fingerprint and network follow, so the network limits count it there.
   */
  static async retargetAttemptToTransaction(m: EntityManager, attemptId: string): Promise<void> {
    await m.query(
      `UPDATE attempts a SET card_hmac = t.card_hmac, card_network = t.card_network
         FROM transactions t WHERE a.id = $1 AND t.id = a.transaction_id AND a.prepared_at IS NULL`,
      [attemptId],
    );
  }

  /** The attempt goes out on this payment method: shown on the attempt from now on. */
  static async markAttemptPaymentMethod(
    m: EntityManager,
    attemptId: string,
    pmRef: string | null,
    view: Record<string, unknown>,
  ): Promise<void> {
    await m.query(`UPDATE attempts SET payment_method_ref = $2, payment_method_view = $3::jsonb WHERE id = $1`, [
      attemptId,
      pmRef,
      JSON.stringify(view),
    ]);
  }

  /** The merchant's account-updater key, or null (the updater is off for this merchant). */
  static async updaterKey(m: Sql, merchantId: string): Promise<{ jwk: Record<string, unknown>; alg: string } | null> {
    const [row]: { updater_public_key: Record<string, unknown> | null; updater_key_alg: string | null }[] =
      await m.query(`SELECT updater_public_key, updater_key_alg FROM merchants WHERE id = $1`, [merchantId]);
    if (!row?.updater_public_key || !row.updater_key_alg) return null;
    return { jwk: row.updater_public_key, alg: row.updater_key_alg };
  }

  /** Registers (or with null removes) a merchant's updater key; removing it withdraws the JWEs offered. */
  static async setUpdaterKey(
    m: Sql,
    login: string,
    key: { jwk: Record<string, unknown>; alg: string } | null,
  ): Promise<{ id: string; merchant_vid: string } | null> {
    const res: [{ id: string; merchant_vid: string }[], number] = await m.query(
      `UPDATE merchants SET updater_public_key = $2::jsonb, updater_key_alg = $3, updated_at = now()
        WHERE login = $1 RETURNING id, merchant_vid`,
      [login, key ? JSON.stringify(key.jwk) : null, key?.alg ?? null],
    );
    // TypeORM answers an UPDATE with [rows, affected].
    const merchant = res[0][0];
    if (!merchant) return null;
    if (!key) {
      await m.query(`UPDATE payment_methods SET account_update_jwe = NULL WHERE merchant_id = $1`, [merchant.id]);
      await m.query(
        `UPDATE transactions SET account_update_jwe = NULL WHERE merchant_id = $1 AND account_update_jwe IS NOT NULL`,
        [merchant.id],
      );
    }
    return merchant;
  }
}
