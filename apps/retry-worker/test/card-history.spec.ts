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

const FAST = { RETRY_TIME_SCALE: '1000000', JOB_LOCK_MS: '2000' };
// Real time: the network windows (30 days, 24 hours) are not shrunk, so a test sees them hold.
const REAL = { RETRY_TIME_SCALE: '1', JOB_LOCK_MS: '5000' };

// network-rules.md and network-rules.config.ts: the card history of the network limits.
describe('card history: per card per merchant, in-flight attempts, unknown outcomes', () => {
  // Its own database and queues: a time-scaled recovery window has no room for other files' backlog.
  usePrivateDatabase('chi');
  let api: RunningApp;
  let validator: RunningApp;
  const workers: RunningApp[] = [];

  beforeAll(async () => {
    [api, validator] = await Promise.all([
      startApp('intake-api', { env: FAST }),
      startApp('submission-validator', { env: FAST }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([api.stop(), validator.stop(), ...workers.map((w) => w.kill())]);
    await closeTestDb();
  });

  const newClient = async () => new ApiClient(api.url, (await createMerchant(null)).api_key);
  const related = async (client: ApiClient, id: string) =>
    (await client.request('GET', `/v1/retain/transactions/${id}?related=true`)).json.data as any[];
  const finalOf = (client: ApiClient, id: string) =>
    waitFor(
      async () => {
        const x = await related(client, id);
        return ['Captured', 'Cancelled', 'Stopped'].includes(x?.[0]?.status) ? x : null;
      },
      { timeoutMs: 45_000, what: `final status of ${id}` },
    );
  /** Submitted and reviewed, with the first attempt due now (whatever the schedule proposed). */
  const dueNow = async (client: ApiClient, batch: Record<string, unknown>[]): Promise<string[]> => {
    expect((await client.submit(batch)).status).toBe(200);
    const ids = batch.map((t) => t['id'] as string);
    const db = await testDb();
    await waitFor(
      async () =>
        (
          await db.query(
            // A running worker's tick may already have taken one whose first attempt was planned for now.
            `SELECT count(*)::int AS n FROM transactions WHERE merchant_txn_id = ANY($1::text[])
              AND review_status = 'passed' AND (next_attempt_at IS NOT NULL OR attempt_count > 0)`,
            [ids],
          )
        )[0].n === ids.length,
      { what: 'reviewed', timeoutMs: 50_000 },
    );
    await db.query(
      `UPDATE transactions SET next_attempt_at = now() WHERE merchant_txn_id = ANY($1::text[]) AND next_attempt_at IS NOT NULL`,
      [ids],
    );
    return ids;
  };

  it('concurrent attempts on one card never overrun the limit: 25 due at once, at most 20 Visa declines', async () => {
    const client = await newClient();
    // 4000000000000002 declines 05 (Visa category 4) on every attempt: at most 20 in 30 days.
    const ids = await dueNow(
      client,
      Array.from({ length: 25 }, () => txn({}, '4000000000000002')),
    );
    // The processor answers slowly: the worker has 16 attempts in flight at once.
    const worker = await startApp('retry-worker', { env: { ...REAL, TEST_PAUSE_AFTER_PROCESSOR_MS: '1500' } });
    workers.push(worker);
    const db = await testDb();
    // Settled: every transaction has its attempt recorded, or was ended by the limit (no attempt).
    const settled = async () => {
      const [r] = await db.query(
        `SELECT count(*)::int AS n FROM transactions t
          WHERE t.merchant_txn_id = ANY($1::text[])
            AND NOT ((t.attempt_count > 0
                      AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.transaction_id = t.id AND a.state = 'pending'))
                  OR (t.attempt_count = 0 AND t.status = 'Cancelled'))`,
        [ids],
      );
      return r.n === 0;
    };
    await waitFor(settled, { timeoutMs: 45_000, what: 'every attempt made or the recovery ended by the limit' });
    let made = 0;
    for (const id of ids) made += (await related(client, id)).length - 1;
    expect(made).toBe(20);
    const [charges] = await db.query(
      `SELECT count(*)::int AS n FROM sandbox_operations s JOIN attempts a ON a.vid = s.idempotency_key
         JOIN transactions t ON t.id = a.transaction_id WHERE t.merchant_txn_id = ANY($1::text[])`,
      [ids],
    );
    expect(charges.n).toBe(20);
    // The card's budget frees when the oldest decline leaves the 30-day window, after the 5 others'
    // recovery windows end: they end Cancelled at once, never charged after their window.
    const [ended] = await db.query(
      `SELECT count(*)::int AS n FROM transactions WHERE merchant_txn_id = ANY($1::text[]) AND attempt_count = 0
          AND status = 'Cancelled' AND next_attempt_at IS NULL`,
      [ids],
    );
    expect(ended.n).toBe(5);
    await worker.stop();
  });

  it(
    'approvals do not count: after 20 captures of 4111111111111111, the next 5 are captured at once too',
    { timeout: 150_000 },
    async () => {
      const client = await newClient();
      const worker = await startApp('retry-worker', { env: REAL });
      workers.push(worker);
      for (const size of [20, 5]) {
        const ids = await dueNow(
          client,
          Array.from({ length: size }, () => txn({}, '4111111111111111')),
        );
        for (const id of ids) {
          const x = await finalOf(client, id);
          expect(x[0].status).toBe('Captured');
          expect(x.slice(1).map((a: any) => `${a.status}:${a.auth_code}`)).toEqual(['Captured:00']);
        }
      }
      await worker.stop();
    },
  );

  it('a hard decline bans the card for that merchant only, for good (a new expiry date does not lift it)', async () => {
    const worker = await startApp('retry-worker', { env: FAST });
    workers.push(worker);
    const a = await newClient();
    const b = await newClient();
    const shape = async (client: ApiClient, t: Record<string, unknown>) => {
      expect((await client.submit([t])).status).toBe(200);
      const x = await finalOf(client, t['id'] as string);
      return [x[0].status, ...x.slice(1).map((y: any) => `${y.status}:${y.auth_code}`)];
    };
    // 4100000000000019 declines 41 (lost card): never retried again.
    expect(await shape(a, txn({}, '4100000000000019'))).toEqual(['Cancelled', 'Failed:41']);
    // The same merchant again: the ban holds, no attempt.
    expect(await shape(a, txn({}, '4100000000000019'))).toEqual(['Cancelled']);
    // Another merchant: its own history, its own first attempt.
    expect(await shape(b, txn({}, '4100000000000019'))).toEqual(['Cancelled', 'Failed:41']);
    // Another expiry date on the same number does not lift it (network-rules.md: category 1, "none, ever").
    const renewed = txn({}, '4100000000000019');
    (renewed['payment_method'] as any).credit_card.expiration_date = '203103';
    expect(await shape(a, renewed)).toEqual(['Cancelled']);
    await worker.stop();
  });

  it(
    'a processor error whose charge went through is recorded as the capture: never a second charge',
    { timeout: 120_000 },
    async () => {
      const client = await newClient();
      const worker = await startApp('retry-worker', { env: { ...FAST, TEST_PAUSE_AFTER_PROCESSOR_MS: '3000' } });
      workers.push(worker);
      const db = await testDb();
      // 4000000000000119: processor error (timeout) on attempt 1.
      const t = txn({}, '4000000000000119');
      expect((await client.submit([t])).status).toBe(200);
      const [op] = await waitFor(
        async () => {
          const rows: { key: string }[] = await db.query(
            `SELECT s.idempotency_key AS key FROM sandbox_operations s JOIN attempts a ON a.vid = s.idempotency_key
             JOIN transactions t ON t.id = a.transaction_id
            WHERE t.merchant_txn_id = $1 AND a.state = 'pending' AND s.result->>'outcome' = 'error'`,
            [t['id']],
          );
          return rows.length ? rows : null;
        },
        { what: 'the timed-out attempt in flight', timeoutMs: 50_000 },
      );
      // The charge completed at the processor after the timeout: a lookup by its key now finds it.
      await db.query(`UPDATE sandbox_operations SET result = $2::jsonb WHERE idempotency_key = $1`, [
        op!.key,
        JSON.stringify({
          outcome: 'approved',
          responseCode: '00',
          processorTransactionId: 'sbx_late_capture',
          message: 'Approved',
        }),
      ]);
      const x = await finalOf(client, t['id'] as string);
      expect(x[0].status).toBe('Captured');
      expect(x.slice(1).map((a: any) => `${a.status}:${a.auth_code}`)).toEqual(['Captured:00']);
      expect(x[1].processor_transaction_id).toBe('sbx_late_capture');
      const [approved] = await db.query(
        `SELECT count(*)::int AS n FROM sandbox_operations s JOIN attempts a ON a.vid = s.idempotency_key
         JOIN transactions t ON t.id = a.transaction_id
        WHERE t.merchant_txn_id = $1 AND s.result->>'outcome' = 'approved'`,
        [t['id']],
      );
      expect(approved.n).toBe(1);
      await worker.stop();
    },
  );

  it(
    'an attempt left unknown by a processor error is reconciled: a late capture is recorded, no new charge',
    { timeout: 120_000 },
    async () => {
      const client = await newClient();
      const db = await testDb();
      const [id] = await dueNow(client, [txn({}, '4000000000000119')]);
      const worker = await startApp('retry-worker', { env: REAL });
      workers.push(worker);
      // Attempt 1 times out: its outcome is unknown (real time: not settled as "not charged" for 15 min),
      // so no attempt 2 is planned while it is.
      const [first] = await waitFor(
        async () => {
          const rows: { vid: string }[] = await db.query(
            `SELECT a.vid FROM attempts a JOIN transactions t ON t.id = a.transaction_id
            WHERE t.merchant_txn_id = $1 AND a.state = 'unknown' AND t.next_attempt_at IS NULL`,
            [id],
          );
          return rows.length ? rows : null;
        },
        { what: 'attempt 1 unknown after a processor error', timeoutMs: 50_000 },
      );
      // The processor finished that charge after all.
      await db.query(`UPDATE sandbox_operations SET result = $2::jsonb WHERE idempotency_key = $1`, [
        first!.vid,
        JSON.stringify({
          outcome: 'approved',
          responseCode: '00',
          processorTransactionId: 'sbx_late',
          message: 'Approved',
        }),
      ]);
      const x = await finalOf(client, id!);
      expect(x[0].status).toBe('Captured');
      expect(x.slice(1).map((a: any) => `${a.retry_number}:${a.status}:${a.auth_code}`)).toEqual(['1:Captured:00']);
      const [ops] = await db.query(
        `SELECT count(*)::int AS n FROM sandbox_operations s JOIN attempts a ON a.vid = s.idempotency_key
         JOIN transactions t ON t.id = a.transaction_id WHERE t.merchant_txn_id = $1`,
        [id],
      );
      expect(ops.n).toBe(1);
      await worker.stop();
    },
  );
});
