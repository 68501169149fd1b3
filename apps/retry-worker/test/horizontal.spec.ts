import { QueueName, createRedis } from '@retain/queues';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApiClient,
  closeTestDb,
  createMerchant,
  startApp,
  testDb,
  txn,
  waitFor,
  type RunningApp,
  usePrivateDatabase,
} from '@retain/testing';

// 100,000: the 30-day window closes 26 s after submission. At 1,000,000 it closed 2.6 s after it, and a
// review of 120 transactions slowed by a loaded full run cancelled some before any attempt (seen in CI).
const ENV = { RETRY_TIME_SCALE: '100000', JOB_LOCK_MS: '2000' };

// Several retry-worker processes on one database and Redis; a worker killed mid-attempt.
describe('horizontal safety of the retry engine', () => {
  // Its own database and queues: a time-scaled recovery window has no room for other files' backlog.
  usePrivateDatabase('hor');
  let api: RunningApp;
  let validator: RunningApp;
  let client: ApiClient;
  const extra: RunningApp[] = [];

  beforeAll(async () => {
    [api, validator] = await Promise.all([
      startApp('intake-api', { env: ENV }),
      startApp('submission-validator', { env: ENV }),
    ]);
    const merchant = await createMerchant(null);
    client = new ApiClient(api.url, merchant.api_key);
  });
  afterAll(async () => {
    await Promise.all([api.stop(), validator.stop(), ...extra.map((a) => a.kill())]);
    await closeTestDb();
  });

  /** count(*) of a query whose $1 is the submitted transactions' own ids (merchant_txn_id). */
  const countOf = async (sql: string, ids: string[]): Promise<number> => {
    const [r] = await (await testDb()).query(`SELECT count(*)::int AS n ${sql}`, [ids]);
    return r.n as number;
  };
  /** The ledger's charges of these transactions' attempts. */
  const CHARGES = `FROM sandbox_operations s JOIN attempts a ON a.vid = s.idempotency_key
    JOIN transactions t ON t.id = a.transaction_id WHERE t.merchant_txn_id = ANY($1::text[])`;

  const allFinal = async (ids: string[]) => {
    const db = await testDb();
    const rows: { status: string }[] = await db.query(
      `SELECT status FROM transactions WHERE merchant_txn_id = ANY($1::text[])`,
      [ids],
    );
    return rows.length === ids.length && rows.every((r) => ['Captured', 'Cancelled'].includes(r.status));
  };

  const assertNoDoubleCharge = async (ids: string[]) => {
    const db = await testDb();
    const perTxn: { captured: number; charges: number; approved: number }[] = await db.query(
      `SELECT count(*) FILTER (WHERE a.state = 'captured')::int AS captured,
              count(s.idempotency_key)::int AS charges,
              count(*) FILTER (WHERE s.result->>'outcome' = 'approved')::int AS approved
         FROM transactions t LEFT JOIN attempts a ON a.transaction_id = t.id
         LEFT JOIN sandbox_operations s ON s.idempotency_key = a.vid
        WHERE t.merchant_txn_id = ANY($1::text[]) GROUP BY t.id`,
      [ids],
    );
    expect(perTxn.length).toBe(ids.length);
    for (const r of perTxn) {
      expect(r.captured).toBeLessThanOrEqual(1);
      expect(r.approved).toBeLessThanOrEqual(1);
    }
    const dupAttempts = await db.query(
      `SELECT transaction_id, retry_number FROM attempts GROUP BY 1, 2 HAVING count(*) > 1`,
    );
    expect(dupAttempts).toEqual([]);
  };

  /** What one worker process did: the sum of its retain_retry_attempts_total counter (every outcome). */
  const attemptsMadeBy = async (worker: RunningApp): Promise<number> => {
    const text = await (await fetch(`${worker.url}/metrics`)).text();
    return text
      .split('\n')
      .filter((l) => l.startsWith('retain_retry_attempts_total'))
      .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  };

  it('two workers never run one attempt twice', async () => {
    const [a, b] = await Promise.all([startApp('retry-worker', { env: ENV }), startApp('retry-worker', { env: ENV })]);
    extra.push(a, b);
    // No card with a permanent ban (41, MAC 03): the ban is per card and would outlive this test.
    const cards = ['4111111111111111', '4000000000000077', '4000000000000119', '5555555555554444'];
    const batch = Array.from({ length: 120 }, (_, i) => txn({}, cards[i % cards.length]));
    expect((await client.submit(batch)).status).toBe(200);
    const ids = batch.map((t) => t['id'] as string);
    // The test's own timeout is longer, so a slow run fails here, saying what it waited for.
    await waitFor(() => allFinal(ids), { timeoutMs: 90_000, what: 'all transactions final' });
    await assertNoDoubleCharge(ids);
    // Each worker took part: its own /metrics counts the attempts it sent to the processor (summing
    // the two processes' logs could not fail: a started process always logs). Together they recorded
    // every charge the sandbox saw (transactions whose card budget was used up by the others end
    // without an attempt).
    try {
      const [byA, byB] = await Promise.all([attemptsMadeBy(a), attemptsMadeBy(b)]);
      expect(byA, 'attempts made by worker A').toBeGreaterThan(0);
      expect(byB, 'attempts made by worker B').toBeGreaterThan(0);
      const charged = await countOf(CHARGES, ids);
      expect(charged).toBeGreaterThanOrEqual(ids.length / 2);
      expect(byA + byB).toBeGreaterThanOrEqual(charged);
    } finally {
      // Never left running into the next test (it counts on being the only worker).
      await Promise.all([a.stop(), b.stop()]);
    }
  }, 120_000);

  it('RETRY_ATTEMPT_CONCURRENCY bounds the attempt jobs one worker runs at once', async () => {
    // Each job's attempts pause 2 s after the processor answers, as behind a slow processor; 60
    // transactions due at once are one tick's batch: 3 jobs (25, 25, 10). At 1 job at once, one runs
    // while the others wait (the record's 16 ran all 3 together).
    // Its own merchant: the cards' attempt budgets (per merchant and card) are untouched by the test before.
    const own = new ApiClient(api.url, (await createMerchant(null)).api_key);
    const cards = ['4111111111111111', '4000000000000077', '4000000000000119', '5555555555554444'];
    const batch = Array.from({ length: 60 }, (_, i) => txn({}, cards[i % cards.length]));
    expect((await own.submit(batch)).status).toBe(200);
    const ids = batch.map((t) => t['id'] as string);
    await waitFor(
      async () =>
        (await countOf(
          `FROM transactions WHERE merchant_txn_id = ANY($1::text[]) AND review_status = 'passed'
             AND next_attempt_at IS NOT NULL`,
          ids,
        )) === ids.length,
      { timeoutMs: 30_000, what: 'all reviewed and scheduled' },
    );
    const db = await testDb();
    await db.query(`UPDATE transactions SET next_attempt_at = now() WHERE merchant_txn_id = ANY($1::text[])`, [ids]);
    const redis = createRedis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
    const queue = new Queue(QueueName.RetryAttempt, { connection: redis, prefix: process.env['QUEUE_PREFIX'] });
    // Jobs completed by the tests before (kept in the queue's completed list).
    const before = (await queue.getJobCounts('completed')).completed ?? 0;
    const one = await startApp('retry-worker', {
      env: { ...ENV, RETRY_ATTEMPT_CONCURRENCY: '1', TEST_PAUSE_AFTER_PROCESSOR_MS: '2000' },
    });
    extra.push(one);
    try {
      let maxActive = 0;
      let waitedBehindOne = false;
      // Until the three jobs of the first round are done (later rounds of declined ones may follow).
      await waitFor(
        async () => {
          const { active, waiting, completed } = await queue.getJobCounts('active', 'waiting', 'completed');
          maxActive = Math.max(maxActive, active ?? 0);
          if ((active ?? 0) >= 1 && (waiting ?? 0) >= 1) waitedBehindOne = true;
          return (completed ?? 0) >= before + 3;
        },
        { timeoutMs: 60_000, intervalMs: 50, what: "the first round's three jobs done" },
      );
      expect(waitedBehindOne, 'a job waited while another ran').toBe(true);
      expect(maxActive).toBe(1);
      await assertNoDoubleCharge(ids);
    } finally {
      await queue.close();
      redis.disconnect();
      await one.stop();
    }
  }, 120_000);

  it('a worker killed after charging is recovered by another without a second charge', async () => {
    const slow = await startApp('retry-worker', { env: { ...ENV, TEST_PAUSE_AFTER_PROCESSOR_MS: '60000' } });
    extra.push(slow);
    const batch = Array.from({ length: 5 }, () => txn({}, '4111111111111111'));
    expect((await client.submit(batch)).status).toBe(200);
    const ids = batch.map((t) => t['id'] as string);
    const db = await testDb();
    // Wait until the slow worker has charged (the sandbox ledger has the charges) but recorded nothing.
    await waitFor(async () => (await countOf(CHARGES, ids)) === ids.length, {
      timeoutMs: 30_000,
      what: 'charges made by the slow worker',
    });
    const pending = await countOf(
      `FROM attempts a JOIN transactions t ON t.id = a.transaction_id
        WHERE t.merchant_txn_id = ANY($1::text[]) AND a.state = 'pending'`,
      ids,
    );
    expect(pending).toBe(ids.length);
    await slow.kill();
    const rescuer = await startApp('retry-worker', { env: ENV });
    extra.push(rescuer);
    await waitFor(() => allFinal(ids), { timeoutMs: 60_000, what: 'rescued attempts recorded' });
    const rows = await db.query(`SELECT status FROM transactions WHERE merchant_txn_id = ANY($1::text[])`, [ids]);
    expect(rows.every((r: { status: string }) => r.status === 'Captured')).toBe(true);
    await assertNoDoubleCharge(ids);
    expect(await countOf(CHARGES, ids)).toBe(ids.length);
    await rescuer.stop();
  });
});
