import { ConnectionErrorLog, QueueRegistry, createRedis } from '@retain/queues';
import type { Redis } from 'ioredis';
import type { CliContext } from './main';

/** What a command that talks to Redis holds: one client, the queues on it, and their close. */
export interface CliRedis {
  redis: Redis;
  queues: QueueRegistry;
  /** Every error event of the client, its duplicates and the queues goes here, never to stderr. */
  errors: ConnectionErrorLog;
  /** A connection for BullMQ's blocking readers (QueueEvents): same single attempt, no retry limit per command. */
  blocking(): Redis;
  close(): Promise<void>;
}

/**
 * Redis for one CLI command: one connection attempt, no reconnects (`retryStrategy: () => null`), and
 * its error events swallowed (ioredis would print "Unhandled error event" traces, BullMQ the errors
 * of its queues), so an unreachable Redis is the command's one `{"error": ...}`, exit 1. Resolves
 * once Redis answered a PING, within `timeoutSeconds`.
 */
export async function connectRedis(ctx: CliContext, timeoutSeconds: number): Promise<CliRedis> {
  const errors = new ConnectionErrorLog(() => undefined);
  const redis = errors.watch(
    'cli',
    createRedis(ctx.config.redisUrl, { maxRetriesPerRequest: 1, retryStrategy: () => null }),
  );
  const queues = new QueueRegistry(redis, ctx.config.queuePrefix, errors);
  const duplicates: Redis[] = [];
  const handle: CliRedis = {
    redis,
    queues,
    errors,
    blocking: () => {
      const d = errors.watch('cli blocking', redis.duplicate({ maxRetriesPerRequest: null }));
      duplicates.push(d);
      return d;
    },
    close: async () => {
      await queues.close().catch(() => undefined);
      for (const d of duplicates) d.disconnect();
      redis.disconnect();
    },
  };
  try {
    await withTimeout(redis.ping(), timeoutSeconds, 'Redis did not answer');
    return handle;
  } catch (err) {
    await handle.close();
    throw new Error(`Redis unreachable: ${(err as Error).message}`);
  }
}

/** `work`, or an error with `message` after `seconds`. */
export async function withTimeout<T>(work: Promise<T>, seconds: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${message} within ${seconds} s`)), seconds * 1000);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
