import type { CardFingerprint } from '@retain/domain';
import type { DataSource, EntityManager } from 'typeorm';
import { TransactionEntity, type StoredPaymentMethod } from '../entities';

/** Something that runs SQL: the DataSource outside a transaction, an EntityManager inside one. */
type Sql = Pick<EntityManager, 'query'> | Pick<DataSource, 'query'>;

/** A stored transaction of this merchant that a new submission's ids or subscriptions meet. */
export interface StoredSubmissionRow {
  merchant_txn_id: string;
  subscription_id: string;
  status: string;
  review_status: string;
}

/** A transaction waiting for the post-submission review. */
export interface PendingReviewRow {
  id: string;
  merchant_txn_id: string;
  card_kind: 'clear' | 'jwe' | 'masked' | 'token';
  card_jwe: string | null;
  card_network: string | null;
  payment_method: StoredPaymentMethod;
  division_number: string | null;
  billing_descriptor: string | null;
  auth_code: string;
  amount_minor: string;
  submitted_ts: Date;
  /** When the original decline happened (the transaction's `timestamp`). */
  failed_at: Date;
  /** decisions §16: the original decline's Mastercard advice code, when submitted. */
  network_advice_code: string | null;
}

/** The card columns a review learned from a decrypted card number. */
export interface ReviewedPanCard {
  cardEnc: string;
  cardKeyId: string;
  cardBin: string;
  cardLast4: string;
  cardNetwork: string | null;
  accountHash: string;
  paymentMethod: StoredPaymentMethod;
}

/** The card columns a review learned by de-tokenizing (the token stays the instrument). */
export interface ReviewedTokenCard {
  bin: string;
  last4: string;
  network: string | null;
  paymentMethod: StoredPaymentMethod;
}

/**
 * Submissions and the transactions they brought in, up to the end of their review (intake's save,
 * the validator's review). Every method that reads or writes a merchant's transactions takes the
 * merchant id. The review starts from a job that carries only the submission id: `forReview` and
 * `lockForReview` are id-scoped by design and hand back the submission's merchant id, which the
 * review carries into every other call.
 */
/**
 * The unique indexes two concurrent submissions of one merchant meet at when they race on one key
 * (no lock serialises them): transaction id, subscription in recovery, account external_id.
 */
export const SUBMISSION_RACE_CONSTRAINTS: readonly string[] = [
  'transactions_merchant_txn',
  'transactions_recovering_subscription',
  'merchant_accounts_external_id',
];

export class SubmissionsRepository {
  constructor(private readonly db: DataSource) {}

  // ---- intake (POST /retain/transactions) ----

  /** Which account of this merchant holds each of these external ids (external_id -> account id). */
  async externalIdHolders(m: Sql, merchantId: string, externalIds: string[]): Promise<Map<string, string>> {
    if (externalIds.length === 0) return new Map();
    const rows: { external_id: string; account_id: string }[] = await m.query(
      `SELECT external_id, account_id FROM merchant_accounts WHERE merchant_id = $1 AND external_id = ANY($2::text[])`,
      [merchantId, externalIds],
    );
    return new Map(rows.map((r) => [r.external_id, r.account_id]));
  }

  /**
   * Remembers the external_id of accepted transactions' accounts (one row per account: the caller
   * passes each account once, and only accounts that name an external_id: the table exists to hold
   * them). A submission without an external_id keeps the one the account has.
   */
  async rememberAccounts(
    m: Sql,
    merchantId: string,
    accounts: { accountId: string; externalId: string | null }[],
  ): Promise<void> {
    if (accounts.length === 0) return;
    await m.query(
      `INSERT INTO merchant_accounts (merchant_id, account_id, external_id)
       SELECT $1, a.account_id, a.external_id FROM unnest($2::text[], $3::text[]) AS a(account_id, external_id)
       ON CONFLICT (merchant_id, account_id) DO UPDATE
         SET external_id = COALESCE(EXCLUDED.external_id, merchant_accounts.external_id), updated_at = now()
       WHERE EXCLUDED.external_id IS NOT NULL AND EXCLUDED.external_id IS DISTINCT FROM merchant_accounts.external_id`,
      [merchantId, accounts.map((a) => a.accountId), accounts.map((a) => a.externalId)],
    );
  }

  /**
   * This merchant's stored transactions with one of these ids, or still being recovered on one of
   * these subscriptions (what RETDUP2 / RET004 / RET003 need): lookups by key in the unique
   * (merchant_txn_id, merchant_id) and (subscription_id, merchant_id) indexes, never a scan of the
   * merchant's rows, whatever the statistics say (migration KeyLedLookups, issue 14).
   */
  storedMatching(
    m: Sql,
    merchantId: string,
    merchantTxnIds: string[],
    subscriptionIds: string[],
  ): Promise<StoredSubmissionRow[]> {
    return m.query(storedMatchingQuery, [merchantId, merchantTxnIds, subscriptionIds]);
  }

  /** The submission row; returns its id. */
  async create(
    m: EntityManager,
    merchantId: string,
    requestId: string,
    counts: { received: number; accepted: number; rejected: number },
  ): Promise<string> {
    const [submission]: { id: string }[] = await m.query(
      `INSERT INTO submissions (merchant_id, request_id, received_count, accepted_count, rejected_count)
       VALUES ($1, $2, $3, $4, $5) RETURNING id`,
      [merchantId, requestId, counts.received, counts.accepted, counts.rejected],
    );
    return submission!.id;
  }

  /** A transaction rejected by the post-submission review may come again with the same id. */
  async deleteReviewRejected(m: EntityManager, merchantId: string, merchantTxnIds: string[]): Promise<void> {
    await m.query(
      `DELETE FROM transactions WHERE merchant_id = $1 AND merchant_txn_id = ANY($2::text[]) AND review_status = 'rejected'`,
      [merchantId, merchantTxnIds],
    );
  }

  /**
   * One multi-row INSERT through json_to_recordset: a single round trip for up to 1000 rows. `json`,
   * not `jsonb`: the text is read once, record by record, instead of first being built into a jsonb
   * tree and then read (3-4 ms less Postgres time per 300 rows on the fourth session's machine).
   * `recordsJson` is a JSON array of records carrying the column values by the names of the
   * recordset below (serialized by the caller, which does it while the INSERT before is running); a
   * record's own `policy_version` (its policy experiment arm's) wins over the default `policyVersion`.
   * `fingerprints` are the records' card fingerprints, in their order (null: no card number), zipped
   * in by ROWS FROM: they are settled against stored rows (settleCardFingerprints) only after the
   * chunk is serialized.
   */
  async insertTransactions(
    m: EntityManager,
    merchantId: string,
    submissionId: string,
    recordsJson: string,
    fingerprints: readonly (CardFingerprint | null)[],
    policyVersion: string | null = null,
  ): Promise<void> {
    await m.query(
      `INSERT INTO transactions (policy_version, experiment_id, experiment_arm, network_advice_code, vid, merchant_id, submission_id, merchant_txn_id, status, review_status,
         amount_minor, currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code,
         avs_code, cvn_code, payment_network_transaction_id, previous_billing_count, is_network_token,
         cryptogram, eci_indicator, billing_descriptor, processor_transaction_id, subscription_id, account_id,
         account, subscription, payment_method, metadata, card_kind, card_jwe, card_enc, card_key_id,
         card_hmac, card_hmac_key_id, card_bin, card_last4, card_network, account_hash, expiration_date)
       SELECT coalesce(x.policy_version, $4::text), x.experiment_id, x.experiment_arm, x.network_advice_code, x.vid, $1::uuid, $2::uuid, x.id, 'Failed', 'pending', x.amount_minor, x.currency, x.failed_at,
         x.submitted_ts, x.submitted_ts, x.division_number, x.auth_code, x.avs_code, x.cvn_code,
         x.payment_network_transaction_id, x.previous_billing_count, x.is_network_token, x.cryptogram,
         x.eci_indicator, x.billing_descriptor, x.processor_transaction_id, x.subscription_id, x.account_id,
         x.account, x.subscription, x.payment_method, x.metadata, x.card_kind, x.card_jwe, x.card_enc,
         x.card_key_id, x.card_hmac, x.card_hmac_key_id, x.card_bin, x.card_last4, x.card_network, x.account_hash,
         x.expiration_date
       FROM ROWS FROM (json_to_recordset($3::json) AS (vid text, id text, amount_minor bigint, currency text,
         failed_at timestamptz, submitted_ts timestamptz, division_number text, auth_code text, avs_code text,
         cvn_code text, payment_network_transaction_id text, previous_billing_count int, is_network_token smallint,
         cryptogram text, eci_indicator text, billing_descriptor text, processor_transaction_id text,
         subscription_id text, account_id text, account jsonb, subscription jsonb, payment_method jsonb,
         metadata jsonb, card_kind text, card_jwe text, card_enc text, card_key_id text, card_bin text,
         card_last4 text, card_network text, account_hash text, expiration_date text, policy_version text,
         experiment_id text, experiment_arm text, network_advice_code text),
         unnest($5::text[]), unnest($6::text[]))
         AS x(vid, id, amount_minor, currency, failed_at, submitted_ts, division_number, auth_code, avs_code,
           cvn_code, payment_network_transaction_id, previous_billing_count, is_network_token, cryptogram,
           eci_indicator, billing_descriptor, processor_transaction_id, subscription_id, account_id, account,
           subscription, payment_method, metadata, card_kind, card_jwe, card_enc, card_key_id, card_bin, card_last4,
           card_network, account_hash, expiration_date, policy_version, experiment_id, experiment_arm,
           network_advice_code, card_hmac, card_hmac_key_id)`,
      [
        merchantId,
        submissionId,
        recordsJson,
        policyVersion,
        fingerprints.map((f) => f?.value ?? null),
        fingerprints.map((f) => f?.keyId ?? null),
      ],
    );
  }

  // ---- the post-submission review (submission-validator) ----

  /** The submission's merchant and whether it was reviewed (no lock). Id-scoped: see the class. */
  async forReview(submissionId: string): Promise<{ merchant_id: string; reviewed_at: Date | null } | null> {
    const [sub]: { merchant_id: string; reviewed_at: Date | null }[] = await this.db.query(
      `SELECT merchant_id, reviewed_at FROM submissions WHERE id = $1`,
      [submissionId],
    );
    return sub ?? null;
  }

  /** The submission's transactions waiting for review, in merchant_txn_id order (no lock). */
  pendingReview(merchantId: string, submissionId: string): Promise<PendingReviewRow[]> {
    return this.db.query(
      `SELECT id, merchant_txn_id, card_kind, card_jwe, card_network, payment_method, division_number,
              billing_descriptor, auth_code, amount_minor, submitted_ts, failed_at,
              network_advice_code
         FROM transactions WHERE merchant_id = $1 AND submission_id = $2 AND review_status = 'pending'
        ORDER BY merchant_txn_id`,
      [merchantId, submissionId],
    );
  }

  /**
   * Locks the submission row FOR NO KEY UPDATE (its key never changes, so a foreign-key check from a
   * stop request does not wait on it). Id-scoped: see the class.
   */
  async lockForReview(
    m: EntityManager,
    submissionId: string,
  ): Promise<{ id: string; merchant_id: string; request_id: string; reviewed_at: Date | null } | null> {
    const [sub]: { id: string; merchant_id: string; request_id: string; reviewed_at: Date | null }[] = await m.query(
      `SELECT id, merchant_id, request_id, reviewed_at FROM submissions WHERE id = $1 FOR NO KEY UPDATE`,
      [submissionId],
    );
    return sub ?? null;
  }

  /** Locks the submission's pending transactions in merchant_txn_id order (a stop request's order). */
  async lockPendingReview(m: EntityManager, merchantId: string, submissionId: string): Promise<string[]> {
    const locked: { id: string }[] = await m.query(
      `SELECT id FROM transactions WHERE merchant_id = $1 AND submission_id = $2 AND review_status = 'pending'
        ORDER BY merchant_txn_id FOR NO KEY UPDATE`,
      [merchantId, submissionId],
    );
    return locked.map((r) => r.id);
  }

  /** The review rejected the transaction: no attempt, and the JWE is dropped. */
  async rejectReview(m: EntityManager, merchantId: string, transactionId: string): Promise<void> {
    await m.query(
      `UPDATE transactions SET review_status = 'rejected', next_attempt_at = NULL, card_jwe = NULL, updated_at = now()
        WHERE id = $1 AND merchant_id = $2`,
      [transactionId, merchantId],
    );
  }

  /** Stores a decrypted card (sealed; the JWE is dropped). The caller holds the row lock. */
  async storePanCard(
    m: EntityManager,
    merchantId: string,
    transactionId: string,
    c: ReviewedPanCard,
    fingerprint: { value: string; keyId: string } | null,
  ): Promise<void> {
    await m.query(
      `UPDATE transactions SET card_enc = $2, card_key_id = $3, card_hmac = $4, card_bin = $5, card_last4 = $6,
         card_network = $7, account_hash = $8, payment_method = $9::jsonb, card_jwe = NULL, card_hmac_key_id = $10
       WHERE id = $1 AND merchant_id = $11`,
      [
        transactionId,
        c.cardEnc,
        c.cardKeyId,
        fingerprint?.value ?? null,
        c.cardBin,
        c.cardLast4,
        c.cardNetwork,
        c.accountHash,
        JSON.stringify(c.paymentMethod),
        fingerprint?.keyId ?? null,
        merchantId,
      ],
    );
  }

  /** Stores what de-tokenizing learned of the card. The caller holds the row lock. */
  async storeTokenCard(
    m: EntityManager,
    merchantId: string,
    transactionId: string,
    c: ReviewedTokenCard,
    fingerprint: { value: string; keyId: string } | null,
  ): Promise<void> {
    await m.query(
      `UPDATE transactions SET card_hmac = $2, card_bin = COALESCE(card_bin, $3), card_last4 = $4,
         card_network = COALESCE(card_network, $5), payment_method = $6::jsonb, card_hmac_key_id = $7
       WHERE id = $1 AND merchant_id = $8`,
      [
        transactionId,
        fingerprint?.value ?? null,
        c.bin,
        c.last4,
        c.network,
        JSON.stringify(c.paymentMethod),
        fingerprint?.keyId ?? null,
        merchantId,
      ],
    );
  }

  /** Passed, first attempt due at `at` (unless a stop arrived meanwhile). */
  async passWithFirstAttempt(
    m: EntityManager,
    merchantId: string,
    transactionId: string,
    at: Date,
    authCodeDescription: string,
    plan: Record<string, unknown> | null = null,
  ): Promise<void> {
    await m.query(
      `UPDATE transactions SET review_status = 'passed', updated_at = now(), auth_code_description = $3,
         next_attempt_at = CASE WHEN stop_requested_at IS NULL THEN $2::timestamptz END, next_attempt_plan = $5
       WHERE id = $1 AND merchant_id = $4`,
      [transactionId, at, authCodeDescription, merchantId, plan === null ? null : JSON.stringify(plan)],
    );
  }

  /**
   * Passed, but the original decline is never retried: `status` (Cancelled) with no attempt, unless
   * a stop arrived meanwhile. The review_status write and the status write stay two statements (as
   * the review has always done). True when the status was set.
   */
  async passWithoutAttempts(
    m: EntityManager,
    merchantId: string,
    transactionId: string,
    status: string,
    /** Excess-reattempt fees: none paid (no attempt), and what a naive daily schedule would have paid. */
    naiveNetworkFeesMinor: number | null = null,
  ): Promise<boolean> {
    await m.query(
      `UPDATE transactions SET review_status = 'passed', updated_at = now() WHERE id = $1 AND merchant_id = $2`,
      [transactionId, merchantId],
    );
    // TypeORM answers an UPDATE with [rows, affected].
    const [, affected]: [unknown[], number] = await m.query(
      `UPDATE transactions SET status = $2, status_changed_at = now(), auth_code_description = 'Hard Failure',
         next_attempt_at = NULL, updated_at = now(),
         network_fees_minor = CASE WHEN $4::int IS NULL THEN NULL ELSE 0 END, naive_network_fees_minor = $4::int
       WHERE id = $1 AND merchant_id = $3 AND stop_requested_at IS NULL`,
      [transactionId, status, merchantId, naiveNetworkFeesMinor],
    );
    return affected > 0;
  }

  /** The submission is reviewed (never reviewed again). */
  async markReviewed(m: EntityManager, submissionId: string, errorCount: number): Promise<void> {
    await m.query(`UPDATE submissions SET reviewed_at = now(), review_error_count = $2 WHERE id = $1`, [
      submissionId,
      errorCount,
    ]);
  }

  /** One of the merchant's transactions, as an entity (for the push that announces it). */
  transaction(m: EntityManager, merchantId: string, transactionId: string): Promise<TransactionEntity> {
    return m.getRepository(TransactionEntity).findOneOrFail({ where: { id: transactionId, merchantId } });
  }
}

/** The duplicate check of a POST (exported for the plan test). */
export const storedMatchingQuery = `SELECT merchant_txn_id, subscription_id, status, review_status
  FROM retain_stored_matching($1::uuid, $2::text[], $3::text[])`;
