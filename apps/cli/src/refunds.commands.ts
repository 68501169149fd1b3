import { QueueEvents } from 'bullmq';
import type { Command } from 'commander';
import { QueueName } from '@retain/queues';
import type { CliContext } from './main';
import { connectRedis, withTimeout } from './redis';

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
      const seconds = Number(o.timeout);
      const { queues, errors, blocking, close } = await connectRedis(ctx, seconds);
      const events = errors.watch(
        'refund batch events',
        new QueueEvents(QueueName.RefundBatch, { connection: blocking(), prefix: ctx.config.queuePrefix }),
      );
      try {
        await withTimeout(events.waitUntilReady(), seconds, 'Redis did not answer');
        const job = await queues
          .get(QueueName.RefundBatch)
          .add('batch', { v: 1, trigger: 'operator' }, { jobId: `operator-${Date.now()}` });
        let summary: unknown;
        try {
          summary = await job.waitUntilFinished(events, seconds * 1000);
        } catch (err) {
          throw new Error(`refund batch did not finish: ${(err as Error).message} (is the refund-batcher running?)`);
        }
        ctx.print({ batch: job.id, ...(summary as object) });
      } finally {
        await events.close().catch(() => undefined);
        await close();
      }
    });
}
