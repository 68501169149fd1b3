import { Injectable, Logger } from '@nestjs/common';
import { AttemptScheduleRepository } from '@retain/db';
import { OutboxRelay, addToOutbox, attemptJobs } from '@retain/queues';
import { DataSource } from 'typeorm';

/** Rows handed out per tick; the next tick takes the rest. */
const BATCH = 500;

/**
 * The scheduler tick: due transactions (next_attempt_at passed) become attempt rows and
 * `retry.attempt` jobs (ATTEMPTS_PER_JOB attempts each) in one database transaction. FOR UPDATE
 * SKIP LOCKED lets several workers tick at once without handing out the same transaction twice;
 * next_attempt_at is cleared so a transaction has at most one attempt in flight.
 */
@Injectable()
export class AttemptSchedulerService {
  private readonly logger = new Logger(AttemptSchedulerService.name);

  constructor(
    private readonly db: DataSource,
    private readonly schedule: AttemptScheduleRepository,
    private readonly relay: OutboxRelay,
  ) {}

  /**
   * Hands out due attempts in batches while a whole batch was due (more may be), for up to
   * `budgetMs` (about one tick period): a backlog drains at the rate the workers take it, not at
   * one batch per tick. Each batch commits and is published on its own.
   */
  async scheduleDue(budgetMs = 0): Promise<number> {
    const started = Date.now();
    let total = 0;
    for (;;) {
      const n = await this.scheduleBatch();
      total += n;
      if (n < BATCH || Date.now() - started >= budgetMs) return total;
    }
  }

  /** One batch: its attempts' count. */
  private async scheduleBatch(): Promise<number> {
    const { claimed, outboxIds } = await this.db.transaction(async (m) => {
      const attemptIds = await this.schedule.claimDue(m, BATCH);
      return { claimed: attemptIds.length, outboxIds: await addToOutbox(m, attemptJobs(attemptIds)) };
    });
    if (outboxIds.length > 0) {
      await this.relay.publish(outboxIds).catch((err: unknown) => {
        this.logger.warn({ err: (err as Error).message }, 'outbox publish deferred to the sweeper');
      });
    }
    return claimed;
  }
}
