import type { AppName } from '@retain/config';
import { QUEUES, QUEUE_NAMES, QueueName, queuesConsumedBy } from '@retain/queues';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** The job states `retain_queue_depth` reports. */
export const QUEUE_DEPTH_STATES = ['waiting', 'active', 'delayed', 'failed'] as const;
export type QueueDepthState = (typeof QUEUE_DEPTH_STATES)[number];

/**
 * The queues whose depth each app reports: the ones it consumes (from the queue record), and for
 * intake-api the queue it feeds (so the API's /metrics shows the review backlog). Aggregate with
 * max by (queue, state).
 */
export const QUEUES_BY_APP: Record<AppName, QueueName[]> = {
  'intake-api': [QueueName.SubmissionReview],
  'submission-validator': queuesConsumedBy('submission-validator'),
  'retry-worker': queuesConsumedBy('retry-worker'),
  'refund-batcher': queuesConsumedBy('refund-batcher'),
  'webhook-dispatcher': queuesConsumedBy('webhook-dispatcher'),
  cli: [],
};

/** Reads the open failures (failed for good, not redriven) per queue, from Postgres. */
export type FailedJobsReader = () => Promise<Map<QueueName, number>>;

/** Reads one value of an unlabelled gauge from Postgres (a count, an age in seconds). */
export type ValueReader = () => Promise<number>;

/** A pg pool's counts (pg-pool: totalCount, idleCount, waitingCount, options.max). */
export interface DbPoolStats {
  total: number;
  idle: number;
  waiting: number;
  max: number;
}

/** `p`, or a rejection once `ms` have passed without an answer (readiness checks, scrape reads). */
export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what} did not answer in ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(t);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}

/** How long a scrape waits for Redis before it answers without queue depths. */
export const QUEUE_DEPTH_TIMEOUT_MS = 1000;

/** Reads the job counts of one queue (BullMQ `Queue.getJobCounts`). */
export type JobCountsReader = (queue: QueueName, states: readonly QueueDepthState[]) => Promise<Record<string, number>>;

/**
 * The service's Prometheus metrics, defined once. Labels never carry card data, keys or secrets:
 * only app, queue, outcome, status class and route patterns.
 */
export class RetainMetrics {
  readonly registry = new Registry();
  readonly httpDuration = new Histogram({
    name: 'retain_http_request_duration_seconds',
    help: 'HTTP request duration by method, route pattern and status code',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });
  private queueDepthSource: { queues: QueueName[]; read: JobCountsReader; timeoutMs: number } | null = null;
  readonly queueDepth = new Gauge({
    name: 'retain_queue_depth',
    help: 'Jobs per queue and state (waiting, active, delayed, failed), read from Redis on each scrape',
    labelNames: ['queue', 'state'],
    registers: [this.registry],
    collect: () => (this.queueDepthRead = this.collectQueueDepth()),
  });
  /** The read of the current scrape, so the error counter reports in the same scrape. */
  private queueDepthRead: Promise<void> = Promise.resolve();
  readonly queueDepthErrors = new Counter({
    name: 'retain_queue_depth_errors_total',
    help: 'Scrapes that answered without queue depths (Redis slow or failing)',
    registers: [this.registry],
    collect: () => this.queueDepthRead,
  });
  readonly jobDuration = new Histogram({
    name: 'retain_job_duration_seconds',
    help: 'Job handler duration by queue and result',
    labelNames: ['queue', 'result'],
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30],
    registers: [this.registry],
  });
  readonly jobFailures = new Counter({
    name: 'retain_job_failures_total',
    help: 'Job handler failures by queue',
    labelNames: ['queue'],
    registers: [this.registry],
  });
  readonly jobsFailed = new Counter({
    name: 'retain_jobs_failed_total',
    help: 'Jobs that failed for good (out of attempts or unrecoverable), recorded in failed_jobs, by queue',
    labelNames: ['queue'],
    registers: [this.registry],
  });
  private failedJobsSource: { read: FailedJobsReader; timeoutMs: number } | null = null;
  readonly failedJobs = new Gauge({
    name: 'retain_failed_jobs',
    help: 'Jobs that failed for good and were not redriven yet, by queue (read from Postgres on each scrape)',
    labelNames: ['queue'],
    registers: [this.registry],
    collect: () => this.collectFailedJobs(),
  });
  readonly attempts = new Counter({
    name: 'retain_retry_attempts_total',
    help: 'Retry attempts by outcome (captured, declined, error)',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly recoveredMinor = new Counter({
    name: 'retain_recovered_amount_minor_total',
    help: 'Recovered amount in minor units, by currency',
    labelNames: ['currency'],
    registers: [this.registry],
  });
  /**
   * Postgres counts the money alerts read, each taken at every scrape by the app that tracks it: set only
   * by the retry tick or the daily refund batch, a pod the tick skipped, or started since the batch, showed
   * an old count (a critical alert resolved while the problem stayed, or fired a day after it ended).
   */
  private readonly valueSources = new Map<Gauge, { read: ValueReader; timeoutMs: number }>();
  /** The reconciliation's operator alert: attempts whose outcome is still unknown past RECONCILE_ALERT_AFTER. */
  readonly unreconciledAttempts: Gauge = new Gauge({
    name: 'retain_unreconciled_attempts',
    help: 'Attempts whose charge outcome is still unknown after RECONCILE_ALERT_AFTER (alert when > 0)',
    registers: [this.registry],
    collect: () => this.collectValue(this.unreconciledAttempts),
  });
  /** The refund batcher's operator alert: refunds awaiting their notification past REFUND_NOTIFICATION_ALERT_AFTER. */
  readonly refundsAwaitingNotification: Gauge = new Gauge({
    name: 'retain_refunds_awaiting_notification',
    help: 'Refunds the processor accepted without a result whose notification has not come after REFUND_NOTIFICATION_ALERT_AFTER (alert when > 0)',
    registers: [this.registry],
    collect: () => this.collectValue(this.refundsAwaitingNotification),
  });
  /** Captures found after the transaction ended without money (refunded automatically). */
  readonly lateCaptures = new Counter({
    name: 'retain_late_captures_total',
    help: 'Captures reported after a Cancelled or Stopped result, refunded automatically',
    registers: [this.registry],
  });
  /** Adyen CAPTURE_FAILED notifications: a charge recorded captured whose money was not collected. */
  readonly captureFailures = new Counter({
    name: 'retain_capture_failures_total',
    help: 'Charges recorded captured whose money was not collected: Adyen CAPTURE_FAILED, or an AUTHORISATION success=false for them (alert on any increase)',
    registers: [this.registry],
  });
  /** Rows the retention sweep deleted (outbox, webhook_messages, sandbox_ledger) or erased (card_data...). */
  readonly retained = new Counter({
    name: 'retain_retention_rows_total',
    help: 'Rows removed by the retention sweep, by kind (deleted records, or card data erased)',
    labelNames: ['kind'],
    registers: [this.registry],
  });
  readonly webhookDeliveries = new Counter({
    name: 'retain_webhook_deliveries_total',
    help: 'Webhook delivery attempts by result (2xx, 4xx, 5xx, 410, error, refused)',
    labelNames: ['result'],
    registers: [this.registry],
  });
  /** Push messages out of attempts (kept dead for a replay): counted by the dispatcher that gave up. */
  readonly webhooksDead = new Counter({
    name: 'retain_webhook_messages_dead_total',
    help: 'Push messages that ran out of delivery attempts and were kept dead for a replay (alert on any increase)',
    registers: [this.registry],
  });
  /** The outbox's own failure: rows committed but not in Redis (relay and sweeper failing), read at each scrape. */
  readonly outboxOldestUnpublished: Gauge = new Gauge({
    name: 'retain_outbox_oldest_unpublished_seconds',
    help: 'Age of the oldest open outbox row not enqueued yet (0 when none); the workers read it from Postgres on each scrape',
    registers: [this.registry],
    collect: () => this.collectValue(this.outboxOldestUnpublished),
  });
  /** Refunds the batch has not got an answer for (never sent, or deferred), read at each scrape. */
  readonly refundsOldestUnsent: Gauge = new Gauge({
    name: 'retain_refunds_oldest_unsent_seconds',
    help: 'Age of the oldest refund still Processing without the processor having it (0 when none); the refund batcher reads it from Postgres on each scrape',
    registers: [this.registry],
    collect: () => this.collectValue(this.refundsOldestUnsent),
  });
  /** Refunds the processor accepted and has not settled (Stripe `pending`, Adyen awaiting its notification). */
  readonly refundsOldestHeld: Gauge = new Gauge({
    name: 'retain_refunds_oldest_held_seconds',
    help: 'Age of the oldest refund the processor accepted without a final answer, still Processing (0 when none); the refund batcher reads it from Postgres on each scrape',
    registers: [this.registry],
    collect: () => this.collectValue(this.refundsOldestHeld),
  });
  private dbPoolSource: (() => DbPoolStats | null) | null = null;
  /** The app's Postgres pool: connections in use, idle, and callers waiting for one (exhaustion). */
  readonly dbPool = new Gauge({
    name: 'retain_db_pool_connections',
    help: 'Postgres pool of this process: connections in_use and idle, callers waiting for one, and the max',
    labelNames: ['state'],
    registers: [this.registry],
    collect: () => {
      const stats = this.dbPoolSource?.();
      if (!stats) return;
      this.dbPool.set({ state: 'in_use' }, stats.total - stats.idle);
      this.dbPool.set({ state: 'idle' }, stats.idle);
      this.dbPool.set({ state: 'waiting' }, stats.waiting);
      this.dbPool.set({ state: 'max' }, stats.max);
    },
  });
  readonly webhookLatency = new Histogram({
    name: 'retain_webhook_delivery_duration_seconds',
    help: 'Webhook delivery latency',
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly submissions = new Counter({
    name: 'retain_submitted_transactions_total',
    help: 'Submitted transactions by result (accepted, rejected)',
    labelNames: ['result'],
    registers: [this.registry],
  });

  constructor(app: string) {
    this.registry.setDefaultLabels({ app });
    collectDefaultMetrics({ register: this.registry });
  }

  /** Reports the depth of these queues on every scrape, waiting at most timeoutMs for Redis. */
  trackQueueDepth(queues: QueueName[], read: JobCountsReader, timeoutMs = QUEUE_DEPTH_TIMEOUT_MS): void {
    this.queueDepthSource = { queues, read, timeoutMs };
  }

  /** Reports the open failed jobs per queue on every scrape, waiting at most timeoutMs for Postgres. */
  trackFailedJobs(read: FailedJobsReader, timeoutMs = QUEUE_DEPTH_TIMEOUT_MS): void {
    this.failedJobsSource = { read, timeoutMs };
  }

  /** Reports the Postgres pool on every scrape (read from the pool itself: no query). */
  trackDbPool(read: () => DbPoolStats | null): void {
    this.dbPoolSource = read;
  }

  /** Sets an unlabelled gauge from Postgres on every scrape, waiting at most timeoutMs. */
  trackValue(gauge: Gauge, read: ValueReader, timeoutMs = QUEUE_DEPTH_TIMEOUT_MS): void {
    this.valueSources.set(gauge, { read, timeoutMs });
  }

  /**
   * Postgres slow or down: the last value stays (a money alert must not resolve because of an outage;
   * the outage has its own signals).
   */
  private async collectValue(gauge: Gauge): Promise<void> {
    const source = this.valueSources.get(gauge);
    if (!source) return;
    try {
      gauge.set(await withTimeout(source.read(), source.timeoutMs, 'postgres'));
    } catch {
      // kept: see above
    }
  }

  /** Every queue that records failures gets a value (0 when none), so an alert sees the series. */
  private async collectFailedJobs(): Promise<void> {
    const source = this.failedJobsSource;
    if (!source) return;
    try {
      const counts = await withTimeout(source.read(), source.timeoutMs, 'the failed jobs read');
      this.failedJobs.reset();
      for (const queue of QUEUE_NAMES.filter((q) => QUEUES[q].recordFailures))
        this.failedJobs.set({ queue }, counts.get(queue) ?? 0);
    } catch {
      // Postgres slow or down: no stale value (the gauge is absent for this scrape).
      this.failedJobs.reset();
    }
  }

  /**
   * prom-client calls this before each scrape. A slow or failing Redis must not hang /metrics: after
   * the timeout the scrape goes on without queue depths (no stale values) and counts the error.
   */
  private async collectQueueDepth(): Promise<void> {
    const source = this.queueDepthSource;
    if (!source || source.queues.length === 0) return;
    try {
      const counts = await withTimeout(
        Promise.all(source.queues.map(async (q) => [q, await source.read(q, QUEUE_DEPTH_STATES)] as const)),
        source.timeoutMs,
        'the queue depth read',
      );
      this.queueDepth.reset();
      for (const [queue, c] of counts)
        for (const state of QUEUE_DEPTH_STATES) this.queueDepth.set({ queue, state }, c[state] ?? 0);
    } catch {
      this.queueDepth.reset();
      this.queueDepthErrors.inc();
    }
  }
}
