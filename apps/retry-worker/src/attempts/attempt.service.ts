import { Inject, Injectable, Logger } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import { AttemptEntity, TransactionEntity, attemptView } from '@retain/db';
import {
  AuthCodeDescription,
  EventName,
  TransactionStatus,
  cardDataVersion,
  checkNetworkLimits,
  classifyDecline,
  open,
  planNextAttempt,
  type CardAttempt,
} from '@retain/domain';
import { RETAIN_CONFIG, RetainMetrics, announceTransaction, closeStop, stopToRefund } from '@retain/platform';
import {
  PgSandboxLedger,
  createProcessor,
  type ChargeResult,
  type PaymentInstrument,
  type PaymentProcessor,
} from '@retain/processor';
import { OutboxRelay, announce } from '@retain/queues';
import { DataSource, type EntityManager, type EntityTarget } from 'typeorm';

interface ErroredAttempt {
  id: string;
  vid: string;
}

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
    // The same read brings the transaction's attempts that ended in a processor error (lateCapture).
    const [row]: { vid: string; state: string; prepared_at: Date | null; errored: ErroredAttempt[] }[] =
      await this.db.query(
        `SELECT p.vid, p.state, p.prepared_at,
                COALESCE((SELECT json_agg(json_build_object('id', e.id, 'vid', e.vid) ORDER BY e.retry_number)
                            FROM attempts e WHERE e.transaction_id = p.transaction_id AND e.state = 'error'),
                         '[]'::json) AS errored
           FROM attempts p WHERE p.id = $1`,
        [attemptId],
      );
    if (!row || row.state !== 'pending') return 'nothing to do';
    // A crashed or stalled earlier run may already have charged this attempt's key. Only an attempt
    // marked in flight (prepared) can have been: the charge is made after that mark commits.
    const existing = row.prepared_at ? await this.processor.lookupCharge(row.vid) : null;
    const alreadyCharged = existing !== null;
    if (!alreadyCharged && !row.prepared_at && row.errored.length > 0) {
      const late = await this.lateCapture(attemptId, row.errored);
      if (late) return late;
    }
    const prepared = await this.db.transaction((m) => this.prepare(m, attemptId, alreadyCharged));
    if (prepared.kind === 'done') {
      await this.publish(prepared.outbox);
      return 'nothing to do';
    }
    const { attempt, txn, instrument } = prepared;
    // The charge is idempotent by key: a duplicate run racing this one gets the same result.
    let result =
      existing ??
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
    if (result.outcome === 'error') {
      // A timeout or 5xx says nothing about the charge: it may have gone through. Ask the processor
      // by the same idempotency key before recording "not charged" (the next attempt gets a new
      // key, so an unnoticed capture here would charge the card twice). A failing lookup throws:
      // the job is retried and the attempt stays in flight until its outcome is known.
      const found = await this.processor.lookupCharge(attempt.vid);
      if (found && found.outcome !== 'error') result = found;
    }
    const recorded = result;
    const outbox = await this.db.transaction((m) => this.record(m, attemptId, recorded));
    await this.publish(outbox);
    return result.outcome;
  }

  /**
   * Earlier attempts of this transaction recorded as processor errors may have been charged after
   * all (the processor finished after our timeout). Before a new idempotency key is charged, look
   * them up: if one captured, it is recorded as the capture and this attempt is never made.
   */
  private async lateCapture(attemptId: string, errored: ErroredAttempt[]): Promise<string | null> {
    for (const e of errored) {
      const found = await this.processor.lookupCharge(e.vid);
      if (found?.outcome !== 'approved') continue;
      const outbox = await this.db.transaction(async (m) => {
        const locked = await this.lock(m, attemptId);
        if (!locked || locked.attempt.state !== 'pending' || locked.attempt.preparedAt) return null;
        await this.dropAttempt(m, locked.attempt, locked.txn);
        const [, reopened]: [unknown[], number] = await m.query(
          `UPDATE attempts SET state = 'pending' WHERE id = $1 AND state = 'error'`,
          [e.id],
        );
        if (reopened === 0) return null;
        this.logger.warn({ attempt: e.vid }, 'a processor error was a capture after all: recorded, no new attempt');
        return this.record(m, e.id, found);
      });
      if (outbox === null) return null;
      await this.publish(outbox);
      return 'approved';
    }
    return null;
  }

  /** Locks the attempt and its transaction (one statement: both rows FOR UPDATE). */
  private async lock(
    m: EntityManager,
    attemptId: string,
  ): Promise<{ attempt: AttemptEntity; txn: TransactionEntity } | null> {
    const attempt: (AttemptEntity & { lockedTxn?: TransactionEntity }) | null = await m
      .getRepository(AttemptEntity)
      .createQueryBuilder('a')
      .innerJoinAndMapOne('a.lockedTxn', TransactionEntity, 't', 't.id = a.transaction_id')
      .where('a.id = :attemptId', { attemptId })
      .setLock('pessimistic_write')
      .getOne();
    const txn = attempt?.lockedTxn;
    if (!attempt || !txn) return null;
    delete attempt.lockedTxn;
    return { attempt, txn };
  }

  private async prepare(m: EntityManager, attemptId: string, alreadyCharged: boolean): Promise<Prepared> {
    const locked = await this.lock(m, attemptId);
    if (!locked || locked.attempt.state !== 'pending') return { kind: 'done', outbox: [] };
    const { attempt, txn } = locked;
    const dataVersion = cardDataVersion(txn.expirationDate);
    // Already charged by an earlier run of this attempt (crash after the call): record it, skip the checks.
    if (alreadyCharged) {
      await this.markInFlight(m, attempt, dataVersion);
      return { kind: 'charge', attempt, txn, instrument: this.instrument(txn) };
    }

    if (txn.stopRequestedAt) {
      // A stop arrived before this attempt started: it never starts.
      await this.dropAttempt(m, attempt, txn);
      return { kind: 'done', outbox: await closeStop(m, txn) };
    }
    // One limit check at a time per card and merchant: the check and the in-flight mark below commit
    // together, so the next attempt on the card (any transaction, any worker) counts this one.
    if (txn.cardHmac) {
      await m.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [
        `retain:card:${txn.merchantId}:${txn.cardHmac}`,
      ]);
    }
    const history = await this.cardHistory(m, txn, attempt.id);
    const check = checkNetworkLimits(
      { network: txn.cardNetwork, cardDataVersion: dataVersion },
      history,
      new Date(),
      BigInt(attempt.amountMinor),
      { timeScale: this.config.retryTimeScale },
    );
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
    await this.markInFlight(m, attempt, dataVersion);
    return { kind: 'charge', attempt, txn, instrument: this.instrument(txn) };
  }

  /** The attempt goes to the processor: from now on it counts in the card's history until recorded. */
  private async markInFlight(m: EntityManager, attempt: AttemptEntity, dataVersion: string | null): Promise<void> {
    if (attempt.preparedAt) return;
    attempt.preparedAt = new Date();
    attempt.cardDataVersion = dataVersion;
    await m.query(`UPDATE attempts SET prepared_at = $2, card_data_version = $3, updated_at = now() WHERE id = $1`, [
      attempt.id,
      attempt.preparedAt,
      dataVersion,
    ]);
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
    this.metrics.attempts.inc({ outcome: result.outcome });
    if (result.outcome === 'approved') {
      await setFields(m, AttemptEntity, attempt, {
        processedAt: now,
        state: 'captured',
        status: TransactionStatus.Captured,
        responseCode: result.responseCode,
        authCodeDescription: null,
        processorTransactionId: result.processorTransactionId,
        message: result.message,
      });
      await setFields(m, TransactionEntity, txn, {
        status: TransactionStatus.Captured,
        capturedAmountMinor: attempt.amountMinor,
        processorTransactionId: result.processorTransactionId,
        nextAttemptAt: null,
        statusChangedAt: now,
        authCodeDescription: null,
      });
      this.metrics.recoveredMinor.inc({ currency: attempt.currency }, Number(attempt.amountMinor));
      // A stop arrived while this attempt was in flight and it captured: the stop refund becomes a
      // normal refund of the next batch, in this same database transaction (decisions §8).
      if (txn.stopRequestedAt) await stopToRefund(m, txn, now);
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
    await setFields(m, AttemptEntity, attempt, {
      processedAt: now,
      state: declined ? 'declined' : 'error',
      status: TransactionStatus.Failed,
      responseCode: declined ? result.responseCode : null,
      merchantAdviceCode: declined ? (result.merchantAdviceCode ?? null) : null,
      authCodeDescription: classification?.description ?? AuthCodeDescription.Soft,
      processorTransactionId: declined ? result.processorTransactionId : null,
      message: result.message,
    });
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
      cardHistory: await this.cardHistory(m, txn, null),
      cardDataVersion: cardDataVersion(txn.expirationDate),
      timeScale: this.config.retryTimeScale,
    });
    if (plan.kind === 'retry') {
      await setFields(m, TransactionEntity, txn, {
        status: TransactionStatus.InRetry,
        nextAttemptAt: plan.at,
        authCodeDescription: attempt.authCodeDescription,
        statusChangedAt: txn.status === TransactionStatus.InRetry ? txn.statusChangedAt : now,
      });
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
    await setFields(m, TransactionEntity, txn, {
      status: TransactionStatus.Cancelled,
      nextAttemptAt: null,
      statusChangedAt: now,
      authCodeDescription: description ?? AuthCodeDescription.Hard,
    });
    this.logger.log({ reason }, 'recovery ended without capture');
    return announceTransaction(m, txn, EventName.RetryFailed, now);
  }

  /** An attempt that was not made leaves no trace (and frees its retry number). */
  private async dropAttempt(m: EntityManager, attempt: AttemptEntity, txn: TransactionEntity): Promise<void> {
    await m.query(`DELETE FROM attempts WHERE id = $1`, [attempt.id]);
    txn.attemptCount -= 1;
    await m.query(`UPDATE transactions SET attempt_count = $2 WHERE id = $1`, [txn.id, txn.attemptCount]);
  }

  /**
   * The card's history for the network limits (network-rules.config.ts): attempts of THIS merchant
   * on the card that went to the processor, recorded or still in flight, in the last 31 days; plus
   * every blocking decline however old (card blocks do not lapse; they lift when the data changes).
   */
  private async cardHistory(
    m: EntityManager,
    txn: TransactionEntity,
    excludeId: string | null,
  ): Promise<CardAttempt[]> {
    if (!txn.cardHmac) return [];
    const rows: {
      at: Date;
      amount_minor: string;
      state: string;
      response_code: string | null;
      merchant_advice_code: string | null;
      card_data_version: string | null;
    }[] = await m.query(
      `SELECT COALESCE(processed_at, prepared_at) AS at, amount_minor, state, response_code, merchant_advice_code,
              card_data_version
         FROM attempts
        WHERE merchant_id = $1 AND card_hmac = $2 AND id IS DISTINCT FROM $3
          AND COALESCE(processed_at, prepared_at) IS NOT NULL
          AND (COALESCE(processed_at, prepared_at) > now() - interval '31 days'
               OR (state = 'declined' AND auth_code_description = 'Hard Failure'))`,
      [txn.merchantId, txn.cardHmac, excludeId],
    );
    return rows.map((r) => ({
      at: new Date(r.at),
      amountMinor: BigInt(r.amount_minor),
      outcome:
        r.state === 'captured'
          ? 'approved'
          : r.state === 'declined'
            ? 'declined'
            : r.state === 'pending'
              ? 'pending'
              : 'error',
      responseCode: r.response_code,
      merchantAdviceCode: r.merchant_advice_code,
      cardDataVersion: r.card_data_version,
    }));
  }

  private async publish(ids: string[]): Promise<void> {
    await this.relay.publish(ids).catch((err: unknown) => {
      this.logger.warn({ err: (err as Error).message }, 'outbox publish deferred to the sweeper');
    });
  }
}
