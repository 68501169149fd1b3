import { QueueEvents } from 'bullmq';
import type { Command } from 'commander';
import { QueueName, QueueRegistry, createRedis } from '@retain/queues';
import type { CliContext } from './main';

/**
 * `refunds batch-now`: runs a refund batch at once through the refund-batcher (the same queue and
 * code as the daily run) and prints its summary {sent, completed, failed, stopsClosed}.
 */
export function registerRefundCommands(program: Command, ctx: CliContext): void {
  const refunds = program.command('refunds').description('refund batches');
  refunds
    .command('batch-now')
    .option('--timeout <seconds>', 'how long to wait for the batch', '120')
    .action(async (o: { timeout: string }) => {
      const redis = createRedis(ctx.config.redisUrl);
      const queues = new QueueRegistry(redis, ctx.config.queuePrefix);
      const events = new QueueEvents(QueueName.RefundBatch, {
        connection: redis.duplicate(),
        prefix: ctx.config.queuePrefix,
      });
      try {
        await events.waitUntilReady();
        const job = await queues
          .get(QueueName.RefundBatch)
          .add('batch', { v: 1, trigger: 'operator' }, { jobId: `operator-${Date.now()}` });
        const summary = await job.waitUntilFinished(events, Number(o.timeout) * 1000);
        ctx.print({ batch: job.id, ...(summary as object) });
      } catch (err) {
        throw new Error(`refund batch did not finish: ${(err as Error).message} (is the refund-batcher running?)`);
      } finally {
        await events.close();
        await queues.close();
        redis.disconnect();
      }
    });
}
