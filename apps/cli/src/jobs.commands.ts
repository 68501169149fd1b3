import type { Command } from 'commander';
import { FailedJobs, OutboxRelay, isQueueName, type QueueName } from '@retain/queues';
import type { CliContext } from './main';
import { connectRedis } from './redis';

function queueOption(name: string | undefined): QueueName | undefined {
  if (name === undefined) return undefined;
  if (!isQueueName(name)) throw new Error(`unknown queue ${name}`);
  return name;
}

/**
 * Jobs that failed for good (decisions §16): `jobs failed [--queue <name>]` prints a JSON array of
 * {queue, id, failed_at, attempts, last_error}, oldest first; `jobs redrive <id>...|--all` puts them
 * back with a fresh attempt budget and prints {redriven: [{queue, id}]}.
 */
export function registerJobCommands(program: Command, ctx: CliContext): void {
  const jobs = program.command('jobs').description('jobs that failed for good: list and redrive');
  jobs
    .command('failed')
    .description('jobs out of attempts (or unrecoverable) not redriven yet, oldest first')
    .option('--queue <name>', 'only this queue')
    .action(async (o: { queue?: string }) => {
      const queue = queueOption(o.queue);
      // Postgres only: the list works with Redis down.
      ctx.print(await new FailedJobs(await ctx.db()).list(queue));
    });
  jobs
    .command('redrive')
    .description('enqueue failed jobs again with a fresh attempt budget')
    .argument('[ids...]', 'job ids as `jobs failed` prints them')
    .option('--all', 'every failed job (of --queue, if given)')
    .option('--queue <name>', 'only this queue')
    .option('--timeout <seconds>', 'how long to wait for Redis', '5')
    .action(async (ids: string[], o: { all?: boolean; queue?: string; timeout: string }) => {
      const queue = queueOption(o.queue);
      if (o.all ? ids.length > 0 : ids.length === 0) throw new Error('give job ids, or --all');
      const db = await ctx.db();
      // One connection attempt: an unreachable Redis is an error here, not an endless wait.
      const { queues, close } = await connectRedis(ctx, Number(o.timeout));
      try {
        const failed = new FailedJobs(db, { queues, relay: new OutboxRelay(db, queues) });
        ctx.print({ redriven: await failed.redrive(o.all ? 'all' : ids, queue) });
      } finally {
        await close();
      }
    });
}
