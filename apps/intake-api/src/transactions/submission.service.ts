import { HttpException, HttpStatus, Inject, Injectable, Logger } from '@nestjs/common';
import { validateSubmission, type NormalizedTransaction } from '@retain/api-contract';
import type { RetainConfig } from '@retain/config';
import {
  RECOVERING_STATUSES,
  assignArm,
  RetCode,
  RetMessage,
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
  settleCardFingerprints,
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

/** A submission's candidates after the checks against stored rows. */
interface CheckedCandidates {
  accepted: NormalizedTransaction[];
  /** Accepted ids whose stored row was rejected by its review (deleted before the insert). */
  replacing: string[];
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
 * Rows per INSERT statement after the first: a chunk is built (sealed, serialized) while Postgres
 * inserts the one before, which takes several times longer. The first is built while Postgres waits.
 */
const INSERT_CHUNK = 300;
const FIRST_INSERT_CHUNK = 100;

/** Resolves once a query started just before is written to its connection (after TypeORM's microtasks). */
const onTheWire = (): Promise<void> => new Promise<void>((resolve) => setImmediate(resolve));

const FINISHED_IS_RET004 = (status: string): boolean => !RECOVERING_STATUSES.includes(status as never);

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
    const validated = validateSubmission(body);
    if (!validated.ok) throw new HttpException(validated.error, HttpStatus.BAD_REQUEST);

    const errors = new Map<number, ErrorEntry[]>();
    const addError = (index: number, e: ErrorEntry): void => {
      errors.set(index, [...(errors.get(index) ?? []), e]);
    };
    const candidates: { index: number; value: NormalizedTransaction }[] = [];
    const seenIds = new Set<string>();
    for (const item of validated.items) {
      // Same id twice in one call: the first occurrence is processed, each later one RETDUP.
      if (item.id !== null && seenIds.has(item.id)) {
        addError(item.index, { code: RetCode.RETDUP, message: RetMessage.duplicateInSubmission });
      }
      if (item.id !== null) seenIds.add(item.id);
      if ('errors' in item && item.errors.length > 0) {
        for (const e of item.errors) addError(item.index, e);
      } else if ('value' in item && !errors.has(item.index)) {
        candidates.push({ index: item.index, value: item.value });
      }
    }

    // Rejections found while validating; a saving transaction that is retried starts again from these.
    const validationErrors = new Map(errors);
    const run = async (m: EntityManager | DataSource): Promise<CheckedCandidates> => {
      errors.clear();
      for (const [index, errs] of validationErrors) errors.set(index, [...errs]);
      return this.checkAgainstStored(m, merchant.id, candidates, addError);
    };

    let accepted: NormalizedTransaction[];
    if (dryrun) {
      accepted = (await run(this.db)).accepted;
    } else {
      accepted = await this.save(
        merchant,
        requestId,
        validated.items.length,
        candidates.map((c) => c.value),
        run,
        () => errors.size,
      );
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

  /** RETDUP2 / RET004 / RET003 against stored transactions of this merchant. */
  private async checkAgainstStored(
    m: EntityManager | DataSource,
    merchantId: string,
    candidates: { index: number; value: NormalizedTransaction }[],
    addError: (index: number, e: ErrorEntry) => void,
  ): Promise<CheckedCandidates> {
    if (candidates.length === 0) return { accepted: [], replacing: [] };
    const ids = candidates.map((c) => c.value.id);
    const subs = [...new Set(candidates.map((c) => c.value.subscription.id))];
    const existing = await this.submissions.storedMatching(m, merchantId, ids, subs);
    const byId = new Map(existing.map((r) => [r.merchant_txn_id, r]));
    const recoveringSubs = new Map<string, string>();
    for (const r of existing) {
      if (r.review_status !== 'rejected' && RECOVERING_STATUSES.includes(r.status as never)) {
        recoveringSubs.set(r.subscription_id, r.merchant_txn_id);
      }
    }
    // external_id is unique within the merchant's accounts: its holder, as stored and as this call assigns.
    const holders = await this.submissions.externalIdHolders(m, merchantId, [
      ...new Set(candidates.flatMap((c) => (c.value.account.external_id ? [c.value.account.external_id] : []))),
    ]);
    const accepted: NormalizedTransaction[] = [];
    const replacing: string[] = [];
    for (const { index, value } of candidates) {
      const prior = byId.get(value.id);
      let ok = true;
      if (prior && prior.review_status !== 'rejected') {
        ok = false;
        addError(
          index,
          FINISHED_IS_RET004(prior.status)
            ? { code: RetCode.RET004, message: RetMessage.previouslyProcessed }
            : { code: RetCode.RETDUP2, message: RetMessage.duplicatePrior },
        );
      }
      const holder = recoveringSubs.get(value.subscription.id);
      if (holder !== undefined && holder !== value.id) {
        ok = false;
        addError(index, { code: RetCode.RET003, message: RetMessage.subscriptionProcessing });
      }
      const ext = value.account.external_id;
      const holder2 = ext ? holders.get(ext) : undefined;
      if (ok && holder2 !== undefined && holder2 !== value.account.id) {
        ok = false;
        addError(index, { code: RetCode.RET012, message: RetMessage.accountUpdateFailed });
      }
      if (ok) {
        accepted.push(value);
        if (prior) replacing.push(value.id); // rejected by its review: this one takes its place
        recoveringSubs.set(value.subscription.id, value.id);
        if (ext) holders.set(ext, value.account.id);
      }
    }
    return { accepted, replacing };
  }

  private async save(
    merchant: AuthenticatedMerchant,
    requestId: string,
    received: number,
    candidates: NormalizedTransaction[],
    check: (m: EntityManager) => Promise<CheckedCandidates>,
    rejectedCount: () => number,
  ): Promise<NormalizedTransaction[]> {
    // Card data is sealed once, even if the saving transaction runs again. The fingerprints (the
    // lookups need them all) are made while the check's first query is at Postgres; the rest of each
    // card is sealed chunk by chunk while Postgres works on the statement before (insertTransactions).
    const cards = new Map<NormalizedTransaction, CardColumns>();
    const seal = (t: NormalizedTransaction): CardColumns => {
      let card = cards.get(t);
      if (!card) cards.set(t, (card = this.cardColumns(t)));
      return card;
    };
    const fingerprints = new Map<NormalizedTransaction, CardFingerprint[]>();
    const { accepted, outboxIds } = await this.transaction(async (m) => {
      const checking = check(m);
      checking.catch(() => undefined); // awaited below; this only keeps Node from calling it unhandled meanwhile
      if (fingerprints.size < candidates.length) {
        await onTheWire();
        for (const t of candidates) fingerprints.set(t, this.cardFingerprints(t));
      }
      const { accepted: acceptedRows, replacing } = await checking;
      const submissionId = await this.submissions.create(m, merchant.id, requestId, {
        received,
        accepted: acceptedRows.length,
        rejected: rejectedCount(),
      });
      if (acceptedRows.length === 0) return { accepted: acceptedRows, outboxIds: [] as string[] };
      // A transaction rejected by the post-submission review may come again with the same id. (One
      // rejected after the check was not accepted: RETDUP2 saw it pending.)
      if (replacing.length > 0) await this.submissions.deleteReviewRejected(m, merchant.id, replacing);
      await this.insertTransactions(m, merchant.id, submissionId, acceptedRows, fingerprints, seal);
      // Each account once (ON CONFLICT cannot touch a row twice), its latest external_id. Only accounts
      // that name one: a row without it is never read (it holds no external_id), so it is not written.
      const accounts = new Map<string, string | null>();
      for (const t of acceptedRows) if (t.account.external_id) accounts.set(t.account.id, t.account.external_id);
      await this.submissions.rememberAccounts(
        m,
        merchant.id,
        [...accounts].map(([accountId, externalId]) => ({ accountId, externalId })),
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
      retryOnUniqueViolation: SUBMISSION_RACE_CONSTRAINTS,
      attempts: 8,
      onRetry: (r) => this.logger.log(r, 'submission ran again after a concurrent one took a key'),
    });
  }

  /**
   * The accepted rows, card data sealed (`seal`, memoized by the caller), in multi-row INSERTs
   * (SubmissionsRepository) of FIRST_INSERT_CHUNK rows, then INSERT_CHUNK at a time, one after
   * another on the transaction's connection. Each chunk's rows are sealed and serialized
   * while Postgres inserts the chunk before: the INSERTs are most of a POST's time, and Node and
   * Postgres would otherwise wait for each other.
   */
  private async insertTransactions(
    m: EntityManager,
    merchantId: string,
    submissionId: string,
    rows: NormalizedTransaction[],
    candidates: ReadonlyMap<NormalizedTransaction, CardFingerprint[]>,
    seal: (t: NormalizedTransaction) => CardColumns,
  ): Promise<void> {
    const now = new Date().toISOString();
    // A card already stored for this merchant keeps its fingerprint (any key id): its limits hold.
    // The first chunk's cards are sealed while Postgres looks the fingerprints up.
    const settling = settleCardFingerprints(
      m,
      merchantId,
      rows.map((t) => {
        const fps = candidates.get(t); // every candidate was fingerprinted before the check accepted some of them
        if (!fps) throw new Error('insertTransactions: a transaction without its card fingerprints');
        return fps;
      }),
    );
    settling.catch(() => undefined); // awaited below; this only keeps Node from calling it unhandled meanwhile
    await onTheWire();
    rows.slice(0, FIRST_INSERT_CHUNK).forEach(seal);
    const fingerprints = await settling;
    // A running policy experiment assigns each transaction an arm (sticky: a hash of the experiment
    // and the merchant's transaction id) and the arm's policy version; the holdout keeps the default.
    const experiment = await ExperimentsRepository.running(m, merchantId);
    /** Rows [from, to) as the INSERT's JSON recordset, sealed and serialized (null past the end). */
    const chunk = (from: number, to: number): string | null => {
      if (from >= rows.length) return null;
      const records = rows.slice(from, to).map((t, i) => {
        const r = this.toRecord(t, now, seal(t), fingerprints[from + i] ?? null);
        if (experiment) {
          const arm = assignArm(experiment, t.id);
          r['experiment_id'] = experiment.id;
          r['experiment_arm'] = arm;
          r['policy_version'] = experiment.variants.find((v) => v.name === arm)?.policy_version ?? null;
        }
        return r;
      });
      return JSON.stringify(records);
    };
    // The first chunk is small (its building delays the first INSERT); each later one is built
    // while Postgres inserts the one before. The policy version is fixed per transaction at
    // intake: a later RETRY_POLICY change never alters it.
    let from = 0;
    let to = FIRST_INSERT_CHUNK;
    let next = chunk(from, to);
    while (next !== null) {
      const inserting = this.submissions.insertTransactions(m, merchantId, submissionId, next, this.config.retryPolicy);
      inserting.catch(() => undefined); // awaited below, after the next chunk is built
      await onTheWire();
      [from, to] = [to, to + INSERT_CHUNK];
      next = chunk(from, to);
      await inserting;
    }
  }

  private toRecord(
    t: NormalizedTransaction,
    submittedTs: string,
    card: CardColumns,
    fingerprint: CardFingerprint | null,
  ): Record<string, unknown> {
    return {
      vid: newVid(),
      id: t.id,
      amount_minor: t.amountMinor.toString(),
      currency: t.currency,
      failed_at: t.failedAt.toISOString(),
      submitted_ts: submittedTs,
      division_number: t.division_number,
      auth_code: t.auth_code,
      avs_code: t.avs_code ?? null,
      cvn_code: t.cvn_code ?? null,
      payment_network_transaction_id: t.payment_network_transaction_id ?? null,
      previous_billing_count: t.previous_billing_count ?? null,
      is_network_token: t.is_network_token ?? null,
      // A one-time secret: sealed like card data from the first write (decisions §10).
      cryptogram: t.cryptogram ? sealText(this.config.cardKeys, t.cryptogram, 'cryptogram') : null,
      eci_indicator: t.eci_indicator ?? null,
      network_advice_code: t.network_advice_code?.toUpperCase() ?? null,
      billing_descriptor: t.billing_descriptor ?? null,
      processor_transaction_id: t.processor_transaction_id ?? null,
      subscription_id: t.subscription.id,
      account_id: t.account.id,
      account: { ...t.account, vid: newVid() },
      subscription: t.subscription,
      payment_method: { ...t.payment_method, vid: newVid(), card_account_display: card.display },
      metadata: t.metadata ?? {},
      card_kind: t.card.kind,
      card_jwe: card.jwe,
      card_enc: card.enc,
      card_key_id: card.keyId,
      card_hmac: fingerprint?.value ?? null,
      card_hmac_key_id: fingerprint?.keyId ?? null,
      card_bin: card.bin,
      card_last4: card.last4,
      card_network: card.network,
      account_hash: card.accountHash,
      expiration_date: t.expiration_date ?? null,
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
