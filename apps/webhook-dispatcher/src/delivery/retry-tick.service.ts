import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import { WebhookMessagesRepository } from '@retain/db';
import { RETAIN_CONFIG } from '@retain/platform';
import { QueueName, QueueRegistry } from '@retain/queues';

/**
 * The job id of one delivery attempt: unique per (message, replay generation, attempt). A replay
 * resets attempt_count and bumps replay_count, so its attempts never reuse the id of a job BullMQ
 * still keeps (completed jobs stay for an hour), which would make the re-add a silent no-op.
 */
export function deliveryJobId(messageId: string, replayCount: number, attempt: number): string {
  return replayCount === 0 ? `${messageId}-${attempt}` : `${messageId}-r${replayCount}-${attempt}`;
}

/**
 * Delivery retries live in Postgres (next_attempt_at), not as hours-long delayed jobs in Redis.
 * A timer in every dispatcher hands due messages to the queue, one job id per attempt, so several
 * dispatchers may tick at once without sending an attempt twice (the claim in DeliveryService
 * decides) and a Redis flush loses nothing: the rows are still due.
 */
@Injectable()
export class RetryTickService implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(RetryTickService.name);
  private timer: NodeJS.Timeout | undefined;
  private running = false;

  constructor(
    private readonly messages: WebhookMessagesRepository,
    private readonly queues: QueueRegistry,
    @Inject(RETAIN_CONFIG) private readonly config: RetainConfig,
  ) {}

  onModuleInit(): void {
    this.timer = setInterval(() => void this.tick(), this.config.tickMs);
    this.timer.unref();
  }

  onApplicationShutdown(): void {
    if (this.timer) clearInterval(this.timer);
  }

  async tick(): Promise<number> {
    if (this.running) return 0;
    this.running = true;
    try {
      const due = await this.messages.dueForDelivery(1000);
      if (due.length === 0) return 0;
      await this.queues.get(QueueName.WebhookDeliver).addBulk(
        due.map((m) => ({
          name: 'deliver',
          data: { v: 1, messageId: m.message_id },
          opts: { jobId: deliveryJobId(m.message_id, m.replay_count, m.attempt_count + 1) },
        })),
      );
      return due.length;
    } catch (err) {
      this.logger.error({ err: (err as Error).message }, 'webhook retry tick failed');
      return 0;
    } finally {
      this.running = false;
    }
  }
}
