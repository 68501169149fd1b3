import { Inject, Injectable, Logger } from '@nestjs/common';
import { jobLockMs, type RetainConfig } from '@retain/config';
import { AttemptsRepository, type ReconcileRow } from '@retain/db';
import { RETAIN_CONFIG, RetainMetrics } from '@retain/platform';
import type { ChargeResult } from '@retain/processor';
import { QueueName, jobLifetimeMs } from '@retain/queues';
import { AttemptState, reconcileDecision, type LookupReading } from '@retain/recovery';
import { DataSource } from 'typeorm';
import { AttemptService, IDEMPOTENCY_WINDOW_MS } from '../attempts/attempt.service';

/** Attempts looked up per tick (of each kind); the next tick takes the rest. */
const BATCH = 100;
/** Longest wait between two lookups of one attempt. */
const MAX_LOOKUP_INTERVAL_MS = 5 * 60_000;
/**
 * How long an attempt settled as not charged is still watched for a late capture: the processor's
 * idempotency window (24 h at Stripe), divided by RETRY_TIME_SCALE.
 */
export const LATE_WATCH_MS = IDEMPOTENCY_WINDOW_MS;

/**
 * Processor calls one run of an attempt may wait on, each up to PROCESSOR_TIMEOUT: the lookup of an
 * attempt prepared by an earlier run (Stripe: a search, then a replay), its charge, and the lookup
 * after a charge's timeout (a search and a replay again).
 */
const PROCESSOR_CALLS_PER_RUN = 5;

/**
 * How long after its in-flight mark (a never-prepared one: after it was made) an attempt may still be
 * pending while its retry.attempt job lives: every try of the job (its processor calls, and two job
 * locks when its worker dies) and the backoff between tries (jobLifetimeMs). With the defaults
 * (JOB_LOCK_MS 30 s, PROCESSOR_TIMEOUT 30 s, 10 tries, backoff 2 s doubling): 10 x 210 s + 1022 s,
 * about 52 min. Past it the sweep takes the attempt over. Real time (not divided by RETRY_TIME_SCALE):
 * the queue's backoff is.
 */
export function leftPendingAfterMs(lockMs: number, processorTimeoutMs: number): number {
  return jobLifetimeMs(QueueName.RetryAttempt, lockMs, PROCESSOR_CALLS_PER_RUN * processorTimeoutMs);
}

/**
 * The reconciliation, on every retry tick: looks up by idempotency key the attempts whose outcome
 * is unknown until they resolve (captured or declined: recorded like a charge's answer; nothing
 * found after RECONCILE_NOT_FOUND_AFTER: not charged, the schedule goes on), and raises the
 * operator alert (metric `retain_unreconciled_attempts` and an error log, once per attempt) for
 * those still unresolved after RECONCILE_ALERT_AFTER: they stay unknown, never silently final.
 * It also watches attempts settled as not charged of Cancelled/Stopped transactions for a late
 * capture, which is recorded and refunded at once.
 */
@Injectable()
export class ReconcileService {
  private readonly logger = new Logger(ReconcileService.name);
  private readonly leftPendingAfterMs: number;

  constructor(
    private readonly db: DataSource,
    private readonly attempts: AttemptService,
    private readonly metrics: RetainMetrics,
    @Inject(RETAIN_CONFIG) private readonly config: RetainConfig,
  ) {
    this.leftPendingAfterMs = leftPendingAfterMs(jobLockMs(), config.processorTimeoutMs);
  }

  /**
   * One pass; returns how many attempts were resolved or found captured late. It takes no new lookup
   * after its budget (a tick, at least a second): the tick schedules after it, and lookups one after
   * another, each up to PROCESSOR_TIMEOUT, would let one merchant's processor that hangs hold every
   * merchant's due attempts. The rest keep their turn (lookup_after) for the next pass.
   */
  async reconcile(): Promise<number> {
    const until = Date.now() + Math.max(this.config.tickMs, 1000);
    await this.sweepLeftPending();
    const rows = await AttemptsRepository.dueForLookup(this.db, BATCH, LATE_WATCH_MS / this.config.retryTimeScale);
    let settled = 0;
    for (const row of rows) {
      if (Date.now() > until) break;
      try {
        if (await this.reconcileOne(row)) settled++;
      } catch (err) {
        this.logger.warn({ attempt: row.vid, err: (err as Error).message }, 'reconciliation of an attempt failed');
      }
    }
    this.metrics.unreconciledAttempts.set(
      await AttemptsRepository.countUnknownOlderThan(
        this.db,
        this.config.reconcileAlertMs / this.config.retryTimeScale,
      ),
    );
    return settled;
  }

  /**
   * Attempts left pending by a job that is over (it failed for good: a long Postgres outage, an error
   * that repeats; or it vanished), past leftPendingAfterMs: nothing else would ever move them, and a
   * pending attempt holds its customer's other charges and its transaction's stop. A prepared one may
   * have charged: it becomes unknown, and this pass looks it up (by key only after a stop). A
   * never-prepared one whose job failed for good is dropped and its transaction scheduled again.
   */
  private async sweepLeftPending(): Promise<void> {
    const take = async (ids: string[], act: (id: string) => Promise<boolean>, what: string) => {
      for (const id of ids) {
        try {
          if (await act(id)) this.logger.warn({ attempt: id }, what);
        } catch (err) {
          this.logger.warn({ attempt: id, err: (err as Error).message }, 'sweep of an attempt left pending failed');
        }
      }
    };
    await take(
      await AttemptsRepository.leftPendingPrepared(this.db, this.leftPendingAfterMs, BATCH),
      (id) => this.attempts.markLeftPending(id),
      'an attempt its job left pending after its in-flight mark: unknown, looked up by the reconciliation',
    );
    await take(
      await AttemptsRepository.leftPendingUnprepared(this.db, this.leftPendingAfterMs, BATCH),
      (id) => this.attempts.dropLeftPending(id),
      'a never-prepared attempt whose job failed for good: dropped, its transaction scheduled again',
    );
  }

  private async reconcileOne(row: ReconcileRow): Promise<boolean> {
    let found: ChargeResult | null = null;
    let lookupFailed = false;
    try {
      // The processor of the attempt's transaction (its merchant's account), asked with the
      // attempt's own ChargeRequest (AttemptService.lookUp: by key only after a stop, the stop read
      // again right before a replay). An attempt already settled as not charged (state error) is
      // looked up by key only: replaying it would make its charge now.
      const charge = await this.attempts.chargeOf(row.id);
      if (!charge) return false;
      found =
        row.state === AttemptState.Error
          ? await charge.processor.lookupCharge(row.vid)
          : await this.attempts.lookUp(charge);
    } catch (err) {
      lookupFailed = true;
      this.logger.warn({ attempt: row.vid, err: (err as Error).message }, 'processor lookup failed');
    }
    const now = Date.now();
    if (row.state === AttemptState.Error) return this.watchLate(row, found, now);

    const ageMs = now - new Date(row.prepared_at ?? now).getTime();
    // An error the lookup brought back is no answer (the lookup or its replay met a timeout, a 5xx):
    // only the processor's settled record of an error says nothing was charged.
    const reading: LookupReading | 'lookup-failed' =
      lookupFailed || (found?.outcome === 'error' && !found.settled)
        ? 'lookup-failed'
        : found?.outcome === 'approved'
          ? 'captured'
          : found?.outcome === 'declined'
            ? 'declined'
            : 'no-decision';
    const scale = this.config.retryTimeScale;
    // Nothing found under the key: counted from the latest request sent under it (a replay may have
    // charged just now, and Stripe's search shows a charge about a minute late), not the in-flight mark.
    const lastSent = Math.max(new Date(row.prepared_at ?? now).getTime(), new Date(row.last_sent_at ?? 0).getTime());
    const decision = reconcileDecision(
      reading,
      ageMs,
      {
        notFoundAfterMs: this.config.reconcileNotFoundMs / scale,
        alertAfterMs: this.config.reconcileAlertMs / scale,
      },
      found === null ? now - lastSent : ageMs,
    );
    if (decision === 'keep' || decision === 'alert') {
      const retryAfterMs = found?.outcome === 'error' ? (found.retryAfterMs ?? 0) : 0;
      const wait = Math.max(this.interval(ageMs), retryAfterMs);
      await AttemptsRepository.setLookupAfter(this.db, row.id, new Date(now + wait));
      if (decision === 'alert' && (await AttemptsRepository.markAlerted(this.db, row.id))) {
        this.logger.error(
          { attempt: row.vid, merchant: row.merchant_id, unknownForMs: ageMs },
          'attempt outcome still unknown after RECONCILE_ALERT_AFTER: its transaction stays unresolved, check it with the processor',
        );
      }
      return false;
    }
    const outcome =
      decision === 'resolvedNotCharged'
        ? { outcome: 'not-charged' as const, message: 'No charge found at the processor' }
        : found!;
    const recorded = await this.db.transaction((m) => this.attempts.record(m, row.id, outcome, AttemptState.Unknown));
    await this.attempts.publish(recorded.outbox);
    if (recorded.lateRefund) await this.attempts.sendLateRefund(recorded.lateRefund);
    this.logger.log({ attempt: row.vid, resolution: decision }, 'unknown attempt resolved');
    return true;
  }

  /** An attempt settled as not charged, of a transaction that ended: a capture now is refunded. */
  private async watchLate(row: ReconcileRow, found: ChargeResult | null, now: number): Promise<boolean> {
    if (found?.outcome === 'approved') {
      const recorded = await this.db.transaction((m) => this.attempts.record(m, row.id, found, AttemptState.Error));
      await this.attempts.publish(recorded.outbox);
      if (recorded.lateRefund) await this.attempts.sendLateRefund(recorded.lateRefund);
      return recorded.outbox.length > 0;
    }
    const sinceMs = now - new Date(row.processed_at ?? now).getTime();
    await AttemptsRepository.setLookupAfter(this.db, row.id, new Date(now + this.interval(sinceMs)));
    return false;
  }

  /** Lookups get sparser as an attempt ages: at least a tick apart, at most MAX_LOOKUP_INTERVAL_MS. */
  private interval(ageMs: number): number {
    return Math.min(Math.max(this.config.tickMs, ageMs / 4), MAX_LOOKUP_INTERVAL_MS);
  }
}
