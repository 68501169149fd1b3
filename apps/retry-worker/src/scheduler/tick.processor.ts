import { InjectQueue, WorkerHost } from '@nestjs/bullmq';
import { Inject, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import { AnalyticsRepository, PolicyStatsRepository } from '@retain/db';
import { QueueProcessor, RETAIN_CONFIG } from '@retain/platform';
import { QueueName } from '@retain/queues';
import type { Queue } from 'bullmq';
import { DataSource } from 'typeorm';
import { ReconcileService } from '../reconcile/reconcile.service';
import { AttemptSchedulerService } from './attempt-scheduler.service';

const SCHEDULER_ID = 'retry-tick';

/**
 * The tick is a BullMQ job scheduler every SCHEDULER_TICK (one tick per period across all workers).
 * Redis may lose the scheduler (a flush): every worker re-upserts it periodically, which is
 * idempotent, so ticking resumes by itself.
 */
@QueueProcessor(QueueName.RetryTick)
export class TickProcessor extends WorkerHost implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(TickProcessor.name);
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly scheduler: AttemptSchedulerService,
    private readonly reconciler: ReconcileService,
    @InjectQueue(QueueName.RetryTick) private readonly queue: Queue,
    @Inject(RETAIN_CONFIG) private readonly config: RetainConfig,
    private readonly db: DataSource,
  ) {
    super();
  }

  async onModuleInit(): Promise<void> {
    await this.ensureScheduler();
    this.timer = setInterval(() => void this.ensureScheduler(), Math.max(5000, this.config.tickMs * 10));
    this.timer.unref();
  }

  onApplicationShutdown(): void {
    if (this.timer) clearInterval(this.timer);
  }

  private async ensureScheduler(): Promise<void> {
    try {
      await this.queue.upsertJobScheduler(
        SCHEDULER_ID,
        { every: this.config.tickMs },
        { name: 'tick', data: { v: 1 }, opts: { removeOnComplete: true, removeOnFail: true } },
      );
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'could not upsert the retry tick scheduler');
    }
  }

  /**
   * Each tick reconciles unknown attempts first (one may unblock its transaction), then schedules,
   * then folds the pending counters of the analytics rollup and the policy's slots (reads count
   * them either way).
   */
  async process(): Promise<number> {
    try {
      await this.reconciler.reconcile();
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'reconciliation pass failed; retried next tick');
    }
    const scheduled = await this.scheduler.scheduleDue(this.config.tickMs);
    // Each fold on its own: one failing never stops the other (the policy reads its slots on every attempt).
    for (const [counters, fold] of [
      ['analytics rollup', AnalyticsRepository.fold],
      ['policy slot counts', PolicyStatsRepository.fold],
    ] as const) {
      try {
        await fold(this.db);
      } catch (err) {
        this.logger.warn(
          { err: (err as Error).message, counters },
          'folding pending counters failed; retried next tick',
        );
      }
    }
    return scheduled;
  }
}
