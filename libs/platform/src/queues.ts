import { BullModule, Processor, WorkerHost } from '@nestjs/bullmq';
import { Injectable, Logger, type DynamicModule, type OnApplicationBootstrap } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { ConfigError, concurrencySettings, jobLockMs } from '@retain/config';
import {
  QUEUES,
  isQueueName,
  queuesConsumedBy,
  recordFailure,
  sanitizeJobError,
  workerOptions,
  type QueueName,
  type WorkerApp,
} from '@retain/queues';
import type { Job } from 'bullmq';
import { DataSource } from 'typeorm';
import { outboxIdOf } from './jobs';
import { RetainMetrics } from './metrics';

/**
 * `@Processor` with the worker options of the queue record (concurrency, lock, stalled check).
 * JOB_LOCK_MS and the concurrency overrides are read at module load, because the options are
 * declared on the class.
 */
export function QueueProcessor(queue: QueueName): ClassDecorator {
  return Processor(queue, workerOptions(queue, atModuleLoad(jobLockMs), atModuleLoad(concurrencySettings)));
}

/**
 * A setting read while the app's modules load: a bad value falls back to the default here, and the
 * app's configuration check (runApp) then stops it with exit 78 naming the variable, before any
 * worker starts (thrown here, it was an uncaught stack trace and exit 1).
 */
function atModuleLoad<T>(read: (env?: NodeJS.ProcessEnv) => T): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof ConfigError) return read({});
    throw err;
  }
}

/** `BullModule.registerQueue` for every queue the app consumes, with the record's job options. */
export function registerQueues(app: WorkerApp): DynamicModule {
  return BullModule.registerQueue(
    ...queuesConsumedBy(app).map((name) => ({ name, defaultJobOptions: QUEUES[name].jobOptions })),
  );
}

/** True when BullMQ will not try this job again: out of attempts, or an UnrecoverableError. */
export function failedForGood(job: Job, err: Error | undefined): boolean {
  return (
    err?.name === 'UnrecoverableError' ||
    Boolean(job.finishedOn) ||
    job.attemptsMade >= Math.max(1, job.opts.attempts ?? 1)
  );
}

/**
 * The `failed` handler every worker of the app shares (found through Nest's discovery, so a new
 * processor cannot forget it): a job that failed for good becomes a failed_jobs row and its outbox
 * row is marked, so the sweeper leaves it to an operator (`retain jobs failed|redrive`). If this
 * cannot write (Postgres down), the sweeper records an outbox job's failure from Redis later.
 */
@Injectable()
export class FailedJobsHook implements OnApplicationBootstrap {
  private readonly logger = new Logger('FailedJobs');

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly db: DataSource,
    private readonly metrics: RetainMetrics,
  ) {}

  onApplicationBootstrap(): void {
    for (const wrapper of this.discovery.getProviders()) {
      const host: unknown = wrapper.instance;
      if (!(host instanceof WorkerHost)) continue;
      let worker: WorkerHost['worker'];
      try {
        worker = host.worker;
      } catch {
        continue; // a processor registered manually and not started: nothing to listen to
      }
      worker.on('failed', (job: Job | undefined, err: Error) => {
        if (job) void this.onFailed(worker.name, job, err);
      });
    }
  }

  /** Records the failure when it is final; returns whether a new failure was recorded. */
  async onFailed(queueName: string, job: Job, err: Error | undefined): Promise<boolean> {
    if (!isQueueName(queueName) || !QUEUES[queueName].recordFailures || !failedForGood(job, err)) return false;
    const error = sanitizeJobError(err?.message ?? job.failedReason ?? '');
    try {
      const recorded = await recordFailure(this.db, {
        queue: queueName,
        jobId: job.id ?? '',
        jobName: job.name,
        payload: job.data,
        attempts: job.attemptsMade,
        error,
        outboxId: outboxIdOf(job),
      });
      if (recorded) this.metrics.jobsFailed.inc({ queue: queueName });
      this.logger.error(
        { queue: queueName, jobId: job.id, attempts: job.attemptsMade, err: error },
        'job failed for good: recorded in failed_jobs (npm run retain -- jobs failed)',
      );
      return recorded;
    } catch (e) {
      this.logger.error(
        { queue: queueName, jobId: job.id, err: (e as Error).message },
        'could not record a job that failed for good; the outbox sweeper records it later',
      );
      return false;
    }
  }
}
