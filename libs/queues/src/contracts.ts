import { UnrecoverableError, type DefaultJobOptions } from 'bullmq';

/** Frozen queue names: the one source of truth for every producer and consumer. */
export const QueueName = {
  SubmissionReview: 'submission.review',
  RetryAttempt: 'retry.attempt',
  RetryTick: 'retry.tick',
  WebhookDeliver: 'webhook.deliver',
  RefundBatch: 'refund.batch',
  ProcessorNotification: 'processor.notification',
} as const;
export type QueueName = (typeof QueueName)[keyof typeof QueueName];

/**
 * Each queue's job name and payload. Payloads carry ids and a version, never card data or secrets.
 * Adding a queue without an entry here (and in QUEUES) does not compile.
 */
export interface JobContracts {
  'submission.review': { name: 'review'; data: { v: 1; submissionId: string } };
  // v2: the attempts of one slice of a tick (ATTEMPTS_PER_JOB). v1 (one attempt) is still consumed:
  // jobs queued before an upgrade must not fail for good.
  'retry.attempt': { name: 'attempt'; data: { v: 2; attemptIds: string[] } | { v: 1; attemptId: string } };
  'retry.tick': { name: 'tick'; data: { v: 1 } };
  'webhook.deliver': { name: 'deliver'; data: { v: 1; messageId: string } };
  'refund.batch': { name: 'batch'; data: { v: 1; trigger: 'schedule' | 'operator' } };
  'processor.notification': { name: 'notification'; data: { v: 1; notificationId: string } };
}
export type JobName<Q extends QueueName> = JobContracts[Q]['name'];
export type JobData<Q extends QueueName> = JobContracts[Q]['data'];
/** The id fields of a queue's payloads, over all its versions. */
type IdField<Q extends QueueName> =
  JobData<Q> extends infer D ? (D extends unknown ? Exclude<keyof D, 'v'> : never) : never;

/**
 * Attempts per `retry.attempt` job: a tick's batch is sliced so that one job's Redis round trips,
 * outbox row and completion serve many attempts, while the slices still spread over every
 * retry-worker replica (a tick of 500 makes 20 jobs).
 */
export const ATTEMPTS_PER_JOB = 25;

/** The `retry.attempt` jobs of a tick's attempts: slices of ATTEMPTS_PER_JOB, in order. */
export function attemptJobs(attemptIds: readonly string[]): QueueJob[] {
  const jobs: QueueJob[] = [];
  for (let i = 0; i < attemptIds.length; i += ATTEMPTS_PER_JOB) {
    jobs.push({ queue: QueueName.RetryAttempt, data: { v: 2, attemptIds: attemptIds.slice(i, i + ATTEMPTS_PER_JOB) } });
  }
  return jobs;
}

/** Ids one payload field may list at most (a tick's slice is far below it). */
export const MAX_IDS_PER_FIELD = 1000;

/**
 * A job for some queue, its payload bound to that queue: `{ queue: 'retry.attempt', data: {v: 1,
 * submissionId} }` does not compile. Distributive, so an array may mix queues and each element is
 * still checked against its own queue.
 */
export type QueueJob = { [Q in QueueName]: { queue: Q; data: JobData<Q> } }[QueueName];

/** The apps that consume queues (each queue has exactly one). */
export type WorkerApp = 'submission-validator' | 'retry-worker' | 'refund-batcher' | 'webhook-dispatcher';

/** Environment variables that set a queue's worker concurrency. */
export type ConcurrencyVariable = 'RETRY_ATTEMPT_CONCURRENCY';

/** Everything about one queue, in one place. */
export interface QueueSettings<Q extends QueueName = QueueName> {
  /** The one job name of the queue. */
  jobName: JobName<Q>;
  /**
   * The payload versions consumers accept (any other is a permanent failure), each with the fields
   * that must hold ids: a non-empty string, or a list of 1 to MAX_IDS_PER_FIELD of them. The first
   * is the version producers write.
   */
  versions: readonly { v: JobData<Q>['v']; idFields: readonly IdField<Q>[] }[];
  /**
   * Job options of every producer (registerQueue, the outbox relay, the CLI). Retries here cover
   * crashes and transient errors; business retries (the recovery schedule, webhook backoff) live in
   * Postgres rows, not in Redis.
   */
  jobOptions: DefaultJobOptions;
  /** Jobs one worker process runs at once (the default, where `concurrencyVariable` names a setting). */
  concurrency: number;
  /** The operator's setting that overrides `concurrency` (libs/config: concurrencySettings), or none. */
  concurrencyVariable: ConcurrencyVariable | null;
  /**
   * Job lock and stalled-job check, ms: how long a crashed worker's job stays claimed before another
   * worker takes it over. 'JOB_LOCK_MS' = the operator's setting (default 30 s).
   */
  lockDuration: number | 'JOB_LOCK_MS';
  /** The app whose worker consumes the queue. */
  consumer: WorkerApp;
  /** KEDA scales the consumer on this queue's wait list (`listLength` waiting jobs per replica), or not. */
  keda: { listLength: number } | null;
  /**
   * Jobs that fail for good are rows in failed_jobs (listed, alerted on, redriven by an operator).
   * False for ticks: the next tick redoes the work, a failed tick is not a lost job.
   */
  recordFailures: boolean;
}

const keepSome = { removeOnComplete: { age: 3600, count: 1000 }, removeOnFail: { age: 7 * 86400 } };

/**
 * The queue record: registration, worker options, the metrics list and the KEDA triggers
 * (k8s/base/keda-scaledobjects.yaml, checked by test/deploy) are all derived from it.
 */
export const QUEUES: { [Q in QueueName]: Required<QueueSettings<Q>> } = {
  'submission.review': {
    jobName: 'review',
    versions: [{ v: 1, idFields: ['submissionId'] }],
    jobOptions: { ...keepSome, attempts: 10, backoff: { type: 'exponential', delay: 1000 } },
    concurrency: 4,
    concurrencyVariable: null,
    lockDuration: 'JOB_LOCK_MS',
    consumer: 'submission-validator',
    keda: { listLength: 100 },
    recordFailures: true,
  },
  'retry.attempt': {
    jobName: 'attempt',
    versions: [
      { v: 2, idFields: ['attemptIds'] },
      { v: 1, idFields: ['attemptId'] },
    ],
    jobOptions: { ...keepSome, attempts: 10, backoff: { type: 'exponential', delay: 2000 } },
    // A job carries up to ATTEMPTS_PER_JOB attempts, run at once. Concurrent attempts share their
    // statements (group commit in AttemptService): more in flight, bigger batches. Per customer and
    // per card the locks still let one decision through at a time.
    concurrency: 16,
    // A processor that answers in ~1 s holds a job's attempts that long: a replica then makes about
    // 16 x 25 = 400 attempts/s. RETRY_ATTEMPT_CONCURRENCY raises it (bench/attempts --latency).
    concurrencyVariable: 'RETRY_ATTEMPT_CONCURRENCY',
    lockDuration: 'JOB_LOCK_MS',
    consumer: 'retry-worker',
    // 4 waiting jobs = about 100 waiting attempts per replica.
    keda: { listLength: 4 },
    recordFailures: true,
  },
  'retry.tick': {
    jobName: 'tick',
    versions: [{ v: 1, idFields: [] }],
    jobOptions: { removeOnComplete: true, removeOnFail: true, attempts: 1 },
    // One tick at a time per worker; BullMQ's default lock (a tick is short and harmless to repeat).
    concurrency: 1,
    concurrencyVariable: null,
    lockDuration: 30_000,
    consumer: 'retry-worker',
    keda: null,
    recordFailures: false,
  },
  'webhook.deliver': {
    jobName: 'deliver',
    versions: [{ v: 1, idFields: ['messageId'] }],
    jobOptions: { ...keepSome, attempts: 5, backoff: { type: 'exponential', delay: 1000 } },
    concurrency: 64,
    concurrencyVariable: null,
    lockDuration: 'JOB_LOCK_MS',
    consumer: 'webhook-dispatcher',
    // Not on this wait list: a job only wakes the pump and completes at once (one per announce), so it
    // stays near empty however long the backlog. KEDA counts the due webhook_messages rows instead
    // (duePushesSql, libs/db).
    keda: null,
    recordFailures: true,
  },
  'refund.batch': {
    jobName: 'batch',
    versions: [{ v: 1, idFields: [] }],
    jobOptions: { ...keepSome, attempts: 5, backoff: { type: 'exponential', delay: 5000 } },
    // One batch at a time (refunds are claimed with SKIP LOCKED besides).
    concurrency: 1,
    concurrencyVariable: null,
    lockDuration: 'JOB_LOCK_MS',
    consumer: 'refund-batcher',
    keda: { listLength: 100 },
    recordFailures: true,
  },
  'processor.notification': {
    jobName: 'notification',
    versions: [{ v: 1, idFields: ['notificationId'] }],
    // An AUTHORISATION may arrive while its attempt's charge is still being recorded: the job waits
    // (NotYet: put back without using an attempt) until the attempt is unknown or settled.
    jobOptions: { ...keepSome, attempts: 10, backoff: { type: 'exponential', delay: 2000 } },
    concurrency: 8,
    concurrencyVariable: null,
    lockDuration: 'JOB_LOCK_MS',
    consumer: 'retry-worker',
    // A trickle beside the attempts; the retry worker's replicas follow retry.attempt.
    keda: null,
    recordFailures: true,
  },
};

export const QUEUE_NAMES = Object.values(QueueName) as QueueName[];

export function isQueueName(name: string): name is QueueName {
  return (QUEUE_NAMES as string[]).includes(name);
}

/** The job names, by queue, as runtime values. */
export const JOB_NAMES = Object.fromEntries(QUEUE_NAMES.map((q) => [q, QUEUES[q].jobName])) as {
  [Q in QueueName]: JobName<Q>;
};

/** Per-queue job options (from the record). */
export const QUEUE_OPTIONS = Object.fromEntries(QUEUE_NAMES.map((q) => [q, QUEUES[q].jobOptions])) as Record<
  QueueName,
  DefaultJobOptions
>;

/** The queues an app consumes, in record order. */
export function queuesConsumedBy(app: string): QueueName[] {
  return QUEUE_NAMES.filter((q) => QUEUES[q].consumer === app);
}

/**
 * BullMQ worker options of a queue's consumer; `jobLockMs` is the configured JOB_LOCK_MS, `settings`
 * the configured concurrency overrides (libs/config: concurrencySettings).
 */
export function workerOptions(
  queue: QueueName,
  jobLockMs: number,
  settings: Partial<Record<ConcurrencyVariable, number>> = {},
): { concurrency: number; lockDuration: number; stalledInterval: number } {
  const s = QUEUES[queue];
  const lock = s.lockDuration === 'JOB_LOCK_MS' ? jobLockMs : s.lockDuration;
  const concurrency = (s.concurrencyVariable && settings[s.concurrencyVariable]) || s.concurrency;
  return { concurrency, lockDuration: lock, stalledInterval: lock };
}

/**
 * The longest a job of `queue` stays alive after its first try starts, for a job that fails every
 * try: each of its `attempts` tries runs up to `perTryMs` and, when its worker dies under it, stays
 * locked up to two job locks before the stalled check hands it over; between tries, the queue's
 * backoff (BullMQ's exponential: delay x 2^(n-1) after the n-th failure; fixed: delay). Past it, a
 * row the job would have moved on and did not is the job's leftover (the retry worker's sweep of
 * attempts left pending). Not counted: a job whose workers keep dying, which the outbox sweeper puts
 * back up to MAX_PUBLISHES_AFTER_STALLS times (whatever acts on the leftover re-checks under a lock).
 */
export function jobLifetimeMs(queue: QueueName, jobLockMs: number, perTryMs: number): number {
  const s = QUEUES[queue];
  const lock = s.lockDuration === 'JOB_LOCK_MS' ? jobLockMs : s.lockDuration;
  const tries = s.jobOptions.attempts ?? 1;
  const raw = s.jobOptions.backoff;
  const backoff = typeof raw === 'number' ? { type: 'fixed', delay: raw } : raw;
  let waits = 0;
  for (let n = 1; n < tries && backoff; n++) {
    const delay = backoff.delay ?? 0;
    waits += backoff.type === 'exponential' ? delay * 2 ** (n - 1) : delay;
  }
  return tries * (perTryMs + 2 * lock) + waits;
}

/**
 * Checks a consumed payload against the queue's contract. A payload of another version, or without
 * its ids, can never succeed however often it is tried: UnrecoverableError fails the job for good
 * at once (recorded in failed_jobs) instead of burning its attempts.
 */
export function assertJobData<Q extends QueueName>(queue: Q, data: unknown): asserts data is JobData<Q> {
  const s = QUEUES[queue as QueueName];
  if (typeof data !== 'object' || data === null) throw new UnrecoverableError(`${queue}: payload is not an object`);
  const record = data as Record<string, unknown>;
  const version = (s.versions as readonly { v: number; idFields: readonly string[] }[]).find(
    (x) => x.v === record['v'],
  );
  if (!version) {
    throw new UnrecoverableError(
      `${queue}: unknown payload version ${JSON.stringify(record['v'])} (expected ${s.versions.map((x) => x.v).join(' or ')})`,
    );
  }
  for (const field of version.idFields) {
    const value = record[field];
    const ids = Array.isArray(value) ? value : [value];
    if (ids.length === 0 || ids.length > MAX_IDS_PER_FIELD || !ids.every(isId)) {
      throw new UnrecoverableError(`${queue}: payload field ${field} missing or malformed`);
    }
  }
}

function isId(value: unknown): boolean {
  return typeof value === 'string' && value.length > 0 && value.length <= 128;
}
