import { HttpException, HttpStatus, Inject, Injectable, Logger } from '@nestjs/common';
import {
  MAX_TRANSACTIONS_PER_CALL,
  MERCHANT_ID_MAX_LENGTH,
  longerThan,
  validateSubmission,
  type NormalizedTransaction,
} from '@retain/api-contract';
import type { RetainConfig } from '@retain/config';
import {
  RECOVERING_STATUSES,
  HOLDOUT_ARM,
  assignArm,
  RetCode,
  RetMessage,
  TransactionStatus,
  cardBrand,
  cardFingerprintCandidates,
  newVid,
  sealCardNumber,
  sealText,
  type CardFingerprint,
  type ErrorEntry,
} from '@retain/domain';
import {
  ExperimentsRepository,
  SUBMISSION_RACE_CONSTRAINTS,
  SubmissionsRepository,
  inTransactionWithRetry,
  intakeCopyLine,
  settleCardFingerprints,
  type ExperimentRow,
  type IntakeRow,
  type StoredSubmissionRow,
} from '@retain/db';
import { RETAIN_CONFIG, RetainMetrics } from '@retain/platform';
import { OutboxRelay, QueueName, addToOutbox } from '@retain/queues';
import { DataSource, type EntityManager } from 'typeorm';
import type { AuthenticatedMerchant } from '../auth/merchant-auth.guard';

export interface RejectedEntry {
  id: string;
  errors: ErrorEntry[];
}

export interface SubmissionResult {
  status: 200 | 207;
  body?: { success_count: number; error_count: number; rejected: RejectedEntry[] };
}

/** What the checks read of stored rows: transactions by id or subscription, accounts by external_id. */
interface Stored {
  rows: StoredSubmissionRow[];
  holders: Map<string, string>;
  /** The merchant's running policy experiment, if any. */
  experiment: ExperimentRow | null;
}

/**
 * One item of the call as the checks against stored rows see it: its keys (null: absent or invalid)
 * and, when every check so far passed, the transaction to save (null: already rejected, checked only
 * to list all its failures; decisions §4).
 */
interface CheckedItem {
  index: number;
  id: string | null;
  subscriptionId: string | null;
  accountId: string | null;
  externalId: string | null;
  value: NormalizedTransaction | null;
}

/** A submission's candidates after the checks against stored rows. */
interface CheckedCandidates {
  accepted: NormalizedTransaction[];
  /** Accepted ids whose stored row was rejected by its review (deleted before the insert). */
  replacing: string[];
  /** The running policy experiment when the early lookups read it (undefined: not read yet). */
  experiment?: ExperimentRow | null;
}

/** The card columns of one transaction as stored (card data sealed, never in clear). */
interface CardColumns {
  jwe: string | null;
  enc: string | null;
  keyId: string | null;
  bin: string | null;
  last4: string | null;
  network: string | null;
  accountHash: string | null;
  display: string | null;
}

/**
 * Rows per INSERT statement. Each chunk is built (sealed, fingerprinted, serialized) while Postgres
 * inserts the one before, and building a row takes about half as long as inserting it, so each
 * chunk may be a little over twice the one before without Postgres waiting for it. The first is
 * built while Postgres waits: small, so the INSERTs start early (40, 100, 250, 400, then 400s).
 */
const FIRST_INSERT_CHUNK = 40;
const MAX_INSERT_CHUNK = 400;
const nextChunkSize = (size: number): number => Math.min(MAX_INSERT_CHUNK, Math.round(size * 2.5));

const codeUnitOrder = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/**
 * The order every call inserts its rows in: by subscription id, then id (code-unit order; an accepted
 * call has each subscription once). Two calls racing on keys wait for each other's rows at the unique
 * indexes (id, subscription in recovery); in body order, two calls holding the same rows in different
 * orders each waited on the other's, a deadlock Postgres broke after deadlock_timeout (1 s) by
 * aborting one, which ran again into the next cycle: a few clients resending one batch each in its
 * own order took tens of seconds and mostly ended 503. In one order, the first call to insert a row
 * is ahead on every later one: the others only wait for it to commit, then see its rows (RETDUP2 by
 * id, RET003 by subscription). A row's keys are the same in every call that sends it, so a race on
 * ids or on subscriptions never deadlocks (only one id sent with different subscriptions may).
 */
const insertOrder = (a: NormalizedTransaction, b: NormalizedTransaction): number =>
  codeUnitOrder(a.subscription.id, b.subscription.id) || codeUnitOrder(a.id, b.id);

/** Resolves once a query started just before is written to its connection (after TypeORM's microtasks). */
const onTheWire = (): Promise<void> => new Promise<void>((resolve) => setImmediate(resolve));

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const NO_KEYS = { subscriptionId: null, accountId: null, externalId: null } as const;

const FINISHED_IS_RET004 = (status: string): boolean => !RECOVERING_STATUSES.includes(status as never);

/**
 * A stored transaction a new one with its id may replace (decisions §4): one the review rejected,
 * which keeps status Failed (§6). One stopped before its review, or moved on in any other way, is
 * RET004 / RETDUP2 like any other.
 */
const REPLACEABLE = (prior: { review_status: string; status: string }): boolean =>
  prior.review_status === 'rejected' && prior.status === TransactionStatus.Failed;

/**
 * POST /retain/transactions: primary validation, duplicate and subscription checks against
 * Postgres, then ONE database transaction saving the submission, the accepted transactions and
 * the outbox row that starts the post-submission review (decisions §4).
 */
@Injectable()
export class SubmissionService {
  private readonly logger = new Logger(SubmissionService.name);

  constructor(
    private readonly db: DataSource,
    private readonly submissions: SubmissionsRepository,
    private readonly relay: OutboxRelay,
    private readonly metrics: RetainMetrics,
    @Inject(RETAIN_CONFIG) private readonly config: RetainConfig,
  ) {}

  async submit(
    merchant: AuthenticatedMerchant,
    body: unknown,
    dryrun: boolean,
    requestId: string,
  ): Promise<SubmissionResult> {
    // The checks' lookups go out before validating: Postgres reads the stored rows of every id,
    // subscription and external_id the body names while Node validates it.
    let stored = this.lookUpStored(merchant.id, body);
    if (stored !== null) await onTheWire(); // validating takes the event loop for a while
    const validated = validateSubmission(body);
    if (!validated.ok) throw new HttpException(validated.error, HttpStatus.BAD_REQUEST);

    const errors = new Map<number, ErrorEntry[]>();
    const addError = (index: number, e: ErrorEntry): void => {
      errors.set(index, [...(errors.get(index) ?? []), e]);
    };
    // Every item goes to the checks against stored rows, the rejected ones too (decisions §4: all
    // failures of a transaction are listed); only candidates (value set) can be accepted.
    const items: CheckedItem[] = [];
    const seenIds = new Set<string>();
    for (const item of validated.items) {
      // Same id twice in one call: the first occurrence is processed, each later one RETDUP.
      if (item.id !== null && seenIds.has(item.id)) {
        addError(item.index, { code: RetCode.RETDUP, message: RetMessage.duplicateInSubmission });
      }
      if (item.id !== null) seenIds.add(item.id);
      if ('errors' in item && item.errors.length > 0) {
        for (const e of item.errors) addError(item.index, e);
        items.push({ index: item.index, id: item.id, ...NO_KEYS, ...item.keys, value: null });
      } else if ('value' in item) {
        const v = item.value;
        items.push({
          index: item.index,
          id: v.id,
          subscriptionId: v.subscription.id,
          accountId: v.account.id,
          externalId: v.account.external_id || null,
          value: errors.has(item.index) ? null : v,
        });
      }
    }
    const candidates = items.flatMap((c) => (c.value === null ? [] : [c.value]));

    // Rejections found while validating; a saving transaction that is retried starts again from these.
    const validationErrors = new Map(errors);
    const run = async (m: EntityManager | DataSource): Promise<CheckedCandidates> => {
      errors.clear();
      for (const [index, errs] of validationErrors) errors.set(index, [...errs]);
      // The first run uses the early lookups; a saving transaction run again (a concurrent call took
      // a key meanwhile) reads again inside itself.
      const early = stored === null ? null : await stored;
      stored = null;
      return this.checkAgainstStored(m, merchant.id, items, addError, early);
    };

    let accepted: NormalizedTransaction[];
    if (dryrun) {
      accepted = (await run(this.db)).accepted;
    } else {
      accepted = await this.save(merchant, requestId, validated.items.length, candidates, run, () => errors.size);
    }

    const rejected: RejectedEntry[] = [...errors.entries()]
      .sort((a, b) => a[0] - b[0])
      .map(([index, errs]) => ({ id: validated.items[index]?.id ?? `transactions[${index}]`, errors: errs }));
    if (!dryrun) {
      this.metrics.submissions.inc({ result: 'accepted' }, accepted.length);
      this.metrics.submissions.inc({ result: 'rejected' }, rejected.length);
    }
    if (rejected.length === 0) return { status: 200 };
    return {
      status: 207,
      body: { success_count: accepted.length, error_count: rejected.length, rejected },
    };
  }

  /**
   * The stored rows the checks read, for every id, subscription id and external_id of the body's
   * items that is a string (valid or not: the checks only look up the candidates' keys, so a
   * superset is the same answer), on a pool connection of its own. Null for a body that is not a
   * list of at most MAX_TRANSACTIONS_PER_CALL items, and when the lookup fails (an id Postgres
   * cannot take, such as one with a NUL, is then rejected by validation): the checks then read
   * inside the saving transaction.
   */
  private lookUpStored(merchantId: string, body: unknown): Promise<Stored | null> | null {
    const items = isObject(body) ? body['transactions'] : undefined;
    if (!Array.isArray(items) || items.length > MAX_TRANSACTIONS_PER_CALL) return null;
    const ids = new Set<string>();
    const subs = new Set<string>();
    const externalIds = new Set<string>();
    // A key longer than any valid one is rejected by validation: not worth sending to Postgres.
    const key = (v: unknown): v is string => typeof v === 'string' && !longerThan(v, MERCHANT_ID_MAX_LENGTH);
    for (const t of items as unknown[]) {
      if (!isObject(t)) continue;
      if (key(t['id'])) ids.add(t['id']);
      const sub = t['subscription'];
      if (isObject(sub) && key(sub['id'])) subs.add(sub['id']);
      const account = t['account'];
      if (isObject(account) && key(account['external_id'])) externalIds.add(account['external_id']);
    }
    if (ids.size === 0 && subs.size === 0) return null;
    return Promise.all([
      this.submissions.storedMatching(this.db, merchantId, [...ids], [...subs]),
      this.submissions.externalIdHolders(this.db, merchantId, [...externalIds]),
      ExperimentsRepository.running(this.db, merchantId),
    ]).then(
      ([rows, holders, experiment]) => ({ rows, holders, experiment }),
      () => null,
    );
  }

  /**
   * RETDUP2 / RET004 / RET003 / RET012 against stored rows of this merchant (`early`: already read),
   * for every item with the keys it has: a rejected item gets its failures listed too, and is never
   * accepted. The lookups stay index lookups by id, subscription id and external_id.
   */
  private async checkAgainstStored(
    m: EntityManager | DataSource,
    merchantId: string,
    items: CheckedItem[],
    addError: (index: number, e: ErrorEntry) => void,
    early: Stored | null,
  ): Promise<CheckedCandidates> {
    const ids = [...new Set(items.flatMap((c) => (c.id === null ? [] : [c.id])))];
    const subs = [...new Set(items.flatMap((c) => (c.subscriptionId === null ? [] : [c.subscriptionId])))];
    const externalIds = [...new Set(items.flatMap((c) => (c.externalId === null ? [] : [c.externalId])))];
    if (ids.length === 0 && subs.length === 0 && externalIds.length === 0) return { accepted: [], replacing: [] };
    const existing = early?.rows ?? (await this.submissions.storedMatching(m, merchantId, ids, subs));
    const byId = new Map(existing.map((r) => [r.merchant_txn_id, r]));
    const recoveringSubs = new Map<string, string>();
    for (const r of existing) {
      if (r.review_status !== 'rejected' && RECOVERING_STATUSES.includes(r.status as never)) {
        recoveringSubs.set(r.subscription_id, r.merchant_txn_id);
      }
    }
    // external_id is unique within the merchant's accounts: its holder, as stored and as this call assigns.
    const holders = early?.holders ?? (await this.submissions.externalIdHolders(m, merchantId, externalIds));
    const accepted: NormalizedTransaction[] = [];
    const replacing: string[] = [];
    for (const { index, id, subscriptionId, accountId, externalId, value } of items) {
      const prior = id === null ? undefined : byId.get(id);
      let ok = value !== null;
      if (prior && !REPLACEABLE(prior)) {
        ok = false;
        addError(
          index,
          FINISHED_IS_RET004(prior.status)
            ? { code: RetCode.RET004, message: RetMessage.previouslyProcessed }
            : { code: RetCode.RETDUP2, message: RetMessage.duplicatePrior },
        );
      }
      const holder = subscriptionId === null ? undefined : recoveringSubs.get(subscriptionId);
      if (holder !== undefined && holder !== id) {
        ok = false;
        addError(index, { code: RetCode.RET003, message: RetMessage.subscriptionProcessing });
      }
      const holder2 = externalId === null ? undefined : holders.get(externalId);
      if (holder2 !== undefined && accountId !== null && holder2 !== accountId) {
        ok = false;
        addError(index, { code: RetCode.RET012, message: RetMessage.accountUpdateFailed });
      }
      if (ok && value !== null) {
        accepted.push(value);
        if (prior) replacing.push(value.id); // rejected by its review: this one takes its place
        recoveringSubs.set(value.subscription.id, value.id);
        if (externalId !== null) holders.set(externalId, value.account.id);
      }
    }
    return { accepted, replacing, experiment: early?.experiment };
  }

  private async save(
    merchant: AuthenticatedMerchant,
    requestId: string,
    received: number,
    candidates: NormalizedTransaction[],
    check: (m: EntityManager) => Promise<CheckedCandidates>,
    rejectedCount: () => number,
  ): Promise<NormalizedTransaction[]> {
    // Card data is sealed and fingerprinted once, even if the saving transaction runs again. The
    // first chunk's cards are done while the check is at Postgres (most candidates are accepted);
    // the rest chunk by chunk while Postgres inserts the chunk before (insertTransactions).
    const cards = new Map<NormalizedTransaction, CardColumns>();
    const seal = (t: NormalizedTransaction): CardColumns => {
      let card = cards.get(t);
      if (!card) cards.set(t, (card = this.cardColumns(t)));
      return card;
    };
    const candidatesOf = new Map<NormalizedTransaction, CardFingerprint[]>();
    const fingerprint = (t: NormalizedTransaction): CardFingerprint[] => {
      let fps = candidatesOf.get(t);
      if (!fps) candidatesOf.set(t, (fps = this.cardFingerprints(t)));
      return fps;
    };
    let run = 0;
    const { accepted, outboxIds } = await this.transaction(async (m) => {
      // A first run shares the merchant's rerun lock with every other first run (no wait); a run
      // again takes it alone (SubmissionsRepository.lockForRerun): its check then sees every call
      // that was saving meanwhile, and none saves beside it, so it never meets another at a key.
      await this.submissions.lockForRerun(m, merchant.id, ++run > 1);
      const checking = check(m);
      checking.catch(() => undefined); // awaited below; this only keeps Node from calling it unhandled meanwhile
      await onTheWire();
      for (const t of [...candidates].sort(insertOrder).slice(0, FIRST_INSERT_CHUNK)) {
        fingerprint(t);
        seal(t);
      }
      const { accepted: acceptedRows, replacing, experiment } = await checking;
      const submissionId = await this.submissions.create(m, merchant.id, requestId, {
        received,
        accepted: acceptedRows.length,
        rejected: rejectedCount(),
      });
      if (acceptedRows.length === 0) return { accepted: acceptedRows, outboxIds: [] as string[] };
      // A transaction rejected by the post-submission review may come again with the same id. (One
      // rejected after the check was not accepted: RETDUP2 saw it pending.)
      if (replacing.length > 0) await this.submissions.deleteReviewRejected(m, merchant.id, replacing);
      // Rows in one order for every call (insertOrder): calls racing on keys never deadlock.
      const rows = [...acceptedRows].sort(insertOrder);
      await this.insertTransactions(m, merchant.id, submissionId, rows, { experiment, fingerprint, seal });
      // Each account once (ON CONFLICT cannot touch a row twice), its latest external_id (body order).
      // Only accounts that name one: a row without it is never read (it holds no external_id), so it
      // is not written. Upserted by account id, in that order, for the same reason as the rows.
      const accounts = new Map<string, string | null>();
      for (const t of acceptedRows) if (t.account.external_id) accounts.set(t.account.id, t.account.external_id);
      await this.submissions.rememberAccounts(
        m,
        merchant.id,
        [...accounts]
          .sort((a, b) => codeUnitOrder(a[0], b[0]))
          .map(([accountId, externalId]) => ({ accountId, externalId })),
      );
      const ids = await addToOutbox(m, [{ queue: QueueName.SubmissionReview, data: { v: 1, submissionId } }]);
      return { accepted: acceptedRows, outboxIds: ids };
    });
    // Fast path to Redis; if it fails the outbox sweeper publishes the row a few seconds later.
    this.relay.publish(outboxIds).catch((err: unknown) => {
      this.logger.warn({ err: (err as Error).message }, 'outbox publish deferred to the sweeper');
    });
    return accepted;
  }

  /** A database transaction, run again after a deadlock or serialization failure (libs/db). */
  private transaction<T>(fn: (m: EntityManager) => Promise<T>): Promise<T> {
    return inTransactionWithRetry(this.db, fn, {
      // No lock serialises a merchant's submissions: two that race on one key meet at its unique
      // index, the later one waits for the first to commit, fails, and runs again, now seeing the
      // stored row (RETDUP2/RET004 by id, RET003 by subscription in recovery, RET012 by external_id).
      // The run again is alone among the merchant's calls (lockForRerun), so it is the last.
      retryOnUniqueViolation: SUBMISSION_RACE_CONSTRAINTS,
      attempts: 8,
      onRetry: (r) => this.logger.log(r, 'submission ran again after a concurrent one took a key'),
    });
  }

  /**
   * The accepted rows, card data sealed and fingerprinted (`seal`, `fingerprint`: memoized by the
   * caller), in multi-row INSERTs (SubmissionsRepository) of growing chunks (nextChunkSize), one
   * after another on the transaction's connection. Each chunk is
   * built (sealed, fingerprinted, serialized) while Postgres inserts the chunk before: the INSERTs
   * are most of a POST's time, and Node and Postgres would otherwise wait for each other. A chunk's
   * fingerprints are settled against stored rows (settleCardFingerprints: a card keeps the one it
   * was first stored under, under any key) by a small query sent as soon as the chunk is built, so
   * it runs right after the INSERT before. The choice is the same in every chunk: a card new to the
   * merchant gets its current-key fingerprint, which later chunks then find stored.
   */
  private async insertTransactions(
    m: EntityManager,
    merchantId: string,
    submissionId: string,
    rows: NormalizedTransaction[],
    build: {
      experiment: ExperimentRow | null | undefined;
      fingerprint: (t: NormalizedTransaction) => CardFingerprint[];
      seal: (t: NormalizedTransaction) => CardColumns;
    },
  ): Promise<void> {
    const { fingerprint, seal } = build;
    const now = new Date().toISOString();
    // A running policy experiment assigns each transaction an arm (sticky: a hash of the experiment
    // and the merchant's transaction id) and the arm's policy version; the holdout keeps the default
    // policy of when the experiment started (holdout_policy), not RETRY_POLICY as it is now.
    const experiment =
      build.experiment !== undefined ? build.experiment : await ExperimentsRepository.running(m, merchantId);
    /** Rows [from, to) as COPY lines (intakeCopyLine), their fingerprints settling (null past the end). */
    const chunk = (from: number, to: number) => {
      if (from >= rows.length) return null;
      const part = rows.slice(from, to);
      const lines = part.map((t) => {
        const r = this.toRow(t, now, seal(t));
        if (experiment) {
          const arm = assignArm(experiment, t.id);
          r.experimentId = experiment.id;
          r.experimentArm = arm;
          r.policyVersion =
            arm === HOLDOUT_ARM
              ? experiment.holdout_policy
              : (experiment.variants.find((v) => v.name === arm)?.policy_version ?? null);
        }
        r.policyVersion ??= this.config.retryPolicy ?? null;
        return intakeCopyLine(merchantId, submissionId, r);
      });
      const fingerprints = settleCardFingerprints(m, merchantId, part.map(fingerprint));
      fingerprints.catch(() => undefined); // awaited below; this only keeps Node from calling it unhandled meanwhile
      return { lines, fingerprints };
    };
    // The policy version is fixed per transaction at intake: a later RETRY_POLICY change never alters it.
    let from = 0;
    let size = FIRST_INSERT_CHUNK;
    let next = chunk(from, size);
    while (next !== null) {
      const fingerprints = await next.fingerprints;
      const { written, inserted: inserting } = this.submissions.startInsertTransactions(m, next.lines, fingerprints);
      inserting.catch(() => undefined); // awaited below, after the next chunk is built
      // Building the next chunk blocks Node: first let the rows reach Postgres.
      await written.catch(() => undefined);
      [from, size] = [from + size, nextChunkSize(size)];
      next = chunk(from, from + size);
      await inserting;
    }
  }

  private toRow(t: NormalizedTransaction, submittedTs: string, card: CardColumns): IntakeRow {
    return {
      vid: newVid(),
      merchantTxnId: t.id,
      amountMinor: t.amountMinor.toString(),
      currency: t.currency,
      failedAt: t.failedAt.toISOString(),
      submittedTs,
      divisionNumber: t.division_number ?? null,
      authCode: t.auth_code,
      avsCode: t.avs_code ?? null,
      cvnCode: t.cvn_code ?? null,
      paymentNetworkTransactionId: t.payment_network_transaction_id ?? null,
      previousBillingCount: t.previous_billing_count ?? null,
      isNetworkToken: t.is_network_token ?? null,
      // A one-time secret: sealed like card data from the first write (decisions §10).
      cryptogram: t.cryptogram ? sealText(this.config.cardKeys, t.cryptogram, 'cryptogram') : null,
      eciIndicator: t.eci_indicator ?? null,
      networkAdviceCode: t.network_advice_code?.toUpperCase() ?? null,
      billingDescriptor: t.billing_descriptor ?? null,
      processorTransactionId: t.processor_transaction_id ?? null,
      subscriptionId: t.subscription.id,
      accountId: t.account.id,
      account: { ...t.account, vid: newVid() },
      subscription: t.subscription,
      paymentMethod: { ...t.payment_method, vid: newVid(), card_account_display: card.display },
      metadata: t.metadata ?? {},
      cardKind: t.card.kind,
      cardJwe: card.jwe,
      cardEnc: card.enc,
      cardKeyId: card.keyId,
      cardBin: card.bin,
      cardLast4: card.last4,
      cardNetwork: card.network,
      accountHash: card.accountHash,
      expirationDate: t.expiration_date ?? null,
      policyVersion: null,
      experimentId: null,
      experimentArm: null,
    };
  }

  /** The fingerprints a clear card number may be stored under (none for the other kinds of card data). */
  private cardFingerprints(t: NormalizedTransaction): CardFingerprint[] {
    if (t.card.kind !== 'clear') return [];
    return cardFingerprintCandidates(this.config.cardFingerprintKeys, this.config.cardKeys, t.card.pan);
  }

  /** Card data per decisions §10: a clear number is sealed here and never stored in clear. */
  private cardColumns(t: NormalizedTransaction): CardColumns {
    const none = { jwe: null, enc: null, keyId: null, bin: null, last4: null, network: null };
    const c = t.card;
    switch (c.kind) {
      case 'clear': {
        const cols = sealCardNumber(this.config.cardKeys, c.pan);
        return {
          ...none,
          enc: cols.cardEnc,
          keyId: cols.cardKeyId,
          bin: cols.cardBin,
          last4: cols.cardLast4,
          network: cardBrand(c.pan),
          accountHash: cols.accountHash,
          display: cols.display,
        };
      }
      case 'jwe':
        return { ...none, jwe: c.jwe, accountHash: null, display: null };
      case 'masked': {
        const digits = c.masked.replace(/[^0-9*Xx]/g, '');
        const bin = /^\d{6,8}/.exec(digits)?.[0] ?? null;
        return {
          ...none,
          bin,
          last4: digits.slice(-4),
          network: bin ? cardBrand(bin) : null,
          accountHash: c.accountHash.toLowerCase(),
          display: c.masked,
        };
      }
      case 'token':
        return {
          ...none,
          bin: c.bin ?? null,
          network: c.bin ? cardBrand(c.bin) : null,
          accountHash: t.account_hash ?? null,
          display: c.bin ?? null,
        };
      default: {
        const never: never = c;
        throw new Error(`unknown card kind ${JSON.stringify(never)}`);
      }
    }
  }
}
