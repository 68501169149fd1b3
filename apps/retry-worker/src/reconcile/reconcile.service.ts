import { Inject, Injectable, Logger } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import { AttemptsRepository, type ReconcileRow } from '@retain/db';
import { RETAIN_CONFIG, RetainMetrics } from '@retain/platform';
import type { ChargeResult } from '@retain/processor';
import { AttemptState, reconcileDecision, type LookupReading } from '@retain/recovery';
import { DataSource } from 'typeorm';
import { AttemptService } from '../attempts/attempt.service';

/** Attempts looked up per tick (of each kind); the next tick takes the rest. */
const BATCH = 100;
/** Longest wait between two lookups of one attempt. */
const MAX_LOOKUP_INTERVAL_MS = 5 * 60_000;
/**
 * How long an attempt settled as not charged is still watched for a late capture: the processor's
 * idempotency window (24 h at Stripe), divided by RETRY_TIME_SCALE.
 */
export const LATE_WATCH_MS = 24 * 3_600_000;

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

  constructor(
    private readonly db: DataSource,
    private readonly attempts: AttemptService,
    private readonly metrics: RetainMetrics,
    @Inject(RETAIN_CONFIG) private readonly config: RetainConfig,
  ) {}

  /** One pass; returns how many attempts were resolved or found captured late. */
  async reconcile(): Promise<number> {
    const rows = await AttemptsRepository.dueForLookup(this.db, BATCH, LATE_WATCH_MS / this.config.retryTimeScale);
    let settled = 0;
    for (const row of rows) {
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
    const decision = reconcileDecision(reading, ageMs, {
      notFoundAfterMs: this.config.reconcileNotFoundMs / scale,
      alertAfterMs: this.config.reconcileAlertMs / scale,
    });
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
