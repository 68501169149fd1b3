import { WebhookMessagesRepository } from '@retain/db';
import type { Command } from 'commander';
import { QueueName } from '@retain/queues';
import type { CliContext } from './main';
import { connectRedis, withTimeout } from './redis';

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
      const seconds = Number(o.timeout);
      const { queues, close } = await connectRedis(ctx, seconds);
      try {
        const counts = await withTimeout(
          Promise.all(
            Object.values(QueueName).map(async (name) => {
              const counts = await queues.get(name).getJobCounts(...QUEUE_STATES);
              return [name, Object.fromEntries(QUEUE_STATES.map((s) => [s, counts[s] ?? 0]))] as const;
            }),
          ),
          seconds,
          'Redis did not answer',
        );
        const dead = await new WebhookMessagesRepository(await ctx.db()).countDead();
        ctx.print({
          prefix: ctx.config.queuePrefix,
          queues: Object.fromEntries(counts),
          dead_webhook_messages: dead,
        });
      } finally {
        await close();
      }
    });
}
