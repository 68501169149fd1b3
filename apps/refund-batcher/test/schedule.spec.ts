import { QueueName, createRedis } from '@retain/queues';
import { Queue } from 'bullmq';
import { afterAll, describe, expect, it } from 'vitest';
import {
  closeTestDb,
  insertMerchantRow,
  insertRefundRow,
  insertTransactionRow,
  startApp,
  testDb,
  usePrivateDatabase,
  waitFor,
  type RunningApp,
} from '@retain/testing';

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

// A Redis that lost everything around the scheduled time (a flush, a restart without persistence) lost
// the job of that run too: the scheduler re-created afterwards first runs at the next scheduled time.
// The batcher makes up the run it missed, so refunds wait for the batch, never for the day after.
describe('refund schedule after a lost run', () => {
  usePrivateDatabase('rbs');
  let batcher: RunningApp | undefined;

  afterAll(async () => {
    await batcher?.stop();
    await closeTestDb();
  });

  it('a refund left unsent since the last scheduled run is sent at once, with its push', async () => {
    const db = await testDb();
    // Hourly, the last run half an hour ago (a fresh queue prefix: Redis knows nothing of it).
    const minute = (new Date().getUTCMinutes() + 30) % 60;
    const merchantId = await insertMerchantRow(db);
    const t = await insertTransactionRow(db, merchantId, { status: 'Refund Requested', capturedMinor: '1999' });
    const refundId = await insertRefundRow(db, t, 'refund', '1999');
    // Requested 40 minutes ago: the run half an hour ago should have sent it.
    await db.query(
      `UPDATE refunds SET previous_status = 'Captured', requested_at = now() - interval '40 minutes',
              created_at = now() - interval '40 minutes', updated_at = now() - interval '40 minutes' WHERE id = $1`,
      [refundId],
    );
    batcher = await startApp('refund-batcher', { env: { REFUND_BATCH_CRON: `${minute} * * * *` } });
    const state = async () =>
      (
        await db.query(
          `SELECT r.status, t.status AS txn,
                  (SELECT count(*)::int FROM webhook_messages w
                    WHERE w.transaction_id = t.id AND w.event_name = 'refund completed') AS pushes
             FROM refunds r JOIN transactions t ON t.id = r.transaction_id WHERE r.id = $1`,
          [refundId],
        )
      )[0];
    await waitFor(async () => (await state()).status !== 'Processing', {
      timeoutMs: 30_000,
      what: 'the missed run to be made up',
    });
    expect(await state()).toEqual({ status: 'Completed', txn: 'Refunded', pushes: 1 });
  });
});
