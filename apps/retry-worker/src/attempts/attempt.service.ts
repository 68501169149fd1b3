import { Inject, Injectable, Logger } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import { AttemptEntity, TransactionEntity, attemptView, transactionView, RefundEntity } from '@retain/db';
import {
  AuthCodeDescription,
  EventName,
  TransactionStatus,
  checkNetworkLimits,
  classifyDecline,
  open,
  planNextAttempt,
  type CardAttempt,
} from '@retain/domain';
import { RETAIN_CONFIG, RetainMetrics, closeStop } from '@retain/platform';
import {
  PgSandboxLedger,
  createProcessor,
  type ChargeResult,
  type PaymentInstrument,
  type PaymentProcessor,
} from '@retain/processor';
import { OutboxRelay, announce } from '@retain/queues';
import { DataSource, type EntityManager } from 'typeorm';

type Prepared =
  | { kind: 'done'; outbox: string[] }
  | { kind: 'charge'; attempt: AttemptEntity; txn: TransactionEntity; instrument: PaymentInstrument };

/**
 * One retry attempt, in three steps so no row lock is held across the processor call:
 * 1. under row locks, re-check the transaction (a stop may have arrived, the network limits may
 *    forbid the attempt now) and decide to charge;
 * 2. ask the processor: first a lookup by the attempt's idempotency key (a crashed or stalled run
 *    may already have charged), then the charge with that same key;
 * 3. under row locks again, record the outcome once, move the transaction on, and announce it.
 * A second run of the same job finds the attempt recorded and does nothing.
 */
@Injectable()
export class AttemptService {
  private readonly logger = new Logger(AttemptService.name);
  private readonly processor: PaymentProcessor;

  constructor(
    private readonly db: DataSource,
    private readonly relay: OutboxRelay,
    private readonly metrics: RetainMetrics,
    @Inject(RETAIN_CONFIG) private readonly config: RetainConfig,
  ) {
    this.processor = createProcessor(config.processor, new PgSandboxLedger(db));
  }

  async run(attemptId: string): Promise<string> {
    // Outside any transaction: a pooled connection must never wait for a second one (pool starvation).
    const [row]: { vid: string }[] = await this.db.query(`SELECT vid FROM attempts WHERE id = $1`, [attemptId]);
    if (!row) return 'nothing to do';
    const alreadyCharged = (await this.processor.lookupCharge(row.vid)) !== null;
    const prepared = await this.db.transaction((m) => this.prepare(m, attemptId, alreadyCharged));
    if (prepared.kind === 'done') {
      await this.publish(prepared.outbox);
      return 'nothing to do';
    }
    const { attempt, txn, instrument } = prepared;
    const result =
      (await this.processor.lookupCharge(attempt.vid)) ??
      (await this.processor.charge({
        idempotencyKey: attempt.vid,
        attemptNumber: attempt.retryNumber,
        amountMinor: BigInt(attempt.amountMinor),
        currency: attempt.currency,
        instrument,
        originalResponseCode: txn.authCode,
        divisionNumber: txn.divisionNumber,
        networkTransactionId: txn.paymentNetworkTransactionId,
        billingDescriptor: txn.billingDescriptor,
        at: new Date(),
      }));
    if (this.config.testPauseAfterProcessorMs > 0) {
      await new Promise((resolve) => setTimeout(resolve, this.config.testPauseAfterProcessorMs));
    }
    const outbox = await this.db.transaction((m) => this.record(m, attemptId, result));
    await this.publish(outbox);
    return result.outcome;
  }

  private async lock(
    m: EntityManager,
    attemptId: string,
  ): Promise<{ attempt: AttemptEntity; txn: TransactionEntity } | null> {
    const attempt = await m
      .getRepository(AttemptEntity)
      .findOne({ where: { id: attemptId }, lock: { mode: 'pessimistic_write' } });
    if (!attempt) return null;
    const txn = await m
      .getRepository(TransactionEntity)
      .findOne({ where: { id: attempt.transactionId }, lock: { mode: 'pessimistic_write' } });
    return txn ? { attempt, txn } : null;
  }

  private async prepare(m: EntityManager, attemptId: string, alreadyCharged: boolean): Promise<Prepared> {
    const locked = await this.lock(m, attemptId);
    if (!locked || locked.attempt.state !== 'pending') return { kind: 'done', outbox: [] };
    const { attempt, txn } = locked;
    // Already charged by an earlier run of this attempt (crash after the call): record it, skip the checks.
    if (alreadyCharged) return { kind: 'charge', attempt, txn, instrument: this.instrument(txn) };

    if (txn.stopRequestedAt) {
      // A stop arrived before this attempt started: it never starts.
      await this.dropAttempt(m, attempt, txn);
      return { kind: 'done', outbox: await closeStop(m, txn) };
    }
    const history = await this.cardHistory(m, txn.cardHmac, attempt.id);
    const check = checkNetworkLimits(txn.cardNetwork, history, new Date(), BigInt(attempt.amountMinor), {
      timeScale: this.config.retryTimeScale,
    });
    if (!check.allowed) {
      await this.dropAttempt(m, attempt, txn);
      let outbox: string[] = [];
      if (check.permanently) {
        outbox = await this.cancel(m, txn, check.rule, null);
      } else {
        await m.query(`UPDATE transactions SET next_attempt_at = $2, updated_at = now() WHERE id = $1`, [
          txn.id,
          check.notBefore,
        ]);
      }
      this.logger.log({ rule: check.rule }, 'attempt not made: network limit');
      return { kind: 'done', outbox };
    }
    return { kind: 'charge', attempt, txn, instrument: this.instrument(txn) };
  }

  private instrument(txn: TransactionEntity): PaymentInstrument {
    if (txn.cardKind === 'token') {
      return {
        kind: 'token',
        token: txn.paymentMethod.id,
        isNetworkToken: txn.isNetworkToken === 1,
        cryptogram: txn.cryptogram,
      };
    }
    if (!txn.cardEnc || !txn.cardKeyId) throw new Error('transaction has no card to charge');
    return {
      kind: 'pan',
      pan: open(this.config.cardKeys, { keyId: txn.cardKeyId, value: txn.cardEnc }, 'card'),
      expiration: txn.expirationDate,
    };
  }

  private async record(m: EntityManager, attemptId: string, result: ChargeResult): Promise<string[]> {
    const locked = await this.lock(m, attemptId);
    if (!locked || locked.attempt.state !== 'pending') return [];
    const { attempt, txn } = locked;
    const now = new Date();
    attempt.processedAt = now;
    this.metrics.attempts.inc({ outcome: result.outcome });
    if (result.outcome === 'approved') {
      Object.assign(attempt, {
        state: 'captured',
        status: TransactionStatus.Captured,
        responseCode: result.responseCode,
        authCodeDescription: null,
        processorTransactionId: result.processorTransactionId,
        message: result.message,
      });
      await m.save(attempt);
      Object.assign(txn, {
        status: TransactionStatus.Captured,
        capturedAmountMinor: attempt.amountMinor,
        processorTransactionId: result.processorTransactionId,
        nextAttemptAt: null,
        statusChangedAt: now,
        authCodeDescription: null,
      });
      await m.save(txn);
      this.metrics.recoveredMinor.inc({ currency: attempt.currency }, Number(attempt.amountMinor));
      return announce(m, [
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
    }
    const declined = result.outcome === 'declined';
    const classification = declined
      ? classifyDecline({
          network: result.network,
          responseCode: result.responseCode,
          merchantAdviceCode: result.merchantAdviceCode,
        })
      : null;
    Object.assign(attempt, {
      state: declined ? 'declined' : 'error',
      status: TransactionStatus.Failed,
      responseCode: declined ? result.responseCode : null,
      merchantAdviceCode: declined ? (result.merchantAdviceCode ?? null) : null,
      authCodeDescription: classification?.description ?? AuthCodeDescription.Soft,
      processorTransactionId: declined ? result.processorTransactionId : null,
      message: result.message,
    });
    await m.save(attempt);
    if (txn.stopRequestedAt) {
      // The stop waited for this attempt; it did not capture, so the transaction ends Stopped.
      return closeStop(m, txn);
    }
    const plan = planNextAttempt({
      attemptsMade: attempt.retryNumber,
      startedAt: txn.submittedTs,
      now,
      lastDecline: declined
        ? { responseCode: result.responseCode, merchantAdviceCode: result.merchantAdviceCode }
        : { responseCode: '', technical: true },
      network: txn.cardNetwork,
      amountMinor: BigInt(txn.amountMinor),
      cardHistory: await this.cardHistory(m, txn.cardHmac, null),
      timeScale: this.config.retryTimeScale,
    });
    if (plan.kind === 'retry') {
      Object.assign(txn, {
        status: TransactionStatus.InRetry,
        nextAttemptAt: plan.at,
        authCodeDescription: attempt.authCodeDescription,
        statusChangedAt: txn.status === TransactionStatus.InRetry ? txn.statusChangedAt : now,
      });
      await m.save(txn);
      return [];
    }
    return this.cancel(m, txn, plan.reason, attempt.authCodeDescription);
  }

  /** Schedule exhausted or retry forbidden: Cancelled, and a `retry failed` push. */
  private async cancel(
    m: EntityManager,
    txn: TransactionEntity,
    reason: string,
    description: string | null,
  ): Promise<string[]> {
    const now = new Date();
    Object.assign(txn, {
      status: TransactionStatus.Cancelled,
      nextAttemptAt: null,
      statusChangedAt: now,
      authCodeDescription: description ?? AuthCodeDescription.Hard,
    });
    await m.save(txn);
    this.logger.log({ reason }, 'recovery ended without capture');
    const refunds = await m.getRepository(RefundEntity).find({ where: { transactionId: txn.id } });
    return announce(m, [
      {
        merchantId: txn.merchantId,
        eventName: EventName.RetryFailed,
        payloadId: txn.vid,
        merchantTransactionId: txn.merchantTxnId,
        transactionRowId: txn.id,
        content: transactionView(txn, refunds),
        occurredAt: now,
      },
    ]);
  }

  /** An attempt that was not made leaves no trace (and frees its retry number). */
  private async dropAttempt(m: EntityManager, attempt: AttemptEntity, txn: TransactionEntity): Promise<void> {
    await m.query(`DELETE FROM attempts WHERE id = $1`, [attempt.id]);
    txn.attemptCount -= 1;
    await m.query(`UPDATE transactions SET attempt_count = $2 WHERE id = $1`, [txn.id, txn.attemptCount]);
  }

  /** Every finished attempt on the card, across the service (the network rules count per card). */
  private async cardHistory(
    m: EntityManager,
    cardHmac: string | null,
    excludeId: string | null,
  ): Promise<CardAttempt[]> {
    if (!cardHmac) return [];
    const rows: {
      processed_at: Date;
      amount_minor: string;
      state: string;
      response_code: string | null;
      merchant_advice_code: string | null;
    }[] = await m.query(
      `SELECT processed_at, amount_minor, state, response_code, merchant_advice_code FROM attempts
          WHERE card_hmac = $1 AND processed_at IS NOT NULL AND id IS DISTINCT FROM $2
            AND processed_at > now() - interval '31 days'`,
      [cardHmac, excludeId],
    );
    return rows.map((r) => ({
      at: new Date(r.processed_at),
      amountMinor: BigInt(r.amount_minor),
      outcome: r.state === 'captured' ? 'approved' : r.state === 'declined' ? 'declined' : 'error',
      responseCode: r.response_code,
      merchantAdviceCode: r.merchant_advice_code,
    }));
  }

  private async publish(ids: string[]): Promise<void> {
    await this.relay.publish(ids).catch((err: unknown) => {
      this.logger.warn({ err: (err as Error).message }, 'outbox publish deferred to the sweeper');
    });
  }
}
