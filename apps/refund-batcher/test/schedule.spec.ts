import { QueueName, createRedis } from '@retain/queues';
import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import { startApp, waitFor, type RunningApp } from '@retain/testing';

// The refund schedule is part of readiness: a batcher whose job scheduler is gone from Redis (or
// whose next run cannot be computed) would never send a refund, so /readyz says so.
describe('refund schedule readiness', () => {
  const redis = createRedis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
  const queue = new Queue(QueueName.RefundBatch, { connection: redis, prefix: process.env['QUEUE_PREFIX']! });
  let batcher: RunningApp | undefined;

  afterAll(async () => {
    await batcher?.stop();
    await queue.close();
    redis.disconnect();
  });

  it('/readyz is not ready, with the reason, while the refund job scheduler is missing in Redis', async () => {
    batcher = await startApp('refund-batcher', { env: { REFUND_BATCH_CRON: '0 2 * * *' } });
    const ready = await fetch(`${batcher.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(JSON.stringify(await ready.json())).toContain('refund_schedule');

    await queue.removeJobScheduler('refund-batch');
    const res = await waitFor(
      async () => {
        const r = await fetch(`${batcher!.url}/readyz`);
        return r.status === 503 ? r : null;
      },
      { what: '/readyz to report the missing schedule' },
    );
    const body = (await res.json()) as { error: Record<string, { status: string; message?: string }> };
    expect(body.error['refund_schedule']?.status).toBe('down');
    expect(body.error['refund_schedule']?.message).toMatch(/scheduler.*missing/i);
    // Postgres and Redis themselves are fine: only the schedule is reported.
    expect(Object.keys(body.error)).toEqual(['refund_schedule']);
  });
});
