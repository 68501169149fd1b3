import { Inject, Injectable, Logger } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import {
  AttemptEntity,
  AttemptsRepository,
  MerchantsRepository,
  ProcessorThrottlesRepository,
  RefundEntity,
  PaymentMethodsRepository,
  TransactionEntity,
  attemptView,
  chargedPaymentMethodFields,
} from '@retain/db';
import {
  AuthCodeDescription,
  EventName,
  RefundStatus,
  TransactionStatus,
  cardDataVersion,
  checkNetworkLimits,
  classifyDecline,
  newVid,
  open,
  planNextAttempt,
  recoveryWindowEnd,
} from '@retain/domain';
import { RETAIN_CONFIG, RetainMetrics } from '@retain/platform';
import {
  TRANSACTION_PROCESSORS,
  type ChargeRequest,
  type ChargeResult,
  type PaymentInstrument,
  type PaymentProcessor,
  type RefundResult,
  type TransactionProcessors,
} from '@retain/processor';
import { OutboxRelay, announce } from '@retain/queues';
import {
  AttemptState,
  ENDED_WITHOUT_CAPTURE,
  PROCESSOR_ERROR_CODE,
  announceTransaction,
  attemptTransition,
  canDropAttempt,
  canTransition,
  closeStopIfSettled,
  countAttemptOutcome,
  networkFeeFields,
  policyInputsFor,
  storedExplanation,
  recordRefundAnswer,
  stopToRefund,
  transition,
  unresolvedAttempts,
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

type Prepared =
  | { kind: 'done'; outbox: string[]; result: string }
  | { kind: 'charge'; attempt: AttemptEntity; txn: TransactionEntity };

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
  /** The transaction's merchant and division: they pick the processor that refunds it. */
  merchantId: string;
  divisionNumber: string | null;
}

/** Where an attempt is charged, and its ChargeRequest as built for the charge (lookups replay it). */
export interface AttemptCharge {
  processor: PaymentProcessor;
  request: ChargeRequest;
}

export interface Recorded {
  outbox: string[];
  lateRefund: LateRefund | null;
}

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
    return { processor: await this.processorOf(txn), request: this.chargeRequest(attempt, txn) };
  }

  private processorOf(txn: { merchantId: string; divisionNumber: string | null }): Promise<PaymentProcessor> {
    return this.processors.forTransaction(txn.merchantId, txn.divisionNumber || null);
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

  async run(attemptId: string): Promise<string> {
    // Outside any transaction: a pooled connection must never wait for a second one (pool starvation).
    const row = await AttemptsRepository.forRun(this.db, attemptId);
    if (!row || row.state !== AttemptState.Pending) return 'nothing to do';
    // A crashed or stalled earlier run may already have charged this attempt's key. Only an attempt
    // marked in flight (prepared) can have been: the charge is made after that mark commits.
    const before = row.prepared_at ? await this.chargeOf(attemptId) : null;
    const found = before ? await before.processor.lookupCharge(before.request.idempotencyKey, before.request) : null;
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
    const { attempt, txn } = prepared;
    await this.paymentMethods.fillCryptogram(txn);
    const processor = await this.processorOf(txn);
    const request = this.chargeRequest(attempt, txn);
    // The charge is idempotent by key: a duplicate run racing this one gets the same result.
    let result = existing ?? (await processor.charge(request));
    if (this.config.testPauseAfterProcessorMs > 0) {
      await new Promise((resolve) => setTimeout(resolve, this.config.testPauseAfterProcessorMs));
    }
    if (result.outcome === 'error') {
      // A timeout or 5xx says nothing about the charge: it may have gone through. Ask once by the
      // same key; without a decision the attempt is recorded `unknown` and reconciled later.
      const lookedUp = await processor.lookupCharge(request.idempotencyKey, request);
      if (lookedUp && lookedUp.outcome !== 'error') result = lookedUp;
    }
    // decisions §15: a data-quality decline asks the account updater before the next step is planned.
    if (result.outcome === 'declined') await this.paymentMethods.refreshCard(attemptId, result);
    const recorded = result;
    const { outbox } = await this.db.transaction((m) => this.record(m, attemptId, recorded, AttemptState.Pending));
    await this.publish(outbox);
    return result.outcome === 'error' ? AttemptState.Unknown : result.outcome;
  }

  /**
   * Earlier attempts of this transaction settled as not charged may have been charged after all
   * (the processor finished late). Before a new idempotency key is charged, look them up: if one
   * captured, it is recorded as the capture and this (never prepared) attempt is not made.
   * Looked up by key only, without the original request: a replay of an attempt settled as not
   * charged would make its charge now.
   */
  private async lateCapture(attemptId: string, errored: { id: string; vid: string }[]): Promise<string | null> {
    const charge = await this.chargeOf(attemptId);
    if (!charge) return null;
    for (const e of errored) {
      const found = await charge.processor.lookupCharge(e.vid);
      if (found?.outcome !== 'approved') continue;
      const outbox = await this.db.transaction(async (m) => {
        const locked = await AttemptsRepository.lock(m, attemptId);
        if (!locked || !canDropAttempt(locked.attempt)) return null;
        await AttemptsRepository.dropNeverPrepared(m, locked.attempt.id, locked.txn.id);
        this.logger.warn({ attempt: e.vid }, 'an attempt settled as not charged was a capture after all: recorded');
        return (await this.record(m, e.id, found, AttemptState.Error)).outbox;
      });
      if (outbox === null) return null;
      await this.publish(outbox);
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
    if (attempt.preparedAt) {
      // An earlier run passed the limit check and may have reached the processor: the same key
      // again (the processor answers a key once), never dropped.
      return this.toCharge(attempt, txn);
    }
    // The merchant's processor asked to slow down (429): its attempts wait, other merchants' do not.
    const notBefore = await ProcessorThrottlesRepository.notBefore(m, txn.merchantId);
    if (notBefore) {
      await AttemptsRepository.dropNeverPrepared(m, attempt.id, txn.id);
      await AttemptsRepository.deferTransaction(m, txn.id, notBefore);
      this.logger.log({ merchant: txn.merchantId }, 'attempt deferred: the processor rate-limits this merchant');
      return done();
    }
    // decisions §15: one charge at a time per customer; the card to charge (newer data, or the account's next).
    const choice = await this.paymentMethods.chooseCard(m, attempt, txn);
    if (choice.kind !== 'charge') {
      await AttemptsRepository.dropNeverPrepared(m, attempt.id, txn.id);
      if (choice.kind === 'wait') await AttemptsRepository.deferTransaction(m, txn.id, choice.until);
      return done(choice.kind === 'none' ? await this.cancel(m, txn, choice.reason, null) : []);
    }
    dataVersion = cardDataVersion(txn.expirationDate);
    // One limit check at a time per card and merchant: the check and the in-flight mark below commit
    // together, so the next attempt on the card (any transaction, any worker) counts this one.
    if (txn.cardHmac) await AttemptsRepository.lockCard(m, txn.merchantId, txn.cardHmac);
    const history = txn.cardHmac
      ? await AttemptsRepository.cardHistory(m, txn.merchantId, txn.cardHmac, attempt.id)
      : [];
    let check = checkNetworkLimits(
      { network: txn.cardNetwork, cardDataVersion: dataVersion },
      history,
      new Date(),
      BigInt(attempt.amountMinor),
      { timeScale: this.config.retryTimeScale },
    );
    // decisions §15: a card the limits forbid now gives way to another payment method they allow.
    if (!check.allowed && (await this.paymentMethods.alternativeNow(m, attempt, txn))) {
      dataVersion = cardDataVersion(txn.expirationDate);
      check = { allowed: true };
    }
    if (!check.allowed) {
      await AttemptsRepository.dropNeverPrepared(m, attempt.id, txn.id);
      let outbox: string[] = [];
      if (check.permanently) outbox = await this.cancel(m, txn, check.rule, null);
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

  /** The end of the transaction's recovery window under its own policy version and experiment arm. */
  private async windowEnd(m: EntityManager, txn: TransactionEntity): Promise<Date> {
    const inputs = await policyInputsFor(m, txn.merchantId, txn.id);
    return recoveryWindowEnd({ ...inputs, startedAt: txn.submittedTs, timeScale: this.config.retryTimeScale });
  }

  /** The attempt goes to the processor: from now on it counts in the card's history until recorded. */
  private async markInFlight(
    m: EntityManager,
    attempt: AttemptEntity,
    txn: TransactionEntity,
    dataVersion: string | null,
  ): Promise<void> {
    if (attempt.preparedAt) return;
    attempt.preparedAt = new Date();
    attempt.cardDataVersion = dataVersion;
    await AttemptsRepository.markPrepared(m, attempt.id, attempt.preparedAt, dataVersion);
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
      const edge: AttemptEdgeName =
        from === AttemptState.Pending ? 'approved' : from === AttemptState.Unknown ? 'resolvedCaptured' : 'lateCapture';
      // A partial authorization (decisions §15) captured less than asked: that is what is refundable.
      const capturedMinor =
        result.amountMinor !== undefined && result.amountMinor > 0n && result.amountMinor < BigInt(attempt.amountMinor)
          ? result.amountMinor.toString()
          : null;
      await setFields(m, AttemptEntity, attempt, {
        processedAt: now,
        partialAmountMinor: capturedMinor,
        state: attemptTransition(attempt.state, edge),
        status: TransactionStatus.Captured,
        responseCode: result.responseCode,
        authCodeDescription: null,
        processorTransactionId: result.processorTransactionId,
        message: result.message,
        lookupAfter: null,
      });
      await countAttemptOutcome(m, txn.merchantId, txn.id, attempt.preparedAt ?? attempt.scheduledFor, true);
      const captured = {
        forcedDeposit: attempt.forcedDeposit,
        capturedAmountMinor: capturedMinor ?? attempt.amountMinor,
        processorTransactionId: result.processorTransactionId,
        nextAttemptAt: null,
        statusChangedAt: now,
        authCodeDescription: null,
      };
      this.metrics.recoveredMinor.inc({ currency: attempt.currency }, Number(capturedMinor ?? attempt.amountMinor));
      let lateRefund: LateRefund | null = null;
      if (ENDED_WITHOUT_CAPTURE.includes(txn.status as TransactionStatus)) {
        lateRefund = await this.refundLateCapture(m, txn, attempt, captured, now);
      } else if (txn.stopRequestedAt) {
        // A stop arrived while this attempt was in flight and it captured: the stop refund becomes a
        // normal refund of the next batch, in this same database transaction (decisions §8).
        await setFields(m, TransactionEntity, txn, captured);
        await stopToRefund(m, txn, now);
      } else {
        const to = transition(txn.status, 'retrySucceeded', { unresolvedAttempts: 0 }).to;
        await setFields(m, TransactionEntity, txn, { ...captured, status: to, ...(await networkFeeFields(m, txn)) });
      }
      const outbox = await announce(m, [
        {
          merchantId: txn.merchantId,
          eventName: EventName.RetrySucceeded,
          payloadId: attempt.vid,
          merchantTransactionId: txn.merchantTxnId,
          transactionRowId: txn.id,
          content: attemptView(txn, attempt),
          occurredAt: now,
        },
      ]);
      return { outbox, lateRefund };
    }
    const declined = result.outcome === 'declined';
    const classification = declined
      ? classifyDecline({
          network: result.network,
          responseCode: result.responseCode,
          merchantAdviceCode: result.merchantAdviceCode,
        })
      : null;
    const edge: AttemptEdgeName = declined
      ? from === AttemptState.Pending
        ? 'declined'
        : 'resolvedDeclined'
      : 'resolvedNotCharged';
    await setFields(m, AttemptEntity, attempt, {
      processedAt: now,
      state: attemptTransition(attempt.state, edge),
      status: TransactionStatus.Failed,
      responseCode: declined ? result.responseCode : PROCESSOR_ERROR_CODE,
      merchantAdviceCode: declined ? (result.merchantAdviceCode ?? null) : null,
      authCodeDescription: classification?.description ?? AuthCodeDescription.Soft,
      processorTransactionId: declined ? result.processorTransactionId : null,
      message: result.message,
      // Settled as not charged: the late-capture watch keeps looking it up for the processor's window.
      lookupAfter: declined ? null : now,
    });
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
    const policyInputs = await policyInputsFor(m, txn.merchantId, txn.id);
    let plan = planNextAttempt({
      ...policyInputs,
      attemptsMade: attempt.retryNumber,
      startedAt: txn.submittedTs,
      now,
      lastDecline: declined
        ? { responseCode: result.responseCode, merchantAdviceCode: result.merchantAdviceCode }
        : { responseCode: '', technical: true },
      // A processor token's network is only known from the processor's answer (its card brand).
      network: txn.cardNetwork ?? (declined && result.network !== 'other' ? result.network : null),
      amountMinor: BigInt(txn.amountMinor),
      cardHistory: txn.cardHmac ? await AttemptsRepository.cardHistory(m, txn.merchantId, txn.cardHmac, null) : [],
      cardDataVersion: cardDataVersion(txn.expirationDate),
      timeScale: this.config.retryTimeScale,
    });
    // decisions §15: a card that can no longer be retried ends that card, not the transaction.
    if (plan.kind === 'stop')
      plan = (await this.paymentMethods.fallbackPlan(m, txn, attempt, declined ? result : null, now)) ?? plan;
    if (plan.kind === 'retry') {
      await setFields(m, TransactionEntity, txn, {
        status: transition(txn.status, 'retryScheduled', { unresolvedAttempts: 0 }).to,
        nextAttemptAt: plan.at,
        nextAttemptPlan: storedExplanation(plan.explain, txn.policyVersion),
        authCodeDescription: attempt.authCodeDescription,
        statusChangedAt: txn.status === TransactionStatus.InRetry ? txn.statusChangedAt : now,
      });
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
  ): Promise<LateRefund> {
    const to = transition(txn.status, 'lateCapture', { unresolvedAttempts: 0 }).to;
    await setFields(m, TransactionEntity, txn, { ...captured, status: to });
    const refund = m.getRepository(RefundEntity).create({
      vid: newVid(),
      merchantId: txn.merchantId,
      transactionId: txn.id,
      kind: 'refund',
      // What was captured: a partial authorization's part (decisions §15), else the attempt's amount.
      amountMinor: attempt.partialAmountMinor ?? attempt.amountMinor,
      currency: attempt.currency,
      status: RefundStatus.Processing,
      previousStatus: TransactionStatus.Captured,
      requestedAt: now,
      timestamp: now,
      sentAt: now,
    });
    await m.getRepository(RefundEntity).insert(refund);
    this.metrics.lateCaptures.inc();
    this.logger.error(
      { attempt: attempt.vid, transaction: txn.vid },
      'a capture arrived after the transaction ended without money: refunding it',
    );
    return {
      refundId: refund.id,
      refundVid: refund.vid,
      processorTransactionId: attempt.processorTransactionId ?? '',
      amountMinor: BigInt(attempt.partialAmountMinor ?? attempt.amountMinor),
      currency: attempt.currency,
      merchantId: txn.merchantId,
      divisionNumber: txn.divisionNumber || null,
    };
  }

  /**
   * Sends a late capture's refund and records its result with its push. A processor that does not
   * answer (ProcessorUnavailableError) leaves the refund Processing and marked sent: the refund
   * batcher sends it again with the same key.
   */
  async sendLateRefund(refund: LateRefund): Promise<void> {
    const processor = await this.processorOf({ merchantId: refund.merchantId, divisionNumber: refund.divisionNumber });
    const result = await processor.refund({
      idempotencyKey: refund.refundVid,
      processorTransactionId: refund.processorTransactionId,
      amountMinor: refund.amountMinor,
      currency: refund.currency,
    });
    const outbox = await this.db.transaction((m) => this.recordLateRefund(m, refund.refundId, result));
    await this.publish(outbox);
  }

  private async recordLateRefund(m: EntityManager, refundId: string, result: RefundResult): Promise<string[]> {
    const recorded = await recordRefundAnswer(m, refundId, result);
    if (!recorded) return [];
    const { txn, completed, now } = recorded;
    const { to, announces } = transition(txn.status, completed ? 'refundCompleted' : 'refundFailed', {
      unresolvedAttempts: await unresolvedAttempts(m, txn.id),
    });
    if (!completed) {
      this.logger.error({ transaction: txn.vid }, 'the refund of a late capture failed: operator action needed');
    }
    await setFields(m, TransactionEntity, txn, { status: to, statusChangedAt: now });
    return announceTransaction(m, txn, announces!, now);
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
