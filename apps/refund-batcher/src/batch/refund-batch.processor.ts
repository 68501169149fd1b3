import { InjectQueue, WorkerHost } from '@nestjs/bullmq';
import { Inject, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import { nextCronRun, previousCronRun, type RetainConfig } from '@retain/config';
import { RefundsRepository } from '@retain/db';
import { JobRunner, QueueProcessor, RETAIN_CONFIG, ReadinessChecks } from '@retain/platform';
import { QueueName } from '@retain/queues';
import type { Job, Queue } from 'bullmq';
import { DataSource } from 'typeorm';
import { RefundBatchService } from './refund-batch.service';

const SCHEDULER_ID = 'refund-batch';
/** How long after a scheduled time a refund that run should have sent may still wait for it (a long batch). */
const MISSED_RUN_AFTER_MS = 5 * 60_000;

/**
 * The batch runs on REFUND_BATCH_CRON (UTC) through a BullMQ job scheduler, one run at a time
 * (concurrency 1 in the queue record; refunds are claimed with SKIP LOCKED besides). The scheduler is re-upserted
 * periodically so a Redis flush does not silence the batch, and a run the flush lost is made up
 * (catchUp). Operators trigger a run at once with
 * `npm run retain -- refunds batch-now`, which adds a job to the same queue. /readyz reports a
 * broken schedule (scheduler gone from Redis, no next run): refunds would silently never be sent.
 */
@QueueProcessor(QueueName.RefundBatch)
export class RefundBatchProcessor extends WorkerHost implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(RefundBatchProcessor.name);
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly batch: RefundBatchService,
    private readonly runner: JobRunner,
    @InjectQueue(QueueName.RefundBatch) private readonly queue: Queue,
    @Inject(RETAIN_CONFIG) private readonly config: RetainConfig,
    private readonly readiness: ReadinessChecks,
    private readonly db: DataSource,
  ) {
    super();
  }

  async onModuleInit(): Promise<void> {
    this.readiness.add('refund_schedule', () => this.scheduleProblem());
    await this.ensureScheduler();
    this.timer = setInterval(() => void this.ensureScheduler(), 60_000);
    this.timer.unref();
  }

  onApplicationShutdown(): void {
    if (this.timer) clearInterval(this.timer);
  }

  private async ensureScheduler(): Promise<void> {
    try {
      await this.queue.upsertJobScheduler(
        SCHEDULER_ID,
        { pattern: this.config.refundBatchCron, tz: 'UTC' },
        { name: 'batch', data: { v: 1, trigger: 'schedule' }, opts: { removeOnComplete: 100, removeOnFail: 100 } },
      );
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'could not upsert the refund batch scheduler');
    }
    await this.catchUp();
  }

  /**
   * Makes up a scheduled run that never happened. Redis holds the job of the next run: lost around its
   * time (a flush, a restart without persistence), the scheduler re-created afterwards first runs at
   * the next scheduled time, a day later with the default cron. A batch sends every refund it finds, so
   * a refund that could have gone at the last scheduled time and is still unsent MISSED_RUN_AFTER_MS
   * after it means that run never happened: one batch is queued now, under a job id naming the run (the
   * replicas queue it once).
   */
  private async catchUp(): Promise<void> {
    try {
      const last = previousCronRun(this.config.refundBatchCron);
      if (!last || Date.now() - last.getTime() < MISSED_RUN_AFTER_MS) return;
      const jobId = `missed-${last.getTime()}`;
      if (await this.queue.getJob(jobId)) return;
      if (!(await RefundsRepository.unsentSince(this.db, last))) return;
      await this.queue.add('batch', { v: 1, trigger: 'schedule' }, { jobId, removeOnComplete: 100, removeOnFail: 100 });
      this.logger.warn({ scheduled: last.toISOString() }, 'the refund batch of this scheduled time never ran: run now');
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'could not check for a missed refund batch');
    }
  }

  /** Why the batch would not run on schedule, or null. */
  private async scheduleProblem(): Promise<string | null> {
    const scheduler = await this.queue.getJobScheduler(SCHEDULER_ID);
    if (!scheduler) return 'the refund batch job scheduler is missing in Redis (re-created within a minute)';
    if (nextCronRun(scheduler.pattern ?? this.config.refundBatchCron) === null) {
      return `the next run of the refund batch cannot be computed from "${scheduler.pattern ?? ''}"`;
    }
    if (!scheduler.next || !Number.isFinite(scheduler.next)) return 'the refund batch job scheduler has no next run';
    return null;
  }

  async process(job: Job, token?: string): Promise<unknown> {
    return this.runner.run(QueueName.RefundBatch, job, () => this.batch.runBatch(), { token });
  }
}
