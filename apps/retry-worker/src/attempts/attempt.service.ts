import { Inject, Injectable, Logger } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import {
  AttemptEntity,
  AttemptsRepository,
  MerchantsRepository,
  ProcessorAccountsRepository,
  ProcessorThrottlesRepository,
  accountKey,
  RefundEntity,
  PaymentMethodsRepository,
  TransactionEntity,
  accountLockKey,
  attemptView,
  cardHistoryKey,
  historyOf,
  cardLockKey,
  chargedPaymentMethodFields,
  setFieldsMany,
  type LockedAttempt,
} from '@retain/db';
import {
  AuthCodeDescription,
  EventName,
  IN_RETRY_STATUSES,
  RefundStatus,
  TransactionStatus,
  cardDataVersion,
  checkNetworkLimits,
  historyAsOf,
  classifyDecline,
  updaterMayCure,
  groupCommit,
  newVid,
  open,
  planNextAttempt,
  type CardAttempt,
  type LimitCheck,
  type Plan,
  type PlanInput,
} from '@retain/domain';
import { RETAIN_CONFIG, RetainMetrics } from '@retain/platform';
import {
  TRANSACTION_PROCESSORS,
  type ChargeRequest,
  type ChargeResult,
  type PaymentInstrument,
  type PaymentProcessor,
  type TransactionProcessors,
} from '@retain/processor';
import { OutboxRelay, announce } from '@retain/queues';
import {
  AttemptState,
  CAPTURED_STATUSES,
  ENDED_WITHOUT_CAPTURE,
  PROCESSOR_ERROR_CODE,
  announceTransaction,
  applyRefundAnswer,
  attemptTransition,
  canDropAttempt,
  canTransition,
  closeStopIfSettled,
  cardExpired,
  cardLimitsNow,
  declineTime,
  countAttemptOutcome,
  countAttemptOutcomes,
  networkFeeFields,
  networkFeesOf,
  outcomeSlotOf,
  paymentMethodChanged,
  policyInputsFor,
  policyInputsForMany,
  transactionWindowEnd,
  policyRowsFor,
  storedExplanation,
  statusBeforeRefunds,
  stopToRefund,
  transition,
  unresolvedAttempts,
  updaterReaches,
  type AttemptEdgeName,
} from '@retain/recovery';
import { UnrecoverableError } from 'bullmq';
import { DataSource, type EntityManager, type EntityTarget } from 'typeorm';
import { PaymentMethodsService } from './payment-methods.service';

/**
 * Sets fields of a row this transaction has loaded and locked: one UPDATE of those columns
 * (`save()` would read the row again first to work out what changed).
 */
async function setFields<E extends { id: string }>(
  m: EntityManager,
  target: EntityTarget<E>,
  row: E,
  fields: Partial<E>,
): Promise<void> {
  Object.assign(row, fields);
  await m.getRepository(target).update(row.id, fields as never);
}

/** The attempt's fields once captured (`record`, grouped or not). */
function capturedAttemptFields(
  attempt: AttemptEntity,
  result: ChargeResult & { outcome: 'approved' },
  from: AttemptState,
  now: Date,
): Partial<AttemptEntity> {
  const edge: AttemptEdgeName =
    from === AttemptState.Pending ? 'approved' : from === AttemptState.Unknown ? 'resolvedCaptured' : 'lateCapture';
  return {
    processedAt: now,
    partialAmountMinor: partialCapture(attempt, result),
    state: attemptTransition(attempt.state, edge),
    status: TransactionStatus.Captured,
    responseCode: result.responseCode,
    authCodeDescription: null,
    processorTransactionId: result.processorTransactionId,
    message: result.message,
    lookupAfter: null,
  };
}

/** A partial authorization (decisions §15) captured less than asked: that is what is refundable. */
function partialCapture(attempt: AttemptEntity, result: ChargeResult & { outcome: 'approved' }): string | null {
  return result.amountMinor !== undefined && result.amountMinor > 0n && result.amountMinor < BigInt(attempt.amountMinor)
    ? result.amountMinor.toString()
    : null;
}

/** The transaction's fields for a capture, whatever its status becomes. */
function capturedTransactionFields(attempt: AttemptEntity, result: ChargeResult & { outcome: 'approved' }, now: Date) {
  return {
    forcedDeposit: attempt.forcedDeposit,
    capturedAmountMinor: partialCapture(attempt, result) ?? attempt.amountMinor,
    // The transaction's partial authorization: this capture's part (a second capture never changes it).
    partialAmountMinor: partialCapture(attempt, result),
    processorTransactionId: result.processorTransactionId,
    nextAttemptAt: null,
    statusChangedAt: now,
    authCodeDescription: null,
  };
}

/** The attempt's fields once declined or settled as not charged (`record`, grouped or not). */
function notCapturedAttemptFields(
  attempt: AttemptEntity,
  result: AttemptOutcome & { outcome: 'declined' | 'not-charged' },
  from: AttemptState,
  now: Date,
): { fields: Partial<AttemptEntity>; classification: ReturnType<typeof classifyDecline> | null } {
  const declined = result.outcome === 'declined';
  // Judged by the network rules in force when the issuer declined (the charge's time), however much
  // later the outcome is recorded (a lookup of an unknown attempt).
  const classification = declined
    ? classifyDecline(
        {
          network: attempt.cardNetwork ?? result.network,
          responseCode: result.responseCode,
          merchantAdviceCode: result.merchantAdviceCode,
        },
        declineTime(attempt, now),
      )
    : null;
  const edge: AttemptEdgeName = declined
    ? from === AttemptState.Pending
      ? 'declined'
      : 'resolvedDeclined'
    : 'resolvedNotCharged';
  return {
    classification,
    fields: {
      processedAt: now,
      state: attemptTransition(attempt.state, edge),
      status: TransactionStatus.Failed,
      responseCode: declined ? result.responseCode : PROCESSOR_ERROR_CODE,
      merchantAdviceCode: declined ? (result.merchantAdviceCode ?? null) : null,
      authCodeDescription: classification?.description ?? AuthCodeDescription.Soft,
      processorTransactionId: declined ? result.processorTransactionId : null,
      // The processor named the card's brand: a card of no known network (a saved payment method
      // sent without its BIN) is bound by that network's rules from now on (its card history).
      ...(declined && !attempt.cardNetwork && result.network !== 'other' ? { cardNetwork: result.network } : {}),
      message: result.message,
      // Settled as not charged: the late-capture watch keeps looking it up for the processor's window.
      lookupAfter: declined ? null : now,
    },
  };
}

/** The transaction's fields when its next attempt is planned. */
function rescheduledTransactionFields(
  txn: TransactionEntity,
  attempt: { authCodeDescription: string | null },
  plan: Plan & { kind: 'retry' },
  now: Date,
): Partial<TransactionEntity> {
  return {
    status: transition(txn.status, 'retryScheduled', { unresolvedAttempts: 0 }).to,
    nextAttemptAt: plan.at,
    nextAttemptPlan: storedExplanation(plan.explain, txn.policyVersion),
    authCodeDescription: attempt.authCodeDescription,
    statusChangedAt: txn.status === TransactionStatus.InRetry ? txn.statusChangedAt : now,
  };
}

/**
 * Policy inputs with the attempt's own outcome counted in its slot (merchant and global), as
 * `record` reads them after countAttemptOutcome.
 */
function withOwnCount(
  inputs: Partial<PlanInput>,
  slot: { declineClass: string; dayAfterFailure: number; localHour: number } | null,
  approved: boolean,
): Partial<PlanInput> {
  if (!slot || !inputs.learned) return inputs;
  const learned = inputs.learned.map((s) => ({ ...s }));
  for (const scope of ['merchant', 'global'] as const) {
    const same = learned.find(
      (s) =>
        s.scope === scope &&
        s.declineClass === slot.declineClass &&
        s.dayAfterFailure === slot.dayAfterFailure &&
        s.localHour === slot.localHour,
    );
    if (same) {
      same.attempts += 1;
      same.approvals += approved ? 1 : 0;
    } else {
      learned.push({ scope, ...slot, country: null, binPrefix: null, attempts: 1, approvals: approved ? 1 : 0 });
    }
  }
  return { ...inputs, learned };
}

/** The `retry succeeded` push of a captured attempt: one shape for the single and the grouped record. */
const retrySucceeded = (txn: TransactionEntity, attempt: AttemptEntity, now: Date) => ({
  merchantId: txn.merchantId,
  eventName: EventName.RetrySucceeded,
  payloadId: attempt.vid,
  merchantTransactionId: txn.merchantTxnId,
  transactionRowId: txn.id,
  content: attemptView(txn, attempt),
  occurredAt: now,
});

type Prepared =
  | { kind: 'done'; outbox: string[]; result: string }
  | { kind: 'charge'; attempt: AttemptEntity; txn: TransactionEntity };

/** Left to the attempt alone (runAlone / record): not the common case, or its batch failed. */
type Alone = { kind: 'alone' };
const ALONE: Alone = { kind: 'alone' };

/**
 * The processor's idempotency window, real time: Stripe may prune a key once it is 24 h old (Adyen
 * keeps keys 31 days at least), and a request replayed under a pruned key is a NEW charge. An attempt
 * prepared longer ago is never sent again, only looked up by its key (lookUp, prepare). The
 * reconciliation watches an attempt settled as not charged for a late capture as long (LATE_WATCH_MS,
 * divided by RETRY_TIME_SCALE there; this rule is not: the processor keeps keys by its own clock).
 */
export const IDEMPOTENCY_WINDOW_MS = 24 * 3_600_000;

/** Whether an attempt was prepared longer ago than the processor keeps its key (never sent again then). */
function pastIdempotencyWindow(preparedAt: Date | null): boolean {
  return preparedAt !== null && Date.now() - new Date(preparedAt).getTime() >= IDEMPOTENCY_WINDOW_MS;
}

/** Attempts a grouped prepare or record takes at most. */
const MAX_BATCH = 256;
/** How long an attempt waits while another attempt checks the limits of the card it would switch to. */
const CARD_BUSY_WAIT_MS = 2_000;
/** How long an expired card waits when the account updater did not answer about it (calendar time, scaled). */
const UPDATER_AGAIN_MS = 3_600_000;
/**
 * An attempt run this long after its planned moment (a backlog, workers down) is checked against
 * its transaction's recovery window before it is charged: planned attempts lie inside the window,
 * and one run less late than this is on time (the last attempt is planned up to the window's end: a
 * check of every attempt ended it whenever its job started a moment after that). Real time, not
 * scaled: it stands for a backlog's latency.
 */
const LATE_ATTEMPT_MS = 60_000;
const runLate = (attempt: AttemptEntity, now: number): boolean =>
  now - attempt.scheduledFor.getTime() > LATE_ATTEMPT_MS;

/** An outcome waiting for the grouped record. */
interface RecordItem {
  attemptId: string;
  result: AttemptOutcome;
}

/**
 * What is recorded for an attempt: the processor's answer (`error` = no decision: the attempt
 * becomes unknown), or the reconciliation's verdict that nothing was charged.
 */
export type AttemptOutcome = ChargeResult | { outcome: 'not-charged'; message: string };

/** A refund to send right away: a capture found after the transaction ended without money. */
export interface LateRefund {
  refundId: string;
  refundVid: string;
  processorTransactionId: string;
  amountMinor: bigint;
  currency: string;
  merchantId: string;
  /** The account that made the capture (null: the app's processor): the refund goes there. */
  processorAccountId: string | null;
}

/** Where an attempt is charged, and its ChargeRequest as built for the charge (lookups replay it). */
export interface AttemptCharge {
  processor: PaymentProcessor;
  request: ChargeRequest;
  /**
   * Its transaction has a stop requested, or its recovery ended (an earlier attempt's late capture): the
   * charge is looked up by key only (lookUp).
   */
  stopped: boolean;
  /** The attempt, stamped sent (last_sent_at) before a replay. */
  attemptId: string;
  /** Its transaction, whose stop lookUp reads again right before a replay. */
  transactionId: string;
  /** Its transaction's recovery window's end: after it, looked up by key only (lookUp). */
  windowEnd: Date;
  /** Its in-flight mark: past IDEMPOTENCY_WINDOW_MS, looked up by key only (lookUp). */
  preparedAt: Date | null;
  /** The card it charged: a card blocked for good since, looked up by key only (lookUp). Null: no card fingerprint. */
  card: ChargedCard | null;
}

/** The card an attempt charged, as the network limits read it (its merchant's history of the card). */
export interface ChargedCard {
  merchantId: string;
  cardHmac: string;
  network: string | null;
  /** The card data sent (card_data_version): a block on other data does not bind it. */
  dataVersion: string | null;
  amountMinor: bigint;
}

/** The card an attempt charged (its own columns, set when it went out; else its transaction's). */
function chargedCard(attempt: AttemptEntity, txn: TransactionEntity): ChargedCard | null {
  const cardHmac = attempt.cardHmac ?? txn.cardHmac;
  if (!cardHmac) return null;
  return {
    merchantId: txn.merchantId,
    cardHmac,
    network: attempt.cardNetwork ?? txn.cardNetwork,
    dataVersion: attempt.cardDataVersion,
    amountMinor: BigInt(attempt.amountMinor),
  };
}

export interface Recorded {
  outbox: string[];
  lateRefund: LateRefund | null;
}

/** A transaction still being recovered: an attempt that never started may start (else it is dropped). */
const recovering = (txn: { status: string }): boolean => (IN_RETRY_STATUSES as readonly string[]).includes(txn.status);

/**
 * One retry attempt, in three steps so no row lock is held across the processor call:
 * 1. under row locks, re-check the transaction (a stop may have arrived, the network limits may
 *    forbid the attempt now) and decide to charge;
 * 2. ask the processor: first a lookup by the attempt's idempotency key (a crashed or stalled run
 *    may already have charged), then the charge with that same key;
 * 3. under row locks again, record the outcome once, move the transaction on, and announce it.
 * Which states and statuses may follow which is decided by libs/recovery; an outcome the processor
 * did not decide makes the attempt `unknown`, settled later by the reconciliation.
 * A second run of the same job finds the attempt recorded and does nothing.
 */
@Injectable()
export class AttemptService {
  private readonly logger = new Logger(AttemptService.name);
  /** The first step of concurrent attempts, grouped (prepareBatch). */
  private readonly prepareGrouped = groupCommit<string, Prepared | Alone>((ids) => this.prepareBatch(ids), MAX_BATCH);
  /** The record of concurrent outcomes, grouped (recordBatch): true when recorded there. */
  private readonly recordGrouped = groupCommit<RecordItem, boolean>((items) => this.recordBatch(items), MAX_BATCH);
  /** Processor lookups (a processor_accounts read each) shared by the attempts of a batch. */
  private readonly processorGrouped = groupCommit<string, PaymentProcessor>((keys) => {
    const byKey = new Map<string, Promise<PaymentProcessor>>();
    for (const key of keys) {
      if (byKey.has(key)) continue;
      const [merchantId, division] = JSON.parse(key) as [string, string | null];
      byKey.set(key, this.processors.forTransaction(merchantId, division));
    }
    return Promise.all(keys.map((k) => byKey.get(k)!));
  });

  constructor(
    private readonly db: DataSource,
    private readonly relay: OutboxRelay,
    private readonly metrics: RetainMetrics,
    @Inject(RETAIN_CONFIG) private readonly config: RetainConfig,
    @Inject(TRANSACTION_PROCESSORS) private readonly processors: TransactionProcessors,
    /** The customer's payment methods: card choice, fallback, account updater (decisions §15). */
    private readonly paymentMethods: PaymentMethodsService,
  ) {}

  /**
   * The processor of an attempt's transaction (its merchant's account for its division, else the
   * default processor) and the attempt's ChargeRequest, rebuilt from the rows exactly as `run`
   * builds it for the charge: a lookup passes it so Adyen can replay the key and Stripe's lagging
   * search cannot miss a charge. Outside any database transaction.
   */
  async chargeOf(attemptId: string): Promise<AttemptCharge | null> {
    const attempt = await this.db.getRepository(AttemptEntity).findOne({ where: { id: attemptId } });
    if (!attempt) return null;
    const txn = await this.db.getRepository(TransactionEntity).findOne({ where: { id: attempt.transactionId } });
    if (!txn) return null;
    await this.paymentMethods.fillCryptogram(txn);
    return {
      processor: await this.processorFor(attempt, txn),
      request: this.chargeRequest(attempt, txn),
      stopped: txn.stopRequestedAt !== null || !recovering(txn),
      windowEnd: await this.windowEnd(this.db, txn),
      attemptId: attempt.id,
      transactionId: txn.id,
      preparedAt: attempt.preparedAt,
      card: chargedCard(attempt, txn),
    };
  }

  /**
   * Looks an attempt's charge up. With its original request, a processor replays the key, making the
   * attempt's one charge if the first request never arrived (Adyen has no other lookup; Stripe's search
   * lags): right while the attempt may still be made, never after a stop (decisions §8: the customer is
   * not charged after it), nor after the transaction's recovery window (no attempt is made after it): then
   * by key only, and what is not found is settled by the reconciliation.
   * The stop is read again right before a replay (a stop accepted while the caller's charge timed out,
   * or since its rows were read, is seen); what is left is the few milliseconds of the call itself.
   * Past the processor's idempotency window a replay would be a new charge: by key only too (Adyen,
   * which has no lookup by reference, then leaves the attempt unknown for the operator alert).
   * A card blocked for good since the attempt was prepared (another transaction's decline on it: Visa
   * category 1, MAC 03/21, a hard decline; network-rules.md "none, ever") is looked up by key only too:
   * a replay whose first request never arrived is a fresh authorization on that card. Its history is
   * read right before the replay, as the stop is. The temporary limits do not hold a replay back: the
   * attempt was counted in flight when it was prepared.
   */
  async lookUp(charge: AttemptCharge): Promise<ChargeResult | null> {
    const key = charge.request.idempotencyKey;
    if (
      charge.stopped ||
      Date.now() >= charge.windowEnd.getTime() ||
      pastIdempotencyWindow(charge.preparedAt) ||
      (await AttemptsRepository.noNewCharge(this.db, charge.transactionId)) ||
      (await this.cardBlocked(this.db, charge.card, charge.attemptId, charge.transactionId))
    ) {
      return charge.processor.lookupCharge(key);
    }
    // A replay may make the charge now: the reconciliation's "not found" counts from here.
    const mark = await AttemptsRepository.markSentReturning(this.db, charge.attemptId);
    const found = await charge.processor.lookupCharge(key, charge.request);
    if (found?.outcome === 'error' && found.storedAnswer) {
      // The processor replayed the error it saved for an earlier request under the key (Stripe keeps a
      // 500 for 24 h) and found no charge: this replay sent nothing, and no replay will. No charge
      // found, counted from the latest request that really went out: the mark is taken back, so the
      // reconciliation settles it RECONCILE_NOT_FOUND_AFTER after that request, not 24 h later.
      if (mark) await AttemptsRepository.unmarkSent(this.db, charge.attemptId, mark);
      return null;
    }
    return found;
  }

  /**
   * Whether the network rules now forbid any attempt on the card an attempt charged (a card block):
   * then a prepared attempt is never sent again (lookUp, prepare).
   */
  private async cardBlocked(
    m: EntityManager | DataSource,
    card: ChargedCard | null,
    attemptId: string,
    transactionId: string,
  ): Promise<boolean> {
    if (!card) return false;
    // The card's history but this attempt (with its transaction's own original decline, as cardLimits reads it).
    const check = await cardLimitsNow(
      m,
      card,
      { amountMinor: card.amountMinor, exceptAttemptId: attemptId, transactionId },
      new Date(),
      this.config.retryTimeScale,
    );
    return !check.allowed && check.permanently;
  }

  /**
   * Where an attempt is charged and looked up: once prepared, the account recorded with its in-flight
   * mark (whatever the merchant's accounts have become since); before, the merchant's current one.
   */
  private processorFor(
    attempt: Pick<AttemptEntity, 'preparedAt' | 'processorAccountId'>,
    txn: TransactionEntity,
  ): Promise<PaymentProcessor> {
    return attempt.preparedAt ? this.processors.forAccount(attempt.processorAccountId) : this.processorOf(txn);
  }

  private processorOf(txn: { merchantId: string; divisionNumber: string | null }): Promise<PaymentProcessor> {
    return this.processorGrouped(JSON.stringify([txn.merchantId, txn.divisionNumber || null]));
  }

  /** The one ChargeRequest of an attempt: the charge and every lookup of it use this. */
  private chargeRequest(attempt: AttemptEntity, txn: TransactionEntity): ChargeRequest {
    return {
      idempotencyKey: attempt.vid,
      attemptNumber: attempt.retryNumber,
      amountMinor: BigInt(attempt.amountMinor),
      currency: attempt.currency,
      instrument: this.instrument(txn),
      originalResponseCode: txn.authCode,
      divisionNumber: txn.divisionNumber,
      networkTransactionId: txn.paymentNetworkTransactionId,
      billingDescriptor: txn.billingDescriptor,
      // The in-flight mark's time, so a rebuilt request is the same request.
      at: attempt.preparedAt ?? new Date(),
      ...(attempt.forcedDeposit ? { forcedDeposit: true } : {}),
    };
  }

  /**
   * Runs one attempt. Concurrent attempts of this process share their statements (group commit,
   * like the dispatcher's records): the common case of the first step (nothing earlier to look up,
   * the card allowed, the customer free) is decided for a whole batch in one database transaction
   * (prepareBatch), and the common outcomes in another (recordBatch). Every other case is run by
   * the attempt alone (runAlone), under its own locks, after the batch committed.
   */
  async run(attemptId: string): Promise<string> {
    const prepared = await this.prepareGrouped(attemptId);
    if (prepared.kind === 'alone') return this.runAlone(attemptId);
    if (prepared.kind === 'done') {
      await this.publish(prepared.outbox);
      return prepared.result;
    }
    return this.chargeAndRecord(attemptId, prepared.attempt, prepared.txn, null, true);
  }

  /**
   * Runs the attempts of one job, all at once (they share their statements through `run`). Each
   * one's outcome stands on its own: when some fail, the job fails with a count of them and is
   * retried, and the retry finds the others recorded (`nothing to do`). The job fails for good at
   * once only when every failure would fail the same way again (UnrecoverableError).
   * Returns the number of attempts per outcome.
   */
  async runMany(attemptIds: readonly string[]): Promise<Record<string, number>> {
    const settled = await Promise.allSettled(attemptIds.map((id) => this.run(id)));
    const outcomes: Record<string, number> = {};
    const failures: unknown[] = [];
    for (const s of settled) {
      if (s.status === 'fulfilled') outcomes[s.value] = (outcomes[s.value] ?? 0) + 1;
      else failures.push(s.reason);
    }
    if (failures.length === 0) return outcomes;
    const message = `${failures.length} of ${attemptIds.length} attempts failed, first: ${(failures[0] as Error).message}`;
    if (failures.every((f) => f instanceof UnrecoverableError)) throw new UnrecoverableError(message);
    // The failures themselves go along (AggregateError's `errors`): the job runner reads an outage
    // (a Postgres failover's 57P01) through them and puts the job back without using a try.
    throw new AggregateError(failures, message);
  }

  /** The attempt on its own: every case, one attempt's statements at a time. */
  async runAlone(attemptId: string): Promise<string> {
    // Outside any transaction: a pooled connection must never wait for a second one (pool starvation).
    const row = await AttemptsRepository.forRun(this.db, attemptId);
    if (!row || row.state !== AttemptState.Pending) return 'nothing to do';
    // A crashed or stalled earlier run may already have charged this attempt's key. Only an attempt
    // marked in flight (prepared) can have been: the charge is made after that mark commits.
    const before = row.prepared_at ? await this.chargeOf(attemptId) : null;
    const found = before ? await this.lookUp(before) : null;
    const existing = found && found.outcome !== 'error' ? found : null;
    if (!existing && !row.prepared_at && row.errored.length > 0) {
      const late = await this.lateCapture(attemptId, row.errored);
      if (late) return late;
    }
    // decisions §15: an expired card is renewed by the account updater before it is charged.
    if (!existing && !row.prepared_at) await this.paymentMethods.refreshCard(attemptId, null);
    const prepared = await this.db.transaction((m) => this.prepare(m, attemptId, existing !== null));
    if (prepared.kind === 'done') {
      await this.publish(prepared.outbox);
      return prepared.result;
    }
    return this.chargeAndRecord(attemptId, prepared.attempt, prepared.txn, existing, false);
  }

  /** Steps 2 and 3 of an attempt marked in flight: the processor, then the record (grouped or alone). */
  private async chargeAndRecord(
    attemptId: string,
    attempt: AttemptEntity,
    txn: TransactionEntity,
    existing: ChargeResult | null,
    grouped: boolean,
  ): Promise<string> {
    await this.paymentMethods.fillCryptogram(txn);
    const processor = await this.processorFor(attempt, txn);
    const request = this.chargeRequest(attempt, txn);
    // The charge is idempotent by key: a duplicate run racing this one gets the same result.
    let result = existing ?? (await processor.charge(request));
    if (this.config.testPauseAfterProcessorMs > 0) {
      await new Promise((resolve) => setTimeout(resolve, this.config.testPauseAfterProcessorMs));
    }
    if (result.outcome === 'error') {
      // A timeout or 5xx says nothing about the charge: it may have gone through. Ask once by the
      // same key (by key only if a stop was accepted meanwhile: lookUp); without a decision the
      // attempt is recorded `unknown` and reconciled later.
      const lookedUp = await this.lookUp({
        processor,
        request,
        stopped: txn.stopRequestedAt !== null || !recovering(txn),
        windowEnd: await this.windowEnd(this.db, txn),
        attemptId,
        transactionId: txn.id,
        preparedAt: attempt.preparedAt,
        card: chargedCard(attempt, txn),
      });
      if (lookedUp && lookedUp.outcome !== 'error') result = lookedUp;
    }
    // decisions §15: a data-quality decline asks the account updater before the next step is planned.
    if (result.outcome === 'declined') {
      const declinedAt = declineTime(attempt, new Date());
      if (this.mayAskUpdater(txn, result, declinedAt))
        await this.paymentMethods.refreshCard(attemptId, result, declinedAt);
    }
    const recorded = result;
    const inBatch = grouped ? await this.recordGrouped({ attemptId, result: recorded }) : false;
    if (!inBatch) {
      const { outbox, lateRefund } = await this.db.transaction((m) =>
        this.record(m, attemptId, recorded, AttemptState.Pending),
      );
      await this.publish(outbox);
      // Another attempt's late capture was recorded while this one was out (a processor notification):
      // this capture is the customer's second charge, refunded at once like any other.
      if (lateRefund) await this.sendLateRefund(lateRefund);
    }
    return result.outcome === 'error' ? AttemptState.Unknown : result.outcome;
  }

  /**
   * Whether a decline may make refreshCard ask the account updater (its own first checks, on the
   * transaction as prepared): most declines then cost no extra statement.
   */
  private mayAskUpdater(
    txn: TransactionEntity,
    decline: ChargeResult & { outcome: 'declined' },
    declinedAt: Date,
  ): boolean {
    if (!txn.paymentMethodRef || !updaterReaches(txn)) return false;
    const c = classifyDecline(
      {
        network: txn.cardNetwork ?? decline.network,
        responseCode: decline.responseCode,
        merchantAdviceCode: decline.merchantAdviceCode,
      },
      declinedAt,
    );
    return updaterMayCure(c);
  }

  /**
   * Earlier attempts of this transaction settled as not charged may have been charged after all
   * (the processor finished late). Before a new idempotency key is charged, look them up: if one
   * captured, it is recorded as the capture and this (never prepared) attempt is not made.
   * Looked up by key only, without the original request: a replay of an attempt settled as not
   * charged would make its charge now.
   */
  private async lateCapture(
    attemptId: string,
    errored: { id: string; vid: string; processor_account_id: string | null }[],
  ): Promise<string | null> {
    for (const e of errored) {
      // Each at the account that charged it.
      const found = await (await this.processors.forAccount(e.processor_account_id)).lookupCharge(e.vid);
      if (found?.outcome !== 'approved') continue;
      const recorded = await this.db.transaction(async (m) => {
        const locked = await AttemptsRepository.lock(m, attemptId);
        if (!locked || !canDropAttempt(locked.attempt)) return null;
        await AttemptsRepository.dropNeverPrepared(m, locked.attempt.id, locked.txn.id);
        this.logger.warn({ attempt: e.vid }, 'an attempt settled as not charged was a capture after all: recorded');
        return this.record(m, e.id, found, AttemptState.Error);
      });
      if (recorded === null) return null;
      await this.publish(recorded.outbox);
      if (recorded.lateRefund) await this.sendLateRefund(recorded.lateRefund);
      return 'approved';
    }
    return null;
  }

  private async prepare(m: EntityManager, attemptId: string, alreadyDecided: boolean): Promise<Prepared> {
    const done = (outbox: string[] = [], result = 'nothing to do'): Prepared => ({ kind: 'done', outbox, result });
    const locked = await AttemptsRepository.lock(m, attemptId);
    if (!locked || locked.attempt.state !== AttemptState.Pending) return done();
    const { attempt, txn } = locked;
    let dataVersion = cardDataVersion(txn.expirationDate);
    // Already decided at the processor by an earlier run of this attempt (crash after the call): record it.
    if (alreadyDecided) {
      await this.markInFlight(m, attempt, txn, dataVersion);
      return this.toCharge(attempt, txn);
    }
    if (txn.stopRequestedAt) {
      if (!canDropAttempt(attempt)) {
        // Prepared by an earlier run and nothing found yet: it may still have charged. It is not
        // charged again after a stop, and not dropped: unknown, the reconciliation settles it.
        await this.markUnknown(m, attempt, txn, 'stop requested while the attempt was in flight');
        return done([], AttemptState.Unknown);
      }
      // A stop arrived before this attempt started: it never starts.
      await AttemptsRepository.dropNeverPrepared(m, attempt.id, txn.id);
      return done((await closeStopIfSettled(m, txn)) ?? []);
    }
    if (!attempt.preparedAt && !recovering(txn)) {
      // The recovery ended while this attempt waited for its job (an earlier attempt's late capture,
      // reported by a processor notification): it never starts.
      await AttemptsRepository.dropNeverPrepared(m, attempt.id, txn.id);
      return done();
    }
    if (attempt.preparedAt) {
      if (!recovering(txn)) {
        // The recovery ended since the mark (an earlier attempt's late capture, reported by a
        // notification): sent again, the request would be a new charge if the first never arrived.
        // Unknown, looked up by key only by the reconciliation, as after a stop.
        await this.markUnknown(m, attempt, txn, 'the recovery ended while the attempt was in flight: not sent again');
        return done([], AttemptState.Unknown);
      }
      if (Date.now() >= (await this.windowEnd(m, txn)).getTime()) {
        // No attempt after the recovery window: sent again, the request would be the first
        // authorization if the first never arrived. Unknown, looked up by key only, as after a stop.
        await this.markUnknown(
          m,
          attempt,
          txn,
          'the recovery window ended while the attempt was in flight: not sent again',
        );
        return done([], AttemptState.Unknown);
      }
      if (pastIdempotencyWindow(attempt.preparedAt)) {
        // Its key may be pruned at the processor: sent again, it would be a new charge. Unknown,
        // looked up by key only by the reconciliation.
        await this.markUnknown(m, attempt, txn, "prepared past the processor's idempotency window: not sent again");
        return done([], AttemptState.Unknown);
      }
      if (await this.cardBlocked(m, chargedCard(attempt, txn), attempt.id, txn.id)) {
        // Its card was blocked for good since (another transaction's "none, ever"): sent again, the
        // request would be a fresh authorization if the first never arrived. Unknown, looked up by key only.
        await this.markUnknown(m, attempt, txn, 'card blocked for good since the attempt was prepared: not sent again');
        return done([], AttemptState.Unknown);
      }
      // An earlier run passed the limit check and may have reached the processor: the same key
      // again (the processor answers a key once), never dropped; stamped sent before it goes.
      await AttemptsRepository.markSent(m, attempt.id);
      return this.toCharge(attempt, txn);
    }
    // No attempt after the recovery window: one run late is checked against it first.
    if (runLate(attempt, Date.now()) && Date.now() >= (await this.windowEnd(m, txn)).getTime()) {
      await AttemptsRepository.dropNeverPrepared(m, attempt.id, txn.id);
      return done(await this.endWithWindow(m, txn, 'run after the recovery window ended'));
    }
    // The merchant's processor asked to slow down (429): its attempts wait, other merchants' do not.
    const notBefore = await ProcessorThrottlesRepository.notBefore(m, txn.merchantId);
    if (notBefore) {
      await AttemptsRepository.dropNeverPrepared(m, attempt.id, txn.id);
      this.logger.log({ merchant: txn.merchantId }, 'attempt deferred: the processor rate-limits this merchant');
      return done(await this.deferWithinWindow(m, txn, notBefore, "the processor's Retry-After"));
    }
    // decisions §15: one charge at a time per customer; the card to charge (newer data, or the account's next).
    const choice = await this.paymentMethods.chooseCard(m, attempt, txn);
    if (choice.kind !== 'charge') {
      await AttemptsRepository.dropNeverPrepared(m, attempt.id, txn.id);
      if (choice.kind === 'wait') {
        return done(await this.deferWithinWindow(m, txn, choice.until, "the customer's charge in flight"));
      }
      return done(choice.kind === 'none' ? await this.cancel(m, txn, choice.reason, null) : []);
    }
    dataVersion = cardDataVersion(txn.expirationDate);
    // One limit check at a time per card and merchant: the check and the in-flight mark below commit
    // together, so the next attempt on the card (any transaction, any worker) counts this one.
    if (txn.cardHmac) await AttemptsRepository.lockCard(m, txn.merchantId, txn.cardHmac);
    let check = await this.cardLimits(m, attempt, txn, dataVersion);
    // A card past its expiry is never sent: the updater, asked before this step (runAlone), had
    // nothing new for it, or cannot reach it. Like a card blocked for good: the account's next
    // payment method, else the recovery ends (README, the retry policy).
    if (check.allowed && cardExpired(txn.expirationDate, new Date())) {
      check = (await this.paymentMethods.updaterMayRenew(m, txn))
        ? // Not asked yet (the updater did not answer): another card now, else asked again later.
          {
            allowed: false,
            permanently: false,
            notBefore: new Date(Date.now() + UPDATER_AGAIN_MS / this.config.retryTimeScale),
            rule: 'card past its expiry, the account updater to be asked again',
          }
        : { allowed: false, permanently: true, rule: 'card past its expiry, no new data from the account updater' };
    }
    // decisions §15: a card the limits forbid gives way to another payment method: one they allow
    // now, or, when this card is blocked for good or for the rest of the window ("network limit
    // exhausted for the window"), the one they allow soonest within the window.
    let later: Date | null = null;
    if (!check.allowed) {
      const now = new Date();
      const end = await this.windowEnd(m, txn);
      const until = check.permanently || check.notBefore > end ? new Date(Math.max(now.getTime(), end.getTime())) : now;
      const other = await this.paymentMethods.alternative(m, attempt, txn, until);
      if (other && other.getTime() <= Date.now()) {
        dataVersion = cardDataVersion(txn.expirationDate);
        // The adopted card's check and in-flight mark are one step too: under its own lock (never
        // waited for while this card's is held: no cycle), checked again. Busy or no longer allowed:
        // a short wait, and the next run decides afresh.
        const free = !txn.cardHmac || (await AttemptsRepository.tryLockCard(m, txn.merchantId, txn.cardHmac));
        // An adopted card past its expiry (one the updater may still renew) waits too: the next run
        // asks the updater about it before any charge.
        if (
          !free ||
          cardExpired(txn.expirationDate, new Date()) ||
          !(await this.cardLimits(m, attempt, txn, dataVersion)).allowed
        ) {
          await AttemptsRepository.dropNeverPrepared(m, attempt.id, txn.id);
          this.logger.log('the account’s other card is being checked by another attempt: a short wait');
          const until = new Date(Date.now() + CARD_BUSY_WAIT_MS);
          return done(await this.deferWithinWindow(m, txn, until, 'the card checked by another attempt'));
        }
        check = { allowed: true };
      } else later = other;
    }
    if (!check.allowed) {
      await AttemptsRepository.dropNeverPrepared(m, attempt.id, txn.id);
      let outbox: string[] = [];
      if (later) await AttemptsRepository.deferTransaction(m, txn.id, later);
      else if (check.permanently) outbox = await this.cancel(m, txn, check.rule, null);
      else if (check.notBefore > (await this.windowEnd(m, txn))) {
        // The limit frees the card only after the recovery window: no attempt is ever made after
        // it, so the recovery ends now instead of waiting to make one.
        outbox = await this.cancel(
          m,
          txn,
          `${check.rule}: not before the recovery window ends`,
          txn.authCodeDescription,
        );
      } else await AttemptsRepository.deferTransaction(m, txn.id, check.notBefore);
      this.logger.log({ rule: check.rule }, 'attempt not made: network limit');
      return done(outbox);
    }
    await this.markInFlight(m, attempt, txn, dataVersion);
    return this.toCharge(attempt, txn);
  }

  /** The network limits on the transaction's card now (its history read under the caller's card lock). */
  private cardLimits(
    m: EntityManager,
    attempt: AttemptEntity,
    txn: TransactionEntity,
    dataVersion: string | null,
  ): Promise<LimitCheck> {
    return cardLimitsNow(
      m,
      { merchantId: txn.merchantId, cardHmac: txn.cardHmac, network: txn.cardNetwork, dataVersion },
      { amountMinor: BigInt(attempt.amountMinor), exceptAttemptId: attempt.id, transactionId: txn.id },
      new Date(),
      this.config.retryTimeScale,
    );
  }

  private windowEnd(m: EntityManager | DataSource, txn: TransactionEntity): Promise<Date> {
    return transactionWindowEnd(m, txn, this.config.retryTimeScale);
  }

  /**
   * The transaction waits until `until` (its attempt dropped by the caller), or, when that is after
   * its recovery window, its recovery ends now: no attempt is ever made after the window.
   */
  private async deferWithinWindow(m: EntityManager, txn: TransactionEntity, until: Date, why: string) {
    if (until.getTime() < (await this.windowEnd(m, txn)).getTime()) {
      await AttemptsRepository.deferTransaction(m, txn.id, until);
      return [];
    }
    return this.endWithWindow(m, txn, `${why} ends after the recovery window`);
  }

  /** The recovery window is over (or will be before the next attempt could be made): Cancelled. */
  private endWithWindow(m: EntityManager, txn: TransactionEntity, why: string): Promise<string[]> {
    this.logger.log({ transaction: txn.vid }, `recovery ended: ${why}`);
    return this.cancel(m, txn, `recovery window ends: ${why}`, txn.authCodeDescription);
  }

  /** The attempt goes to the processor: from now on it counts in the card's history until recorded. */
  private async markInFlight(
    m: EntityManager,
    attempt: AttemptEntity,
    txn: TransactionEntity,
    dataVersion: string | null,
  ): Promise<void> {
    if (attempt.preparedAt) return;
    const division = txn.divisionNumber || null;
    const accounts = await ProcessorAccountsRepository.currentIds(m, [
      { merchantId: txn.merchantId, divisionNumber: division },
    ]);
    attempt.preparedAt = new Date();
    attempt.cardDataVersion = dataVersion;
    attempt.processorAccountId = accounts.get(accountKey(txn.merchantId, division)) ?? null;
    await AttemptsRepository.markPrepared(m, attempt.id, attempt.preparedAt, dataVersion, attempt.processorAccountId);
    // The attempt shows the payment method it charged (decisions §15), whatever the transaction charges later.
    attempt.paymentMethodRef = txn.paymentMethodRef;
    attempt.paymentMethodView = chargedPaymentMethodFields(txn);
    await PaymentMethodsRepository.markAttemptPaymentMethod(
      m,
      attempt.id,
      txn.paymentMethodRef,
      attempt.paymentMethodView,
    );
  }

  /** Ready to charge; a transaction that can never be charged fails the job for good. */
  private toCharge(attempt: AttemptEntity, txn: TransactionEntity): Prepared {
    this.instrument(txn);
    return { kind: 'charge', attempt, txn };
  }

  private instrument(txn: TransactionEntity): PaymentInstrument {
    if (txn.cardKind === 'token') {
      return {
        kind: 'token',
        token: txn.paymentMethod.id,
        isNetworkToken: txn.isNetworkToken === 1,
        cryptogram: txn.cryptogram,
        // Network tokens: the token's expiry and the ECI go with the cryptogram (decisions §15).
        expiration: txn.expirationDate,
        eci: txn.eciIndicator,
      };
    }
    // Permanent: retrying the job cannot make a card appear (BullMQ does not retry it).
    if (!txn.cardEnc || !txn.cardKeyId) throw new UnrecoverableError('transaction has no card to charge');
    return {
      kind: 'pan',
      pan: open(this.config.cardKeys, { keyId: txn.cardKeyId, value: txn.cardEnc }, 'card'),
      expiration: txn.expirationDate,
    };
  }

  /**
   * A prepared attempt its job left pending (the job failed for good, or vanished; ReconcileService's
   * sweep): `unknown`, looked up at once by the reconciliation, which records what the processor has
   * under its key. A run of its job that comes after all finds it no longer pending and leaves it (runAlone,
   * prepare, and `record(..., Pending)` for an answer that was still on its way). False: not left pending.
   */
  async markLeftPending(attemptId: string): Promise<boolean> {
    return this.db.transaction(async (m) => {
      const locked = await AttemptsRepository.lock(m, attemptId);
      if (!locked || locked.attempt.state !== AttemptState.Pending || !locked.attempt.preparedAt) return false;
      await this.markUnknown(m, locked.attempt, locked.txn, 'left pending by its job: looked up by the reconciliation');
      return true;
    });
  }

  /**
   * A never-prepared attempt whose job failed for good (ReconcileService's sweep): dropped (it never
   * reached the processor), and its transaction gets back the schedule the tick's claim took (the
   * attempt's time and plan: the next tick makes a new attempt), or, stopped, its stop closes.
   * False: no longer a never-prepared pending attempt.
   */
  async dropLeftPending(attemptId: string): Promise<boolean> {
    const outbox = await this.db.transaction(async (m) => {
      const locked = await AttemptsRepository.lock(m, attemptId);
      if (!locked || !canDropAttempt(locked.attempt)) return null;
      const { attempt, txn } = locked;
      await AttemptsRepository.dropNeverPrepared(m, attempt.id, txn.id);
      if (txn.stopRequestedAt) return (await closeStopIfSettled(m, txn)) ?? [];
      const inRetry = txn.status === TransactionStatus.Failed || txn.status === TransactionStatus.InRetry;
      if (inRetry && txn.nextAttemptAt === null) {
        await setFields(m, TransactionEntity, txn, {
          nextAttemptAt: attempt.scheduledFor,
          nextAttemptPlan: attempt.plan,
        });
      }
      return [];
    });
    if (outbox === null) return false;
    await this.publish(outbox);
    return true;
  }

  /** No decision from the processor: the attempt is unknown and the transaction waits for it. */
  private async markUnknown(m: EntityManager, attempt: AttemptEntity, txn: TransactionEntity, message: string) {
    await setFields(m, AttemptEntity, attempt, {
      state: attemptTransition(attempt.state, 'outcomeUnknown'),
      status: null,
      responseCode: PROCESSOR_ERROR_CODE,
      authCodeDescription: AuthCodeDescription.Soft,
      message,
      // Looked up on the next reconciliation tick.
      lookupAfter: new Date(),
    });
    const fields: Partial<TransactionEntity> = { nextAttemptAt: null };
    if (txn.status === TransactionStatus.Failed) {
      fields.status = transition(txn.status, 'retryScheduled', { unresolvedAttempts: 1 }).to;
      fields.statusChangedAt = new Date();
    }
    await setFields(m, TransactionEntity, txn, fields);
  }

  /**
   * Records an outcome for an attempt found in state `from` (pending: this run's charge; unknown:
   * the reconciliation's lookup; error: a late capture). Returns the pushes to publish, and a
   * refund to send when the capture came after the transaction had ended without money.
   */
  async record(m: EntityManager, attemptId: string, result: AttemptOutcome, from: AttemptState): Promise<Recorded> {
    const none: Recorded = { outbox: [], lateRefund: null };
    const locked = await AttemptsRepository.lock(m, attemptId);
    if (!locked || locked.attempt.state !== from) return none;
    const { attempt, txn } = locked;
    const now = new Date();
    if (result.outcome !== 'not-charged') this.metrics.attempts.inc({ outcome: result.outcome });
    if (result.outcome === 'error') {
      await this.markUnknown(m, attempt, txn, result.message);
      if (result.retryAfterMs && result.retryAfterMs > 0) {
        // Rate-limited: this merchant's next attempts and this attempt's lookup wait Retry-After.
        const until = new Date(now.getTime() + result.retryAfterMs);
        await ProcessorThrottlesRepository.slowDown(m, txn.merchantId, until);
        await setFields(m, AttemptEntity, attempt, { lookupAfter: until });
      }
      return none;
    }
    if (result.outcome === 'approved') {
      await setFields(m, AttemptEntity, attempt, capturedAttemptFields(attempt, result, from, now));
      await countAttemptOutcome(m, txn.merchantId, txn.id, attempt.preparedAt ?? attempt.scheduledFor, true);
      const captured = capturedTransactionFields(attempt, result, now);
      this.metrics.recoveredMinor.inc({ currency: attempt.currency }, Number(captured.capturedAmountMinor));
      let lateRefund: LateRefund | null = null;
      /** A stop's refunds of nothing (Failed at once) announce their `refund failed`. */
      let stopOutbox: string[] = [];
      if (ENDED_WITHOUT_CAPTURE.includes(txn.status as TransactionStatus)) {
        lateRefund = await this.refundLateCapture(m, txn, attempt, captured, now);
      } else if (CAPTURED_STATUSES.includes(txn.status as TransactionStatus)) {
        // Another attempt captured already (or an earlier late capture): this one charged the customer
        // a second time. Added to what was captured, and refunded at once.
        lateRefund = await this.refundLateCapture(m, txn, attempt, captured, now, true);
      } else if (txn.stopRequestedAt) {
        // A stop arrived while this attempt was in flight and it captured: the stop refund becomes a
        // normal refund of the next batch, in this same database transaction (decisions §8). The
        // recovery ended with a capture: its network fees are recorded as for any capture.
        await setFields(m, TransactionEntity, txn, { ...captured, ...(await networkFeeFields(m, txn)) });
        stopOutbox = await stopToRefund(m, txn, now);
      } else {
        const to = transition(txn.status, 'retrySucceeded', { unresolvedAttempts: 0 }).to;
        // A late capture (a processor notification) may come while the tick's next attempt waits for
        // its job: dropped now (never at the processor), as a stop drops it; one a worker holds is
        // dropped by its prepare, which finds the recovery ended.
        const dropped = await AttemptsRepository.dropUnstarted(m, txn.id);
        await setFields(m, TransactionEntity, txn, {
          ...captured,
          status: to,
          attemptCount: txn.attemptCount - dropped,
          ...(await networkFeeFields(m, txn)),
        });
      }
      const outbox = await announce(m, [retrySucceeded(txn, attempt, now)]);
      return { outbox: [...outbox, ...stopOutbox], lateRefund };
    }
    const declined = result.outcome === 'declined';
    const { fields, classification } = notCapturedAttemptFields(attempt, result, from, now);
    await setFields(m, AttemptEntity, attempt, fields);
    if (declined)
      await countAttemptOutcome(m, txn.merchantId, txn.id, attempt.preparedAt ?? attempt.scheduledFor, false);
    if (txn.stopRequestedAt) {
      // The stop waited for this attempt; it did not capture, so the transaction ends Stopped
      // (unless another attempt is still unresolved: then that one's resolution closes it).
      return { outbox: (await closeStopIfSettled(m, txn)) ?? [], lateRefund: null };
    }
    if (!canTransition(txn.status, 'retryScheduled', { unresolvedAttempts: 0 })) return none;
    // A declined forced deposit was the last word: the recovery ends.
    if (attempt.forcedDeposit)
      return {
        outbox: await this.cancel(m, txn, 'forced deposit declined', attempt.authCodeDescription),
        lateRefund: null,
      };
    // The transaction's own policy version and signals (nothing extra for the UTC heuristics).
    const policyInputs = await policyInputsFor(m, txn.merchantId, txn.id, this.paymentMethods.updaterOn);
    const history = txn.cardHmac
      ? await AttemptsRepository.cardHistory(m, txn.merchantId, txn.cardHmac, null, txn.id)
      : [];
    let plan = this.nextPlan(txn, attempt, result, policyInputs, history, now);
    // decisions §15: a card that can no longer be retried ends that card, not the transaction.
    if (plan.kind === 'stop')
      plan =
        (await this.paymentMethods.fallbackPlan(m, txn, attempt, declined ? result : null, now, policyInputs)) ?? plan;
    if (plan.kind === 'retry') {
      await setFields(m, TransactionEntity, txn, rescheduledTransactionFields(txn, attempt, plan, now));
      return none;
    }
    // Forced deposit (service-spec): instead of ending after soft declines, one last capture without
    // authorization, for merchants who turned it on, unless previous_billing_count is -1.
    if (declined && classification?.retryable && (await this.forcedDepositAllowed(m, txn))) {
      await setFields(m, TransactionEntity, txn, {
        status: transition(txn.status, 'retryScheduled', { unresolvedAttempts: 0 }).to,
        nextAttemptAt: now,
        nextAttemptPlan: {
          rule: `forced deposit: the recovery would end (${plan.reason}); one capture without authorization`,
          policy_version: txn.policyVersion,
        },
        forcedDepositPlanned: true,
        authCodeDescription: attempt.authCodeDescription,
      });
      return none;
    }
    return { outbox: await this.cancel(m, txn, plan.reason, attempt.authCodeDescription), lateRefund: null };
  }

  /** The next step after a decline (or a not-charged settlement): the retry policy's plan. */
  private nextPlan(
    txn: TransactionEntity,
    attempt: AttemptEntity,
    result: AttemptOutcome & { outcome: 'declined' | 'not-charged' },
    policyInputs: Partial<PlanInput>,
    cardHistory: CardAttempt[],
    now: Date,
  ): Plan {
    const declined = result.outcome === 'declined';
    return planNextAttempt({
      ...policyInputs,
      attemptsMade: attempt.retryNumber,
      startedAt: txn.submittedTs,
      now,
      lastDecline: declined
        ? {
            responseCode: result.responseCode,
            merchantAdviceCode: result.merchantAdviceCode,
            at: declineTime(attempt, now),
          }
        : { responseCode: '', technical: true },
      // A processor token's network is only known from the processor's answer (its card brand).
      network: txn.cardNetwork ?? (declined && result.network !== 'other' ? result.network : null),
      amountMinor: BigInt(txn.amountMinor),
      cardHistory,
      cardDataVersion: cardDataVersion(txn.expirationDate),
      timeScale: this.config.retryTimeScale,
    });
  }

  /**
   * The grouped first step (one database transaction for concurrent attempts): every attempt and
   * transaction locked in one statement, then, for the common case only, the same checks `prepare`
   * makes one by one, set-based: the merchant's throttle, the customer's lock and charge in flight,
   * the payment method unchanged, the card's lock and network limits (attempts of the batch on one
   * card count each other, in order), and one in-flight mark for all that pass. An attempt outside
   * the common case is left untouched here and runs alone after this commit (its own locks and
   * re-checks); if the batch fails as a whole, every attempt of it does.
   */
  private async prepareBatch(ids: readonly string[]): Promise<(Prepared | Alone)[]> {
    try {
      const decided = await this.db.transaction((m) => this.prepareLocked(m, ids));
      return ids.map((id) => decided.get(id) ?? ALONE);
    } catch (err) {
      this.logger.warn({ err: (err as Error).message, attempts: ids.length }, 'grouped prepare failed: run alone');
      return ids.map(() => ALONE);
    }
  }

  private async prepareLocked(m: EntityManager, ids: readonly string[]): Promise<Map<string, Prepared>> {
    const decided = new Map<string, Prepared>();
    const locked = await AttemptsRepository.lockMany(m, ids);
    const errored = await AttemptsRepository.withErroredAttempts(
      m,
      locked.map((l) => l.txn.id),
    );
    const throttled = await ProcessorThrottlesRepository.notBeforeMany(
      m,
      locked.map((l) => l.txn.merchantId),
    );
    const now = new Date();
    const candidates: LockedAttempt[] = [];
    for (const l of locked) {
      const { attempt, txn } = l;
      if (attempt.state !== AttemptState.Pending) {
        decided.set(attempt.id, { kind: 'done', outbox: [], result: 'nothing to do' });
        continue;
      }
      // Alone: prepared by an earlier run (looked up first), a stop, earlier attempts to look up for
      // a late capture, a throttled merchant, an expired card for the updater, no card to charge.
      if (
        attempt.preparedAt ||
        txn.stopRequestedAt ||
        !recovering(txn) ||
        errored.has(txn.id) ||
        throttled.has(txn.merchantId)
      )
        continue;
      // Run late (a backlog) and past its recovery window: alone, where it ends the recovery. One late
      // but inside its window is charged like any other (the window's end reads at most its arm).
      if (runLate(attempt, now.getTime()) && now.getTime() >= (await this.windowEnd(m, txn)).getTime()) continue;
      // An expired card: alone, where the updater is asked first and an expired card is never sent.
      if (cardExpired(txn.expirationDate, now)) continue;
      // A card whose data key id is not listed (dropped before a reseal, or renamed): alone, where
      // toCharge opens it before the in-flight mark commits (a dropped key fails there, marking nothing).
      if (txn.cardKind !== 'token' && (!txn.cardEnc || !this.config.cardKeys.some((k) => k.id === txn.cardKeyId)))
        continue;
      candidates.push(l);
    }
    if (candidates.length === 0) return decided;
    // The locks `prepare` takes one by one (customer, card), all at once in one order; then what they guard.
    const customers = candidates.filter((c) => c.txn.paymentMethodRef);
    const cards = candidates.flatMap((c) =>
      c.txn.cardHmac ? [{ merchantId: c.txn.merchantId, cardHmac: c.txn.cardHmac }] : [],
    );
    await AttemptsRepository.lockKeys(m, [
      ...customers.map((c) => accountLockKey(c.txn.merchantId, c.txn.accountId)),
      ...cards.map((c) => cardLockKey(c.merchantId, c.cardHmac)),
    ]);
    const inFlight = await PaymentMethodsRepository.chargesInFlight(
      m,
      customers.map((c) => ({ merchantId: c.txn.merchantId, accountId: c.txn.accountId })),
      candidates.map((c) => c.attempt.id),
    );
    const methods = await PaymentMethodsRepository.getMany(
      m,
      customers.map((c) => ({ merchantId: c.txn.merchantId, id: c.txn.paymentMethodRef! })),
    );
    const histories = await AttemptsRepository.cardHistories(m, cards);
    // The account each charge goes through, recorded with its in-flight mark.
    const accounts = await ProcessorAccountsRepository.currentIds(
      m,
      candidates.map((c) => ({ merchantId: c.txn.merchantId, divisionNumber: c.txn.divisionNumber || null })),
    );
    const charging = new Set<string>();
    const marks: Parameters<typeof AttemptsRepository.markPreparedMany>[1][number][] = [];
    for (const { attempt, txn } of candidates) {
      const customer = `${txn.merchantId}:${txn.accountId}`;
      if (txn.paymentMethodRef) {
        // decisions §15: one charge at a time per customer (another in flight: alone, it waits).
        if (inFlight.has(customer) || charging.has(customer)) continue;
        // Newer data of the payment method, or an ended one: alone (it adopts, or moves on).
        const pm = methods.get(txn.paymentMethodRef);
        if (!pm || pm.ended_at || paymentMethodChanged(txn, pm)) continue;
      }
      const dataVersion = cardDataVersion(txn.expirationDate);
      const history = txn.cardHmac ? histories.get(cardHistoryKey(txn.merchantId, txn.cardHmac))! : [];
      // A check now, as cardLimits: what is dated after now counts as made now (historyAsOf).
      const now = new Date();
      const check = checkNetworkLimits(
        { network: txn.cardNetwork, cardDataVersion: dataVersion },
        historyAsOf(historyOf(history, attempt.id, txn.id), now),
        now,
        BigInt(attempt.amountMinor),
        { timeScale: this.config.retryTimeScale },
      );
      // Not allowed now: alone (another payment method, a deferral or the end of the recovery).
      if (!check.allowed) continue;
      const at = new Date();
      // In flight from here: the next attempt of the batch on this card counts it (as `prepare` would).
      history.push({
        id: attempt.id,
        at,
        amountMinor: BigInt(attempt.amountMinor),
        outcome: 'pending',
        responseCode: null,
        merchantAdviceCode: null,
        cardDataVersion: dataVersion,
      });
      if (txn.paymentMethodRef) charging.add(customer);
      Object.assign(attempt, {
        preparedAt: at,
        cardDataVersion: dataVersion,
        paymentMethodRef: txn.paymentMethodRef,
        paymentMethodView: chargedPaymentMethodFields(txn),
        processorAccountId: accounts.get(accountKey(txn.merchantId, txn.divisionNumber || null)) ?? null,
      });
      marks.push({
        id: attempt.id,
        at,
        dataVersion,
        paymentMethodRef: txn.paymentMethodRef,
        paymentMethodView: attempt.paymentMethodView!,
        processorAccountId: attempt.processorAccountId,
      });
      decided.set(attempt.id, { kind: 'charge', attempt, txn });
    }
    // The in-flight marks commit before any of these charges is sent (the caller awaits the commit).
    await AttemptsRepository.markPreparedMany(m, marks);
    return decided;
  }

  /**
   * The grouped record (one database transaction for concurrent outcomes): the common outcomes
   * written set-based, as `record` writes them one by one: a capture of a transaction in retry
   * (attempt, counts, transaction with its fees, one announcement for all), a decline whose plan is
   * a next attempt (attempt, counts, transaction). Everything else (no decision, a stop, a forced
   * deposit, a plan that ends the card or the recovery, a transaction already ended, two outcomes
   * on one card) is recorded alone after this commit. True per item recorded here (or found
   * recorded already); the pushes are published here after the commit.
   */
  private async recordBatch(items: readonly RecordItem[]): Promise<boolean[]> {
    const unique = new Map<string, AttemptOutcome>();
    for (const i of items) if (!unique.has(i.attemptId)) unique.set(i.attemptId, i.result);
    let done: { recorded: Set<string>; outbox: string[] };
    try {
      done = await this.db.transaction((m) => this.recordLocked(m, unique));
    } catch (err) {
      this.logger.warn({ err: (err as Error).message, attempts: items.length }, 'grouped record failed: record alone');
      return items.map(() => false);
    }
    await this.publish(done.outbox);
    const first = new Set<string>();
    return items.map((i) => {
      // A second item of one attempt (never from BullMQ) is recorded alone: it then finds it recorded.
      const inBatch = done.recorded.has(i.attemptId) && !first.has(i.attemptId);
      first.add(i.attemptId);
      return inBatch;
    });
  }

  private async recordLocked(
    m: EntityManager,
    outcomes: ReadonlyMap<string, AttemptOutcome>,
  ): Promise<{ recorded: Set<string>; outbox: string[] }> {
    const recorded = new Set<string>();
    const locked = await AttemptsRepository.lockMany(m, [...outcomes.keys()]);
    const captures: (LockedAttempt & { result: ChargeResult & { outcome: 'approved' } })[] = [];
    const declines: (LockedAttempt & { result: ChargeResult & { outcome: 'declined' } })[] = [];
    const cards = new Set<string>();
    for (const { attempt, txn } of locked) {
      const result = outcomes.get(attempt.id)!;
      // Recorded by an earlier run: nothing to do (as `record`).
      if (attempt.state !== AttemptState.Pending) {
        recorded.add(attempt.id);
        continue;
      }
      if (result.outcome !== 'approved' && result.outcome !== 'declined') continue;
      if (txn.stopRequestedAt) continue;
      // One outcome per card in a batch: each card history read below is then the one `record` reads.
      if (txn.cardHmac) {
        const card = cardHistoryKey(txn.merchantId, txn.cardHmac);
        if (cards.has(card)) continue;
        cards.add(card);
      }
      if (result.outcome === 'approved') {
        if (ENDED_WITHOUT_CAPTURE.includes(txn.status as TransactionStatus)) continue;
        if (!canTransition(txn.status, 'retrySucceeded', { unresolvedAttempts: 0 })) continue;
        captures.push({ attempt, txn, result });
      } else {
        if (attempt.forcedDeposit || !canTransition(txn.status, 'retryScheduled', { unresolvedAttempts: 0 })) continue;
        declines.push({ attempt, txn, result });
      }
    }
    if (captures.length + declines.length === 0) return { recorded, outbox: [] };
    const now = new Date();
    const policyRows = await policyRowsFor(
      m,
      [...captures, ...declines].map(({ txn }) => ({ merchantId: txn.merchantId, transactionId: txn.id })),
    );
    // The declines' plans, from what `record` reads after writing the attempt: its own outcome in the
    // card's history and in its slot's counts.
    const inputs = await policyInputsForMany(
      m,
      policyRows,
      declines.map((d) => d.txn.id),
      this.paymentMethods.updaterOn,
    );
    const histories = await AttemptsRepository.cardHistories(
      m,
      declines.flatMap(({ txn }) => (txn.cardHmac ? [{ merchantId: txn.merchantId, cardHmac: txn.cardHmac }] : [])),
    );
    const attemptUpdates: { row: AttemptEntity; fields: Partial<AttemptEntity> }[] = [];
    const txnUpdates: { row: TransactionEntity; fields: Partial<TransactionEntity> }[] = [];
    const counted: { merchantId: string; transactionId: string; attemptAt: Date; approved: boolean }[] = [];
    const rescheduled: LockedAttempt[] = [];
    for (const { attempt, txn, result } of declines) {
      const { fields } = notCapturedAttemptFields(attempt, result, AttemptState.Pending, now);
      const attemptAt = attempt.preparedAt ?? attempt.scheduledFor;
      const own: CardAttempt = {
        at: now,
        amountMinor: BigInt(attempt.amountMinor),
        outcome: 'declined',
        responseCode: fields.responseCode ?? null,
        merchantAdviceCode: fields.merchantAdviceCode ?? null,
        cardDataVersion: attempt.cardDataVersion,
        network: fields.cardNetwork ?? attempt.cardNetwork,
        decidedAt: declineTime(attempt, now),
      };
      const history: CardAttempt[] = txn.cardHmac
        ? [
            ...historyOf(histories.get(cardHistoryKey(txn.merchantId, txn.cardHmac))!, attempt.id, txn.id).map(
              ({ id: _id, ...h }) => h,
            ),
            // Its own row is in the card's history when it was made on that card (the usual case).
            ...(attempt.cardHmac === txn.cardHmac ? [own] : []),
          ]
        : [];
      const policyInputs = withOwnCount(
        inputs.get(txn.id) ?? {},
        outcomeSlotOf(policyRows.get(txn.id), attemptAt),
        false,
      );
      const plan = this.nextPlan(txn, attempt, result, policyInputs, history, now);
      // A plan that ends the card or the recovery: alone (the account's next card, a forced deposit, the end).
      if (plan.kind !== 'retry') continue;
      attemptUpdates.push({ row: attempt, fields });
      counted.push({ merchantId: txn.merchantId, transactionId: txn.id, attemptAt, approved: false });
      rescheduled.push({ attempt, txn });
      txnUpdates.push({
        row: txn,
        fields: rescheduledTransactionFields(
          txn,
          { authCodeDescription: fields.authCodeDescription ?? null },
          plan,
          now,
        ),
      });
    }
    for (const { attempt, txn, result } of captures) {
      attemptUpdates.push({ row: attempt, fields: capturedAttemptFields(attempt, result, AttemptState.Pending, now) });
      counted.push({
        merchantId: txn.merchantId,
        transactionId: txn.id,
        attemptAt: attempt.preparedAt ?? attempt.scheduledFor,
        approved: true,
      });
    }
    await setFieldsMany(m, AttemptEntity, attemptUpdates);
    await countAttemptOutcomes(m, policyRows, counted);
    // The captures' fees read every attempt of their transaction as now recorded.
    const attemptsOf = await AttemptsRepository.ofTransactions(
      m,
      captures.map((c) => c.txn.id),
    );
    for (const { attempt, txn, result } of captures) {
      const captured = capturedTransactionFields(attempt, result, now);
      this.metrics.recoveredMinor.inc({ currency: attempt.currency }, Number(captured.capturedAmountMinor));
      const to = transition(txn.status, 'retrySucceeded', { unresolvedAttempts: 0 }).to;
      txnUpdates.push({
        row: txn,
        fields: { ...captured, status: to, ...networkFeesOf(txn, attemptsOf.get(txn.id) ?? []) },
      });
    }
    await setFieldsMany(m, TransactionEntity, txnUpdates);
    const outbox = await announce(
      m,
      captures.map(({ attempt, txn }) => retrySucceeded(txn, attempt, now)),
    );
    for (const { attempt } of [...captures, ...rescheduled]) recorded.add(attempt.id);
    for (const _ of captures) this.metrics.attempts.inc({ outcome: 'approved' });
    for (const _ of rescheduled) this.metrics.attempts.inc({ outcome: 'declined' });
    return { recorded, outbox };
  }

  /** Forced deposit is on for the merchant, the transaction may have one, and its processor takes them. */
  private async forcedDepositAllowed(m: EntityManager, txn: TransactionEntity): Promise<boolean> {
    if (txn.forcedDepositPlanned || txn.previousBillingCount === -1) return false;
    if (!(await MerchantsRepository.forcedDepositOn(m, txn.merchantId))) return false;
    return (await this.processorOf(txn)).forcedDeposits === true;
  }

  /**
   * A capture found after the transaction ended Cancelled or Stopped (its result was pushed as
   * final): the capture is recorded and refunded in full at once, never left as a silent charge.
   * The refund row is written here (Processing, marked sent) and sent by the caller right after
   * the commit with the refund's vid as idempotency key; if this worker dies in between, the
   * refund batcher sends it with the same key.
   */
  private async refundLateCapture(
    m: EntityManager,
    txn: TransactionEntity,
    attempt: AttemptEntity,
    captured: Partial<TransactionEntity>,
    now: Date,
    /** The transaction had captured already: its capture (processor id, account) stays the one refunds use. */
    second = false,
  ): Promise<LateRefund> {
    // What a failed refund returns the transaction to: a second capture's, the status before any refund
    // (the merchant's refund in flight, if any, recorded it), never Refund Requested.
    const previousStatus = second ? await statusBeforeRefunds(m, txn) : TransactionStatus.Captured;
    if (second) {
      const to = transition(txn.status, 'refundRequested', { unresolvedAttempts: 0 }).to;
      const total = BigInt(txn.capturedAmountMinor ?? '0') + BigInt(captured.capturedAmountMinor ?? '0');
      await setFields(m, TransactionEntity, txn, {
        capturedAmountMinor: total.toString(),
        status: to,
        statusChangedAt: now,
      });
    } else {
      const to = transition(txn.status, 'lateCapture', { unresolvedAttempts: 0 }).to;
      // The fees recorded when the recovery ended without money are read again from the rows, which now
      // hold this capture (the naive schedule stops at it), so the figures equal what the rows say.
      await setFields(m, TransactionEntity, txn, { ...captured, status: to, ...(await networkFeeFields(m, txn)) });
    }
    const refund = m.getRepository(RefundEntity).create({
      vid: newVid(),
      merchantId: txn.merchantId,
      transactionId: txn.id,
      kind: 'refund',
      // The charge refunded: this attempt's (the refund batcher sends it again there, on its account).
      attemptId: attempt.id,
      // What was captured: a partial authorization's part (decisions §15), else the attempt's amount.
      amountMinor: attempt.partialAmountMinor ?? attempt.amountMinor,
      currency: attempt.currency,
      status: RefundStatus.Processing,
      previousStatus,
      requestedAt: now,
      timestamp: now,
      sentAt: now,
    });
    await m.getRepository(RefundEntity).insert(refund);
    this.metrics.lateCaptures.inc();
    this.logger.error(
      { attempt: attempt.vid, transaction: txn.vid },
      second
        ? 'a second capture arrived for a transaction that had captured: refunding it'
        : 'a capture arrived after the transaction ended without money: refunding it',
    );
    return {
      refundId: refund.id,
      refundVid: refund.vid,
      processorTransactionId: attempt.processorTransactionId ?? '',
      amountMinor: BigInt(attempt.partialAmountMinor ?? attempt.amountMinor),
      currency: attempt.currency,
      merchantId: txn.merchantId,
      processorAccountId: attempt.processorAccountId,
    };
  }

  /**
   * Sends a late capture's refund and records its result with its push. A processor that does not
   * answer (ProcessorUnavailableError) leaves the refund Processing and marked sent: the refund
   * batcher sends it again with the same key.
   */
  async sendLateRefund(refund: LateRefund): Promise<void> {
    const processor = await this.processors.forAccount(refund.processorAccountId);
    const result = await processor.refund({
      idempotencyKey: refund.refundVid,
      processorTransactionId: refund.processorTransactionId,
      amountMinor: refund.amountMinor,
      currency: refund.currency,
    });
    // Completed or failed, the transaction settled as the refund batcher settles it (a second
    // capture's refund leaves the first capture: Partially Refunded); Adyen `received` on an account
    // with notifications stays Processing for the REFUND notification.
    const applied = await this.db.transaction((m) => applyRefundAnswer(m, refund.refundId, result));
    if (applied?.outcome === 'failed') {
      this.logger.error(
        { transaction: applied.txn?.vid },
        'the refund of a late capture failed: operator action needed',
      );
    }
    await this.publish(applied?.outbox ?? []);
  }

  /** Schedule exhausted or retry forbidden: Cancelled, and a `retry failed` push. */
  private async cancel(
    m: EntityManager,
    txn: TransactionEntity,
    reason: string,
    description: string | null,
  ): Promise<string[]> {
    const now = new Date();
    const unresolved = await unresolvedAttempts(m, txn.id);
    // Never final while an attempt may still have charged: its resolution plans the next step.
    if (!canTransition(txn.status, 'retryExhausted', { unresolvedAttempts: unresolved })) {
      await setFields(m, TransactionEntity, txn, { nextAttemptAt: null });
      return [];
    }
    const { to, announces } = transition(txn.status, 'retryExhausted', { unresolvedAttempts: unresolved });
    await setFields(m, TransactionEntity, txn, {
      status: to,
      nextAttemptAt: null,
      statusChangedAt: now,
      authCodeDescription: description ?? AuthCodeDescription.Hard,
      ...(await networkFeeFields(m, txn)),
    });
    this.logger.log({ reason }, 'recovery ended without capture');
    return announceTransaction(m, txn, announces!, now);
  }

  async publish(ids: string[]): Promise<void> {
    await this.relay.publish(ids).catch((err: unknown) => {
      this.logger.warn({ err: (err as Error).message }, 'outbox publish deferred to the sweeper');
    });
  }
}
