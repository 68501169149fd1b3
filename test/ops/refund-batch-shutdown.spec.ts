import { QueueRegistry, createRedis } from '@retain/queues';
import {
  closeTestDb,
  insertMerchantRow,
  insertTransactionRow,
  startApp,
  testDb,
  usePrivateDatabase,
  waitFor,
} from '@retain/testing';
import { newVid } from '@retain/domain';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const REFUNDS = 6;

// A pod being replaced (rollout, node drain) gets SIGTERM in the middle of the daily refund batch. The batch
// sent refund after refund until none was left: with thousands of refunds it outlived the 60 s shutdown
// limit and the pod's grace period, and was killed mid-refund. It must stop taking refunds, finish the one
// in flight, and hand the rest of the batch to the next pod at once (not to tomorrow's batch).
describe('refund-batcher: SIGTERM in the middle of a batch', () => {
  usePrivateDatabase('rbshut');
  const redis = createRedis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
  let queues: QueueRegistry;

  beforeAll(() => {
    queues = new QueueRegistry(redis, process.env['QUEUE_PREFIX']!);
  });
  afterAll(async () => {
    await queues.close();
    redis.disconnect();
    await closeTestDb();
  });

  it('stops after the refund in flight, exits 0, and the next pod finishes the batch at once', async () => {
    const db = await testDb();
    const merchantId = await insertMerchantRow(db);
    const vids: string[] = [];
    for (let i = 0; i < REFUNDS; i++) {
      const t = await insertTransactionRow(db, merchantId, { status: 'Refund Requested', capturedMinor: '1999' });
      const vid = newVid();
      await db.query(
        `INSERT INTO refunds (vid, merchant_id, transaction_id, kind, amount_minor, currency, status, previous_status,
           requested_at, timestamp, created_at)
         VALUES ($1, $2, $3, 'refund', 1999, 'USD', 'Processing', 'Captured', now(), now(), now() + $4 * interval '1 ms')`,
        [vid, merchantId, t.id, i],
      );
      vids.push(vid);
    }
    /** Refunds sent to the sandbox (by idempotency key), and those recorded Completed. */
    const progress = async () => {
      const [{ sent }] = await db.query(
        `SELECT count(*)::int AS sent FROM sandbox_operations WHERE idempotency_key = ANY($1::text[])`,
        [vids],
      );
      const [{ done }] = await db.query(
        `SELECT count(*)::int AS done FROM refunds WHERE vid = ANY($1::text[]) AND status = 'Completed'`,
        [vids],
      );
      return { sent: sent as number, done: done as number };
    };

    // No scheduled batch during the test; each refund takes 1.5 s after the processor answered.
    const env = { REFUND_BATCH_CRON: '0 0 1 1 *' };
    const first = await startApp('refund-batcher', { env: { ...env, TEST_PAUSE_AFTER_PROCESSOR_MS: '1500' } });
    await queues
      .get('refund.batch')
      .add('batch', { v: 1, trigger: 'operator' }, { jobId: `operator-${Date.now()}`, attempts: 5 });
    await waitFor(async () => (await progress()).sent >= 1, { what: 'the first refund sent' });
    expect(await first.stop('SIGTERM')).toBe(0);
    const stopped = await progress();
    // The refund in flight was finished and recorded; the batch took no more than one more after the signal.
    expect(stopped.done).toBe(stopped.sent);
    expect(stopped.sent).toBeLessThanOrEqual(2);
    expect(first.logs()).toMatch(/refund batch interrupted by shutdown/);

    // The next pod continues the batch without waiting for tomorrow's run; each refund is sent once.
    const second = await startApp('refund-batcher', { env });
    try {
      await waitFor(async () => (await progress()).done === REFUNDS, {
        timeoutMs: 30_000,
        what: 'the rest of the batch',
      });
      expect(await progress()).toEqual({ sent: REFUNDS, done: REFUNDS });
    } finally {
      expect(await second.stop('SIGTERM')).toBe(0);
    }
  });
});
