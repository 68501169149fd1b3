import { finished } from 'node:stream/promises';
import type { CardFingerprint } from '@retain/domain';
import type { PoolClient } from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import type { DataSource, EntityManager } from 'typeorm';
import { TransactionEntity, type StoredPaymentMethod } from '../entities';
import { fixCardKeys, fixClassKey } from '../migrations/1800100000100-FixedBreakdownKeys';

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
  /** 1: the token is a network token (DPAN), charged as its number. */
  is_network_token: number | null;
  card_jwe: string | null;
  card_network: string | null;
  payment_method: StoredPaymentMethod;
  division_number: string | null;
  billing_descriptor: string | null;
  auth_code: string;
  amount_minor: string;
  currency: string;
  submitted_ts: Date;
  /** When the original decline happened (the transaction's `timestamp`). */
  failed_at: Date;
  /** decisions §16: the original decline's Mastercard advice code, when submitted. */
  network_advice_code: string | null;
}

/**
 * A transaction the review passed with its first attempt planned: when it is due (none if a stop
 * arrived meanwhile), the decline's description and the plan's explanation.
 */
export interface FirstAttemptPass {
  transactionId: string;
  at: Date;
  authCodeDescription: string;
  plan: Record<string, unknown> | null;
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
  /** Null: not known from the token (the submitted BIN and last 4 stay). */
  bin: string | null;
  last4: string | null;
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

/** A new transaction's stored values, as intake builds them (intakeCopyLine writes them out). */
export interface IntakeRow {
  vid: string;
  merchantTxnId: string;
  amountMinor: string;
  currency: string;
  failedAt: string;
  submittedTs: string;
  divisionNumber: string | null;
  authCode: string;
  avsCode: string | null;
  cvnCode: string | null;
  paymentNetworkTransactionId: string | null;
  previousBillingCount: number | null;
  isNetworkToken: number | null;
  cryptogram: string | null;
  eciIndicator: string | null;
  networkAdviceCode: string | null;
  billingDescriptor: string | null;
  processorTransactionId: string | null;
  subscriptionId: string;
  accountId: string;
  account: unknown;
  subscription: unknown;
  paymentMethod: unknown;
  metadata: unknown;
  cardKind: string;
  cardJwe: string | null;
  cardEnc: string | null;
  cardKeyId: string | null;
  cardBin: string | null;
  cardLast4: string | null;
  cardNetwork: string | null;
  accountHash: string | null;
  expirationDate: string | null;
  /** The transaction's policy version (its experiment arm's, else the default). */
  policyVersion: string | null;
  experimentId: string | null;
  experimentArm: string | null;
}

/** The intake COPY's columns, in line order: intakeCopyLine's, then the card fingerprint's two. */
export const INTAKE_COPY_COLUMNS = [
  'vid',
  'merchant_id',
  'submission_id',
  'merchant_txn_id',
  'status',
  'review_status',
  'amount_minor',
  'currency',
  'failed_at',
  'submitted_ts',
  'status_changed_at',
  'division_number',
  'auth_code',
  'avs_code',
  'cvn_code',
  'payment_network_transaction_id',
  'previous_billing_count',
  'is_network_token',
  'cryptogram',
  'eci_indicator',
  'network_advice_code',
  'billing_descriptor',
  'processor_transaction_id',
  'subscription_id',
  'account_id',
  'account',
  'subscription',
  'payment_method',
  'metadata',
  'card_kind',
  'card_jwe',
  'card_enc',
  'card_key_id',
  'card_bin',
  'card_last4',
  'card_network',
  'account_hash',
  'expiration_date',
  'policy_version',
  'experiment_id',
  'experiment_arm',
  'card_hmac',
  'card_hmac_key_id',
] as const;

const INTAKE_COPY_SQL = `COPY transactions (${INTAKE_COPY_COLUMNS.join(', ')}) FROM STDIN`;

const COPY_ESCAPES: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/**
 * One value in COPY's text format: NULL is \N; a backslash, newline, carriage return or tab is
 * escaped, so no value can end its column or line early (nor spell \N or the end marker \.).
 */
export function copyValue(v: string | null): string {
  if (v === null) return '\\N';
  return /[\\\n\r\t]/.test(v) ? v.replace(/[\\\n\r\t]/g, (c) => COPY_ESCAPES[c]!) : v;
}

/**
 * A new transaction as a line of the intake COPY, without its card fingerprint columns (appended
 * by insertTransactions once settled) and without the line's end: a new transaction is `Failed`,
 * waiting for its review, its status changed when it was submitted.
 */
export function intakeCopyLine(merchantId: string, submissionId: string, r: IntakeRow): string {
  const json = (v: unknown): string => copyValue(JSON.stringify(v));
  const opt = (v: string | number | null): string => copyValue(v === null ? null : String(v));
  return [
    copyValue(r.vid),
    merchantId,
    submissionId,
    copyValue(r.merchantTxnId),
    'Failed',
    'pending',
    copyValue(r.amountMinor),
    copyValue(r.currency),
    copyValue(r.failedAt),
    copyValue(r.submittedTs),
    copyValue(r.submittedTs),
    opt(r.divisionNumber),
    copyValue(r.authCode),
    opt(r.avsCode),
    opt(r.cvnCode),
    opt(r.paymentNetworkTransactionId),
    opt(r.previousBillingCount),
    opt(r.isNetworkToken),
    opt(r.cryptogram),
    opt(r.eciIndicator),
    opt(r.networkAdviceCode),
    opt(r.billingDescriptor),
    opt(r.processorTransactionId),
    copyValue(r.subscriptionId),
    copyValue(r.accountId),
    json(r.account),
    json(r.subscription),
    json(r.paymentMethod),
    json(r.metadata),
    copyValue(r.cardKind),
    opt(r.cardJwe),
    opt(r.cardEnc),
    opt(r.cardKeyId),
    opt(r.cardBin),
    opt(r.cardLast4),
    opt(r.cardNetwork),
    opt(r.accountHash),
    opt(r.expirationDate),
    opt(r.policyVersion),
    opt(r.experimentId),
    opt(r.experimentArm),
  ].join('\t');
}

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

  /**
   * The merchant's submission rerun lock (an advisory lock held to the end of the transaction).
   * A call's first run takes it shared: first runs never wait for each other (calls with disjoint
   * keys save side by side). A run again after a race (a unique violation) or a deadlock takes it
   * exclusive: it waits for the first runs saving meanwhile to end, and new ones wait for it, so its
   * check sees every row that could meet its keys and nothing is inserted beside it. Without it a
   * loser ran again beside the other losers and the calls still arriving, lost again, and again:
   * 30 clients sending overlapping subscriptions had calls run 6 to 8 times, one short of the last
   * run allowed (after which the unique violation answered 500).
   */
  async lockForRerun(m: EntityManager, merchantId: string, alone: boolean): Promise<void> {
    await m.query(
      `SELECT ${alone ? 'pg_advisory_xact_lock' : 'pg_advisory_xact_lock_shared'}(hashtextextended($1, 0))`,
      [`retain:submission-rerun:${merchantId}`],
    );
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

  /**
   * A transaction rejected by the post-submission review may come again with the same id (decisions
   * §4, §6: a rejected one keeps status Failed). Only such a row is deleted (its refunds, attempts and
   * pushes' rows go with it, ON DELETE CASCADE): never one a stop or anything else has moved on.
   */
  async deleteReviewRejected(m: EntityManager, merchantId: string, merchantTxnIds: string[]): Promise<void> {
    await m.query(
      `DELETE FROM transactions WHERE merchant_id = $1 AND merchant_txn_id = ANY($2::text[])
          AND review_status = 'rejected' AND status = 'Failed'`,
      [merchantId, merchantTxnIds],
    );
  }

  /**
   * A chunk of new transactions in one COPY ... FROM STDIN (issue 14, intake): Postgres reads the
   * text format at a fraction of what json_to_recordset cost (it parsed each JSON record into a
   * tuple store first: ~24 µs per row, about half of the INSERT). `lines` are intakeCopyLine's, in
   * order; `fingerprints` their card fingerprints (null: no card number), settled against stored
   * rows (settleCardFingerprints) only after the chunk was built, so they are appended here as the
   * last two columns. Constraints and triggers act as for an INSERT (a unique violation fails the
   * COPY with the same error), and the COPY runs on the transaction's connection, queued behind
   * the statements sent before it.
   */
  async insertTransactions(
    m: EntityManager,
    lines: readonly string[],
    fingerprints: readonly (CardFingerprint | null)[],
  ): Promise<void> {
    await this.startInsertTransactions(m, lines, fingerprints).inserted;
  }

  /**
   * insertTransactions, in two steps for a caller that builds the next chunk meanwhile: `written`
   * resolves once the rows are on the connection (Postgres answered the COPY and has them: the
   * caller's own work no longer delays it), `inserted` once the COPY is done.
   */
  startInsertTransactions(
    m: EntityManager,
    lines: readonly string[],
    fingerprints: readonly (CardFingerprint | null)[],
  ): { written: Promise<void>; inserted: Promise<void> } {
    const started = (async () => {
      if (lines.length !== fingerprints.length) throw new Error('insertTransactions: one fingerprint per line');
      const runner = m.queryRunner;
      if (!runner?.isTransactionActive) throw new Error('insertTransactions: runs inside a database transaction');
      const client = (await runner.connect()) as PoolClient;
      let text = '';
      for (let i = 0; i < lines.length; i++) {
        const f = fingerprints[i];
        text += `${lines[i]}\t${copyValue(f?.value ?? null)}\t${copyValue(f?.keyId ?? null)}\n`;
      }
      const copy = client.query(copyFrom(INTAKE_COPY_SQL));
      // The write's callback runs once the data went out, after Postgres' CopyInResponse.
      const written = new Promise<void>((resolve) => copy.write(text, () => resolve()));
      copy.end();
      return { written, inserted: finished(copy) };
    })();
    const inserted = started.then((s) => s.inserted);
    // A failed COPY also ends `written` (rejected with `inserted`'s error), so no caller waits forever.
    const written = started.then((s) => Promise.race([s.written, s.inserted]));
    // Whoever awaits `inserted` gets the failure; `written` alone must not be an unhandled rejection.
    written.catch(() => undefined);
    return { written, inserted };
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
      `SELECT id, merchant_txn_id, card_kind, is_network_token, card_jwe, card_network, payment_method,
              division_number, billing_descriptor, auth_code, amount_minor, currency, submitted_ts, failed_at,
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

  /**
   * Locks the submission's pending transactions in merchant_txn_id order (a stop request's order).
   * `stopped`: a stop was requested before the review (read under the lock).
   */
  async lockPendingReview(
    m: EntityManager,
    merchantId: string,
    submissionId: string,
  ): Promise<{ id: string; stopped: boolean }[]> {
    return m.query(
      `SELECT id, stop_requested_at IS NOT NULL AS stopped FROM transactions
        WHERE merchant_id = $1 AND submission_id = $2 AND review_status = 'pending'
        ORDER BY merchant_txn_id FOR NO KEY UPDATE`,
      [merchantId, submissionId],
    );
  }

  /**
   * A transaction stopped (or stop requested) before its review, which it would have failed: left to
   * its stop (decisions §8: RET004 on a resubmission of its id, its refund kept), never rejected. Its
   * review ends as for a stopped one that passes (no attempt, the analytics breakdown keys fixed, its
   * decline class as the stop left it); the JWE that did not decrypt is dropped, nothing is remembered.
   */
  async closeReviewOfStopped(m: EntityManager, merchantId: string, transactionId: string): Promise<void> {
    await m.query(
      `UPDATE transactions SET review_status = 'passed', next_attempt_at = NULL, card_jwe = NULL, updated_at = now(),
         ${fixCardKeys('transactions')}, ${fixClassKey('transactions', 'transactions.auth_code_description')}
        WHERE id = $1 AND merchant_id = $2 AND stop_requested_at IS NOT NULL`,
      [transactionId, merchantId],
    );
  }

  /**
   * The review rejected the transaction: no attempt, and the JWE is dropped. Its analytics breakdown
   * keys are fixed (migration FixedBreakdownKeys), as for a passed one.
   */
  async rejectReview(m: EntityManager, merchantId: string, transactionId: string): Promise<void> {
    await m.query(
      `UPDATE transactions SET review_status = 'rejected', next_attempt_at = NULL, card_jwe = NULL, updated_at = now(),
         ${fixCardKeys('transactions')}, ${fixClassKey('transactions', 'transactions.auth_code_description')}
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
      `UPDATE transactions SET card_hmac = $2, card_bin = COALESCE(card_bin, $3), card_last4 = COALESCE($4, card_last4),
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

  /**
   * Passed, each first attempt due at its `at` (unless a stop arrived meanwhile). Fixes the analytics breakdown
   * keys (migration FixedBreakdownKeys): the class written here, the card and address reviewed (or
   * fixed already when the review adopted another payment method).
   */
  async passWithFirstAttempts(
    m: EntityManager,
    merchantId: string,
    passes: readonly FirstAttemptPass[],
  ): Promise<void> {
    if (passes.length === 0) return;
    // One statement for the whole review (its rows are locked): each row's own values from the arrays.
    await m.query(
      `UPDATE transactions t SET review_status = 'passed', updated_at = now(), auth_code_description = x.description,
         next_attempt_at = CASE WHEN t.stop_requested_at IS NULL THEN x.at END, next_attempt_plan = x.plan,
         ${fixCardKeys('t')}, ${fixClassKey('t', 'x.description::varchar')}
         FROM unnest($2::uuid[], $3::timestamptz[], $4::text[], $5::jsonb[]) AS x(id, at, description, plan)
        WHERE t.id = x.id AND t.merchant_id = $1`,
      [
        merchantId,
        passes.map((p) => p.transactionId),
        passes.map((p) => p.at),
        passes.map((p) => p.authCodeDescription),
        passes.map((p) => (p.plan === null ? null : JSON.stringify(p.plan))),
      ],
    );
  }

  /**
   * Passed, but the original decline is never retried: `status` (Cancelled) with no attempt, unless
   * a stop arrived meanwhile. The review_status write and the status write stay two statements (as
   * the review has always done); the first fixes the analytics breakdown keys, the class the second
   * writes included (the caller holds the row lock: no stop arrives between them). True when the
   * status was set.
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
      `UPDATE transactions SET review_status = 'passed', updated_at = now(), ${fixCardKeys('transactions')},
         ${fixClassKey('transactions', `CASE WHEN stop_requested_at IS NULL THEN 'Hard Failure' ELSE auth_code_description END`)}
       WHERE id = $1 AND merchant_id = $2`,
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
