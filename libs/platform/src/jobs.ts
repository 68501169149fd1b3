import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import { OutboxRelay, assertJobData, sanitizeJobError, type QueueName } from '@retain/queues';
import { DelayedError, type Job } from 'bullmq';
import { RetainMetrics } from './metrics';
import { RETAIN_CONFIG } from './tokens';
import { isUnavailable } from './unavailable';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The outbox row a job was published from (its job id), or null for jobs made by a tick. */
export function outboxIdOf(job: Job): string | null {
  return job.id && UUID_RE.test(job.id) ? job.id : null;
}

/**
 * Thrown by a long handler (the refund batch) that stops between two units of work because the
 * process is shutting down: the job runner puts the job back without using an attempt, and another
 * worker (the next pod) continues where it stopped (handlers are idempotent).
 */
export class InterruptedByShutdown extends Error {}

/**
 * Thrown by a handler that must wait for other work to finish first (a processor notification for an
 * attempt whose charge is still being recorded): the job runner puts the job back, delayed, without
 * using an attempt, so no wait however long fails it for good. The wait must end by itself (an
 * attempt left pending is taken over by the reconciliation's sweep). Each put-back waits a tenth of
 * the job's age so far, between its queue's backoff delay and a minute.
 */
export class NotYet extends Error {}

/**
 * Runs a job handler with metrics, and marks its outbox row completed once the handler
 * succeeded. The payload is checked against the queue's contract first: a version or shape no
 * consumer knows throws UnrecoverableError (it would fail the same way on every attempt). Errors
 * are rethrown, never swallowed: BullMQ retries them, and a job out of attempts is recorded in
 * failed_jobs by the workers' shared failed handler (FailedJobsHook).
 */
@Injectable()
export class JobRunner {
  private readonly logger = new Logger(JobRunner.name);

  constructor(
    private readonly relay: OutboxRelay,
    private readonly metrics: RetainMetrics,
  ) {}

  /**
   * `handlerCompletesOutbox`: the handler marks the job's outbox row completed itself, in the same
   * statement as its own write (a round trip saved on a hot path). `token`: the worker's lock token
   * (the processor's second argument); with it, a job that failed because Postgres or Redis is
   * unreachable is put back, delayed by its queue's backoff, without using an attempt up: an outage
   * of any length never turns work into a failed job for an operator (handlers are idempotent).
   */
  async run<T>(
    queue: QueueName,
    job: Job,
    handler: () => Promise<T>,
    { handlerCompletesOutbox = false, token }: { handlerCompletesOutbox?: boolean; token?: string } = {},
  ): Promise<T> {
    const end = this.metrics.jobDuration.startTimer({ queue });
    try {
      assertJobData(queue, job.data);
      const result = await handler();
      const outboxId = outboxIdOf(job);
      if (outboxId && !handlerCompletesOutbox) await this.relay.complete(outboxId);
      end({ result: 'ok' });
      return result;
    } catch (err) {
      if (err instanceof InterruptedByShutdown && token !== undefined && (await this.putBack(job, token))) {
        end({ result: 'interrupted' });
        this.logger.log({ queue, jobId: job.id }, 'job put back: the worker is shutting down (no attempt used)');
        throw new DelayedError();
      }
      if (err instanceof NotYet && token !== undefined) {
        const waited = Date.now() - job.timestamp;
        if (await this.putBack(job, token, Math.min(Math.max(waited / 10, this.backoffOf(job)), 60_000))) {
          end({ result: 'waiting' });
          this.logger.log({ queue, jobId: job.id, err: err.message }, 'job put back to wait (no attempt used)');
          throw new DelayedError();
        }
      }
      end({ result: 'error' });
      this.metrics.jobFailures.inc({ queue });
      if (token !== undefined && isUnavailable(err) && (await this.putBack(job, token))) {
        this.logger.warn(
          { queue, jobId: job.id, err: (err as Error).message },
          'job put back: a back end is unreachable (no attempt used)',
        );
        throw new DelayedError();
      }
      // BullMQ keeps the error's message and stack in Redis (failedReason, stacktrace) for days: masked
      // there as in failed_jobs, whatever a library put in its message. The same error, so its class
      // (UnrecoverableError) still decides what BullMQ does.
      if (err instanceof Error) maskError(err);
      this.logger.warn(
        { queue, jobId: job.id, attempt: job.attemptsMade + 1, err: (err as Error).message },
        'job failed',
      );
      throw err;
    }
  }

  /** The job's first backoff delay (1 s without one). */
  private backoffOf(job: Job): number {
    const backoff = job.opts.backoff;
    return typeof backoff === 'number' ? backoff : (backoff?.delay ?? 1000);
  }

  /** Moves the job to delayed (by default its queue's backoff delay, at most 5 s); false if Redis would not take it. */
  private async putBack(job: Job, token: string, delay = Math.min(this.backoffOf(job), 5000)): Promise<boolean> {
    try {
      await job.moveToDelayed(Date.now() + delay, token);
      return true;
    } catch {
      return false;
    }
  }
}

/** The error's message, and its stack's copy of it, masked as failed_jobs masks them (sanitizeJobError). */
function maskError(err: Error): void {
  const masked = sanitizeJobError(err.message);
  if (masked === err.message) return;
  err.stack = err.stack?.split(err.message).join(masked);
  err.message = masked;
}

/**
 * Re-enqueues outbox rows that Redis lost (never published, or flushed); a job that failed for good
 * is recorded and left to an operator, never re-added.
 */
@Injectable()
export class OutboxSweeper implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(OutboxSweeper.name);
  private timer: NodeJS.Timeout | undefined;
  private running = false;

  constructor(
    private readonly relay: OutboxRelay,
    @Inject(RETAIN_CONFIG) private readonly config: RetainConfig,
  ) {}

  onModuleInit(): void {
    this.timer = setInterval(() => void this.tick(), Math.max(this.config.tickMs, 1000));
    this.timer.unref();
  }

  async tick(): Promise<number> {
    if (this.running) return 0;
    this.running = true;
    try {
      const n = await this.relay.sweep();
      if (n > 0) this.logger.warn({ republished: n }, 'outbox sweeper re-published lost jobs');
      return n;
    } catch (err) {
      this.logger.error({ err: (err as Error).message }, 'outbox sweep failed');
      return 0;
    } finally {
      this.running = false;
    }
  }

  onApplicationShutdown(): void {
    if (this.timer) clearInterval(this.timer);
  }
}
