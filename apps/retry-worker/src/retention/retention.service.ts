import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import { REFUND_IDEMPOTENCY_KEY_HOURS, RetentionRepository, type RetentionKind } from '@retain/db';
import { RETAIN_CONFIG, RetainMetrics } from '@retain/platform';
import { DataSource } from 'typeorm';
import { LATE_WATCH_MS } from '../reconcile/reconcile.service';

/** Rows per statement: short enough never to hold locks the hot path waits for. */
const BATCH = 1000;
/** How long a refund call's Idempotency-Key answers its retries. */
const IDEMPOTENCY_MS = REFUND_IDEMPOTENCY_KEY_HOURS * 3_600_000;

/**
 * Retention (issue 14): RETENTION_FIRST_SWEEP_DELAY (jittered) after start, then every RETENTION_INTERVAL, deletes what nothing reads any more (completed
 * outbox rows, delivered (or gone, endpoint-less) push messages with their delivery logs, old sandbox ledger
 * operations) and erases the card data of transactions whose recovery ended more than the refund
 * window ago (CARD_DATA_ERASE_AFTER), then of payment methods no recovery can fall back to; also
 * refund idempotency keys, processor notifications acted on, and expired portal sessions.
 * Batched: each batch is its own statement over an index, SKIP LOCKED; a kind repeats while a
 * whole batch was done. Replicas may sweep at once: they take different rows.
 */
@Injectable()
export class RetentionService implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(RetentionService.name);
  private timer: NodeJS.Timeout | undefined;
  private firstTimer: NodeJS.Timeout | undefined;
  private running = false;

  constructor(
    private readonly db: DataSource,
    private readonly metrics: RetainMetrics,
    @Inject(RETAIN_CONFIG) private readonly config: RetainConfig,
  ) {}

  onModuleInit(): void {
    const r = this.config.retention;
    // A first sweep soon after start, not after a whole interval: a pod restarted more often than
    // RETENTION_INTERVAL would never sweep. Jittered, so replicas started together do not sweep at
    // once; never awaited (start-up does not wait for it).
    this.firstTimer = setTimeout(() => void this.sweep(), Math.round(r.firstSweepDelayMs * (1 + Math.random())));
    this.firstTimer.unref();
    this.timer = setInterval(() => void this.sweep(), r.intervalMs);
    this.timer.unref();
  }

  onApplicationShutdown(): void {
    if (this.firstTimer) clearTimeout(this.firstTimer);
    if (this.timer) clearInterval(this.timer);
  }

  /** One sweep of every kind; returns the rows removed or erased per kind. */
  async sweep(now = new Date()): Promise<Record<RetentionKind, number>> {
    const done: Record<RetentionKind, number> = {
      outbox: 0,
      webhook_messages: 0,
      sandbox_ledger: 0,
      card_data: 0,
      payment_method_card_data: 0,
      refund_idempotency_keys: 0,
      processor_notifications: 0,
      portal_sessions: 0,
    };
    if (this.running) return done;
    this.running = true;
    const r = this.config.retention;
    const before = (ms: number): Date => new Date(now.getTime() - ms);
    // Attempts settled as not charged are watched for a late capture this long (the reconciliation's window).
    const watchedSince = before(LATE_WATCH_MS / this.config.retryTimeScale);
    const kinds: [RetentionKind, (batch: number) => Promise<number>][] = [
      ['outbox', (n) => RetentionRepository.outbox(this.db, before(r.outboxMs), n)],
      ['webhook_messages', (n) => RetentionRepository.webhookMessages(this.db, before(r.webhooksMs), n)],
      ['sandbox_ledger', (n) => RetentionRepository.sandboxLedger(this.db, before(r.sandboxLedgerMs), n, watchedSince)],
      ['card_data', (n) => RetentionRepository.transactionCardData(this.db, before(r.cardDataMs), n, watchedSince)],
      // After the transactions: an account's payment methods wait until its transactions are ended.
      ['payment_method_card_data', (n) => RetentionRepository.paymentMethodCardData(this.db, before(r.cardDataMs), n)],
      // Stripe's window: a retry of a refund call within 24 h gets the first answer.
      ['refund_idempotency_keys', (n) => RetentionRepository.refundIdempotencyKeys(this.db, before(IDEMPOTENCY_MS), n)],
      // Kept as long as the outbox rows that carried them to the worker.
      ['processor_notifications', (n) => RetentionRepository.processorNotifications(this.db, before(r.outboxMs), n)],
      // Expired (12 h, 30 min idle) by the database clock, as the session's own check: not by `now`.
      ['portal_sessions', (n) => RetentionRepository.portalSessions(this.db, n)],
    ];
    try {
      // Each kind on its own: one that fails (logged, retried next interval) never stops the others,
      // card-data erasure included.
      for (const [kind, batch] of kinds) {
        try {
          for (;;) {
            const n = await batch(BATCH);
            done[kind] += n;
            if (n > 0) this.metrics.retained.inc({ kind }, n);
            if (n < BATCH) break;
          }
        } catch (err) {
          this.logger.warn(
            { kind, err: (err as Error).message },
            'retention sweep of a kind failed; retried next interval',
          );
        }
      }
      if (Object.values(done).some((n) => n > 0)) this.logger.log({ ...done }, 'retention sweep');
    } finally {
      this.running = false;
    }
    return done;
  }
}
