import { WebhookMessagesRepository } from '@retain/db';
import type { Command } from 'commander';
import { QueueName, QueueRegistry, createRedis } from '@retain/queues';
import type { CliContext } from './main';

/** The job states `queues` reports per queue. */
export const QUEUE_STATES = ['waiting', 'active', 'delayed', 'failed', 'completed'] as const;

/**
 * `queues`: an operator's view of the work in flight: BullMQ job counts per queue and the number of
 * dead webhook messages (waiting for `webhooks replay --dead`). Read-only.
 */
export function registerQueueCommands(program: Command, ctx: CliContext): void {
  program
    .command('queues')
    .description('job counts per queue (waiting, active, delayed, failed, completed) and dead webhook messages')
    .option('--timeout <seconds>', 'how long to wait for Redis', '5')
    .action(async (o: { timeout: string }) => {
      // One attempt per command, no endless reconnects: an unreachable Redis is an error here.
      const redis = createRedis(ctx.config.redisUrl, { maxRetriesPerRequest: 1, retryStrategy: () => null });
      redis.on('error', () => undefined);
      const queues = new QueueRegistry(redis, ctx.config.queuePrefix);
      let timer: NodeJS.Timeout | undefined;
      try {
        const read = Promise.all(
          Object.values(QueueName).map(async (name) => {
            const counts = await queues.get(name).getJobCounts(...QUEUE_STATES);
            return [name, Object.fromEntries(QUEUE_STATES.map((s) => [s, counts[s] ?? 0]))] as const;
          }),
        );
        const timeout = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('Redis did not answer')), Number(o.timeout) * 1000);
        });
        const counts = await Promise.race([read, timeout]);
        const dead = await new WebhookMessagesRepository(await ctx.db()).countDead();
        ctx.print({
          prefix: ctx.config.queuePrefix,
          queues: Object.fromEntries(counts),
          dead_webhook_messages: dead,
        });
      } finally {
        clearTimeout(timer);
        await queues.close().catch(() => undefined);
        redis.disconnect();
      }
    });
}
