import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApiClient,
  WebhookReceiver,
  closeTestDb,
  createMerchant,
  startApp,
  testDb,
  txn,
  usePrivateDatabase,
  waitFor,
  type RunningApp,
} from '@retain/testing';

const EVERY_SECOND = { REFUND_BATCH_CRON: '*/1 * * * * *' };

// decisions §8: refunds and stops through the real API, the real batcher and the sandbox.
describe('refunds and stops', () => {
  let api: RunningApp;
  let batcher: RunningApp;
  let dispatcher: RunningApp;
  let receiver: WebhookReceiver;
  let client: ApiClient;

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    [api, batcher, dispatcher] = await Promise.all([
      startApp('intake-api'),
      startApp('refund-batcher', { env: EVERY_SECOND }),
      startApp('webhook-dispatcher'),
    ]);
    const merchant = await createMerchant(receiver.url);
    client = new ApiClient(api.url, merchant.api_key);
  });
  afterAll(async () => {
    await Promise.all([api.stop(), batcher.stop(), dispatcher.stop()]);
    await receiver.stop();
    await closeTestDb();
  });

  /** A transaction the engine captured (set in SQL so these tests do not wait for the schedule). */
  const captured = async (amount = 50): Promise<string> => {
    const t = txn({ amount });
    expect((await client.submit([t])).status).toBe(200);
    const db = await testDb();
    await db.query(
      `UPDATE transactions SET status = 'Captured', review_status = 'passed', captured_amount_minor = amount_minor,
              processor_transaction_id = 'sbx_test', status_changed_at = now() WHERE merchant_txn_id = $1`,
      [t['id']],
    );
    return t['id'] as string;
  };
  const refund = (items: unknown[], query = '') =>
    client.request('POST', `/v1/retain/refunds${query}`, { refunds: items });
  const get = async (id: string) => (await client.request('GET', `/v1/retain/transactions/${id}`)).json.data[0];

  it('refunds a captured transaction in full: Refunded, and a refund completed push', async () => {
    const id = await captured(50);
    const r = await refund([{ id }]);
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ message: '1 refunds received for processing' });
    expect((await get(id)).status).toBe('Refund Requested');
    expect((await get(id)).refunds[0]).toMatchObject({ id, amount: 50, status: 'Processing' });
    await waitFor(async () => (await get(id)).status === 'Refunded', { what: 'Refunded' });
    const push = await waitFor(() =>
      receiver.byEvent('refund completed').find((p) => p.body.header['transaction_id'] === id),
    );
    expect((push.body.content as any).refunds[0].status).toBe('Completed');
    expect((push.body.content as any).status).toBe('Refunded');
    expect(String(push.body.header['payload_id'])).toHaveLength(40);
  });

  it('allows partial refunds up to the captured amount and refuses more with RET027', async () => {
    const id = await captured(100);
    expect((await refund([{ id, amount: 30 }])).status).toBe(200);
    expect((await refund([{ id, amount: 60.5 }])).status).toBe(200);
    const over = await refund([{ id, amount: 9.51 }]);
    expect(over.status).toBe(207);
    expect(over.json.rejected[0]).toEqual({
      id,
      errors: [{ code: 'RET027', message: 'Refund refused: requested amount exceeds refundable amount' }],
    });
    expect((await refund([{ id, amount: 9.5 }])).status).toBe(200);
    await waitFor(async () => (await get(id)).status === 'Refunded', { what: 'fully refunded by parts' });
    const list = await client.request('GET', `/v1/retain/refunds/${id}`);
    expect(list.json.data.map((x: any) => x.amount)).toEqual([30, 60.5, 9.5]);
    expect(list.json.data.every((x: any) => x.status === 'Completed')).toBe(true);
  });

  it('leaves a partial refund as Partially Refunded', async () => {
    const id = await captured(20);
    expect((await refund([{ id, amount: 5 }])).status).toBe(200);
    await waitFor(async () => (await get(id)).status === 'Partially Refunded');
  });

  it('rejects with RET015 on a cancelled transaction, RET0404 unknown, RETDUP, RET009 and changes nothing', async () => {
    const id = await captured(10);
    const t = txn();
    await client.submit([t]);
    await (await testDb()).query(`UPDATE transactions SET status = 'Cancelled' WHERE merchant_txn_id = $1`, [t['id']]);
    const other = await captured(10);
    const r = await refund([{ id: t['id'] }, { id: 'nope' }, { id, amount: 1.001 }, { id, amount: 1 }, { id: other }]);
    expect(r.status).toBe(207);
    expect(r.json.message).toBe('1 refunds received for processing');
    expect(r.json.error_count).toBe(4);
    const codes = r.json.rejected.map((x: any) => x.errors[0].code);
    expect(codes).toEqual(['RET015', 'RET0404', 'RET009', 'RETDUP']);
    // The rejected items changed nothing.
    expect((await get(id)).refunds).toEqual([]);
    expect((await get(t['id'] as string)).status).toBe('Cancelled');
    const bad = await client.request('POST', '/v1/retain/refunds', { refunds: [] });
    expect(bad.status).toBe(400);
    expect(bad.json).toEqual({ code: 'RET400', message: 'Invalid parameter: refunds' });
  });

  it('dryrun=1 checks and saves nothing', async () => {
    const id = await captured(10);
    const r = await refund([{ id }], '?dryrun=1');
    expect(r.status).toBe(200);
    expect((await get(id)).status).toBe('Captured');
    expect((await get(id)).refunds).toEqual([]);
  });

  it('stops a transaction still in retry: Stopped, the refund Completed, a push', async () => {
    const t = txn();
    expect((await client.submit([t])).status).toBe(200);
    const r = await refund([{ id: t['id'] }]);
    expect(r.status).toBe(200);
    const got = await get(t['id'] as string);
    expect(got.status).toBe('Stopped');
    expect(got.next_activity).toBeNull();
    expect(got.refunds[0].status).toBe('Completed');
    const push = await waitFor(() =>
      receiver.byEvent('refund completed').find((p) => p.body.header['transaction_id'] === t['id']),
    );
    expect((push.body.content as any).status).toBe('Stopped');
    // A stopped transaction is no longer refundable.
    expect((await refund([{ id: t['id'] }])).json.rejected[0].errors[0].code).toBe('RET015');
  });

  it('answers a repeated stop on a Stop Requested transaction idempotently: accepted, nothing new', async () => {
    const t = txn();
    expect((await client.submit([t])).status).toBe(200);
    const db = await testDb();
    // A stop waiting for an attempt in flight (set in SQL: the stop itself is tested below).
    await db.query(
      `UPDATE transactions SET status = 'Stop Requested', stop_requested_at = now(), next_attempt_at = NULL
        WHERE merchant_txn_id = $1`,
      [t['id']],
    );
    const again = await refund([{ id: t['id'] }]);
    expect(again.status).toBe(200);
    expect(again.json).toEqual({ message: '1 refunds received for processing' });
    const got = await get(t['id'] as string);
    expect(got.status).toBe('Stop Requested');
    expect(got.refunds).toEqual([]);
    // Still more than the transaction's amount is refused.
    expect((await refund([{ id: t['id'], amount: 1000 }])).json.rejected[0].errors[0].code).toBe('RET027');
  });

  it('the batch never closes a stop as Stopped once money was captured: the stop is refunded', async () => {
    const id = await captured(50);
    const db = await testDb();
    // A stop refund still open on a transaction that captured and got a refund call meanwhile.
    await db.query(
      `WITH t AS (UPDATE transactions SET status = 'Refund Requested', stop_requested_at = now()
                   WHERE merchant_txn_id = $1 RETURNING id, merchant_id, currency)
       INSERT INTO refunds (vid, merchant_id, transaction_id, kind, amount_minor, currency, status, previous_status)
       SELECT 'rf_' || md5(random()::text), t.merchant_id, t.id, 'stop', 2000, t.currency, 'Processing', 'Captured'
         FROM t`,
      [id],
    );
    const final = await waitFor(
      async () => {
        const x = await get(id);
        return x.refunds.every((r: any) => r.status !== 'Processing') ? x : null;
      },
      { what: 'the stop settled by the batch' },
    );
    expect(final.status).toBe('Partially Refunded');
    expect(final.refunds.map((r: any) => [r.amount, r.status])).toEqual([[20, 'Completed']]);
  });

  it('records a refund the sandbox rejects (.13) as Failed, with a refund failed push and the status restored', async () => {
    const id = await captured(40);
    expect((await refund([{ id, amount: 10.13 }])).status).toBe(200);
    const push = await waitFor(() =>
      receiver.byEvent('refund failed').find((p) => p.body.header['transaction_id'] === id),
    );
    expect((push.body.content as any).refunds[0].status).toBe('Failed');
    expect((await get(id)).status).toBe('Captured');
    // A failed refund does not count: the whole amount is still refundable.
    expect((await refund([{ id, amount: 40 }])).status).toBe(200);
  });

  it('never refunds more than captured under concurrent calls', async () => {
    const id = await captured(100);
    const results = await Promise.all(Array.from({ length: 10 }, () => refund([{ id, amount: 30 }])));
    const ok = results.filter((r) => r.status === 200).length;
    expect(ok).toBe(3);
    expect(results.filter((r) => r.status === 207).every((r) => r.json.rejected[0].errors[0].code === 'RET027')).toBe(
      true,
    );
    const [{ sum }] = await (
      await testDb()
    ).query(
      `SELECT sum(r.amount_minor)::int AS sum FROM refunds r JOIN transactions t ON t.id = r.transaction_id
        WHERE t.merchant_txn_id = $1`,
      [id],
    );
    expect(sum).toBe(9000);
  });

  it('lists refunds by time with paging', async () => {
    const all = await client.request('GET', '/v1/retain/refunds?limit=2');
    expect(all.status).toBe(200);
    expect(all.json.object).toBe('List');
    expect(all.json.data).toHaveLength(2);
    expect(all.json.next).toMatch(/^\/retain\/refunds\?limit=2&starting_after=/);
    const next = await client.request('GET', `/v1${all.json.next}`);
    expect(next.json.data[0].vid).not.toBe(all.json.data[1].vid);
    expect((await client.request('GET', '/v1/retain/refunds?since=2999-01-01T00:00:00Z')).json.data).toEqual([]);
    expect((await client.request('GET', '/v1/retain/refunds?limit=0')).json).toEqual({
      code: 'RET400',
      message: 'Invalid parameter: limit',
    });
    expect((await client.request('GET', '/v1/retain/refunds/unknown-id')).status).toBe(404);
  });

  it('runs a batch at once from the CLI', async () => {
    const id = await captured(7);
    await batcher.stop();
    expect((await refund([{ id }])).status).toBe(200);
    batcher = await startApp('refund-batcher');
    const r = spawnSync(
      process.execPath,
      [path.resolve(__dirname, '../../../dist/apps/cli/src/main.js'), 'refunds', 'batch-now'],
      {
        env: process.env,
        encoding: 'utf8',
      },
    );
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).completed).toBeGreaterThanOrEqual(1);
    expect((await get(id)).status).toBe('Refunded');
  });
});

describe('refunds under failures and races', () => {
  // Stops and captures inside a 26-second recovery window: no room for other files' due attempts.
  usePrivateDatabase('rfr');
  it('resumes a batch killed half-way without sending any refund twice', { timeout: 150_000 }, async () => {
    const api = await startApp('intake-api');
    const merchant = await createMerchant(null);
    const client = new ApiClient(api.url, merchant.api_key);
    const db = await testDb();
    const batch = Array.from({ length: 60 }, () => txn({ amount: 12 }));
    expect((await client.submit(batch)).status).toBe(200);
    const ids = batch.map((t) => t['id'] as string);
    await db.query(
      `UPDATE transactions SET status = 'Captured', review_status = 'passed', captured_amount_minor = amount_minor,
              processor_transaction_id = 'sbx_test' WHERE merchant_txn_id = ANY($1::text[])`,
      [ids],
    );
    expect((await client.request('POST', '/v1/retain/refunds', { refunds: ids.map((id) => ({ id })) })).status).toBe(
      200,
    );
    const completed = async (): Promise<number> =>
      (
        await db.query(
          `SELECT count(*)::int AS n FROM refunds r JOIN transactions t ON t.id = r.transaction_id
            WHERE t.merchant_txn_id = ANY($1::text[]) AND r.status = 'Completed'`,
          [ids],
        )
      )[0].n;
    const slow = await startApp('refund-batcher', { env: { ...EVERY_SECOND, TEST_PAUSE_AFTER_PROCESSOR_MS: '100' } });
    await waitFor(async () => (await completed()) >= 10, { what: 'a part of the batch' });
    await slow.kill();
    const done = await completed();
    expect(done).toBeLessThan(ids.length);
    const again = await startApp('refund-batcher', { env: EVERY_SECOND });
    await waitFor(async () => (await completed()) === ids.length, { timeoutMs: 30_000, what: 'the rest of the batch' });
    const [ops] = await db.query(
      `SELECT count(*)::int AS n, count(DISTINCT s.idempotency_key)::int AS keys FROM sandbox_operations s
         JOIN refunds r ON r.vid = s.idempotency_key JOIN transactions t ON t.id = r.transaction_id
        WHERE t.merchant_txn_id = ANY($1::text[])`,
      [ids],
    );
    expect(ops).toEqual({ n: ids.length, keys: ids.length });
    const [pushes] = await db.query(
      `SELECT count(*)::int AS n FROM webhook_messages w JOIN transactions t ON t.id = w.transaction_id
        WHERE t.merchant_txn_id = ANY($1::text[]) AND w.event_name = 'refund completed'`,
      [ids],
    );
    expect(pushes.n).toBe(ids.length);
    const statuses = await db.query(
      `SELECT DISTINCT status FROM transactions WHERE merchant_txn_id = ANY($1::text[])`,
      [ids],
    );
    expect(statuses).toEqual([{ status: 'Refunded' }]);
    await Promise.all([api.stop(), again.stop()]);
  });

  it(
    'a capture recorded after a stop turns the stop into a refund at once, for the amount requested',
    { timeout: 150_000 },
    async () => {
      // 100,000: the 30-day window is 26 s of real time (at 1,000,000 a loaded machine once closed it first).
      const env = { RETRY_TIME_SCALE: '100000', JOB_LOCK_MS: '2000' };
      // No batcher: the retry worker alone must leave the transaction Refund Requested.
      const [api, validator, worker] = await Promise.all([
        startApp('intake-api', { env }),
        startApp('submission-validator', { env }),
        startApp('retry-worker', { env: { ...env, TEST_PAUSE_AFTER_PROCESSOR_MS: '6000' } }),
      ]);
      const merchant = await createMerchant(null);
      const client = new ApiClient(api.url, merchant.api_key);
      const db = await testDb();
      const t = txn({ amount: 19.99 }, '5555555555554444');
      expect((await client.submit([t])).status).toBe(200);
      await waitFor(
        async () =>
          (
            await db.query(
              `SELECT 1 FROM attempts a JOIN transactions t ON t.id = a.transaction_id
              JOIN sandbox_operations s ON s.idempotency_key = a.vid
             WHERE t.merchant_txn_id = $1 AND a.state = 'pending'`,
              [t['id']],
            )
          ).length > 0,
        { what: 'an attempt in flight' },
      ).catch(async (err: Error) => {
        // What the transaction was doing instead (it failed this way only inside the whole suite).
        const [row] = await db.query(
          `SELECT status, review_status, next_attempt_at, now() AS db_now, next_attempt_plan, attempt_count,
                  (SELECT json_agg(json_build_object('state', a.state, 'scheduled_for', a.scheduled_for,
                     'prepared_at', a.prepared_at, 'processed_at', a.processed_at, 'code', a.response_code))
                     FROM attempts a WHERE a.transaction_id = t.id) AS attempts
             FROM transactions t WHERE merchant_txn_id = $1`,
          [t['id']],
        );
        throw new Error(`${err.message}; the transaction: ${JSON.stringify(row)}`);
      });
      expect(
        (await client.request('POST', '/v1/retain/refunds', { refunds: [{ id: t['id'], amount: 5 }] })).status,
      ).toBe(200);
      const got = await waitFor(
        async () => {
          const x = (await client.request('GET', `/v1/retain/transactions/${t['id']}?related=true`)).json.data;
          return x[1]?.status === 'Captured' ? x : null;
        },
        { timeoutMs: 30_000, what: 'the capture recorded' },
      );
      expect(got[0].status).toBe('Refund Requested');
      expect(got[0].refunds.map((r: any) => [r.amount, r.status])).toEqual([[5, 'Processing']]);
      const [kind] = await db.query(
        `SELECT r.kind FROM refunds r JOIN transactions t ON t.id = r.transaction_id WHERE t.merchant_txn_id = $1`,
        [t['id']],
      );
      expect(kind.kind).toBe('refund');
      // The next batch refunds it like any refund.
      const batcher = await startApp('refund-batcher', { env: { ...env, ...EVERY_SECOND } });
      await waitFor(
        async () =>
          (await client.request('GET', `/v1/retain/transactions/${t['id']}`)).json.data[0].status ===
          'Partially Refunded',
        { timeoutMs: 30_000, what: 'partially refunded' },
      );
      await Promise.all([api.stop(), validator.stop(), worker.stop(), batcher.stop()]);
    },
  );

  it('a stop whose in-flight attempt declines ends Stopped, the refund Completed, with a push', async () => {
    // 100,000: the 30-day window is 26 s of real time (at 1,000,000 a loaded machine once closed it first).
    const env = { RETRY_TIME_SCALE: '100000', JOB_LOCK_MS: '2000' };
    const receiver = await new WebhookReceiver().start();
    const [api, validator, worker, dispatcher] = await Promise.all([
      startApp('intake-api', { env }),
      startApp('submission-validator', { env }),
      startApp('retry-worker', { env: { ...env, TEST_PAUSE_AFTER_PROCESSOR_MS: '6000' } }),
      startApp('webhook-dispatcher', { env }),
    ]);
    const merchant = await createMerchant(receiver.url);
    const client = new ApiClient(api.url, merchant.api_key);
    const db = await testDb();
    // 4000000000000002 declines 05 on every attempt.
    const t = txn({}, '4000000000000002');
    expect((await client.submit([t])).status).toBe(200);
    await waitFor(
      async () =>
        (
          await db.query(
            `SELECT 1 FROM attempts a JOIN transactions t ON t.id = a.transaction_id
              JOIN sandbox_operations s ON s.idempotency_key = a.vid
             WHERE t.merchant_txn_id = $1 AND a.state = 'pending'`,
            [t['id']],
          )
        ).length > 0,
      { what: 'an attempt in flight' },
    );
    expect((await client.request('POST', '/v1/retain/refunds', { refunds: [{ id: t['id'] }] })).status).toBe(200);
    expect((await client.request('GET', `/v1/retain/transactions/${t['id']}`)).json.data[0].status).toBe(
      'Stop Requested',
    );
    const push = await waitFor(
      () => receiver.byEvent('refund completed').find((p) => p.body.header['transaction_id'] === t['id']),
      { timeoutMs: 30_000, what: 'refund completed push' },
    );
    expect((push.body.content as any).status).toBe('Stopped');
    expect((push.body.content as any).refunds.map((r: any) => r.status)).toEqual(['Completed']);
    const final = (await client.request('GET', `/v1/retain/transactions/${t['id']}?related=true`)).json.data;
    expect(final[0].status).toBe('Stopped');
    expect(final[0].refunds[0].status).toBe('Completed');
    expect(final.slice(1).map((a: any) => `${a.status}:${a.auth_code}`)).toEqual(['Failed:05']);
    await Promise.all([api.stop(), validator.stop(), worker.stop(), dispatcher.stop()]);
    await receiver.stop();
  });

  it('a stop that arrives while an attempt is in flight waits for it; a capture turns into a refund', async () => {
    // 100,000: the 30-day window is 26 s of real time (at 1,000,000 a loaded machine once closed it first).
    const env = { RETRY_TIME_SCALE: '100000', JOB_LOCK_MS: '2000' };
    const [api, validator, worker, batcher] = await Promise.all([
      startApp('intake-api', { env }),
      startApp('submission-validator', { env }),
      startApp('retry-worker', { env: { ...env, TEST_PAUSE_AFTER_PROCESSOR_MS: '6000' } }),
      startApp('refund-batcher', { env: { ...env, ...EVERY_SECOND } }),
    ]);
    const merchant = await createMerchant(null);
    const client = new ApiClient(api.url, merchant.api_key);
    const db = await testDb();
    const t = txn({}, '5555555555554444');
    expect((await client.submit([t])).status).toBe(200);
    await waitFor(
      async () =>
        (
          await db.query(
            `SELECT 1 FROM attempts a JOIN transactions t ON t.id = a.transaction_id
              JOIN sandbox_operations s ON s.idempotency_key = a.vid
             WHERE t.merchant_txn_id = $1 AND a.state = 'pending'`,
            [t['id']],
          )
        ).length > 0,
      { what: 'an attempt in flight' },
    );
    const r = await client.request('POST', '/v1/retain/refunds', { refunds: [{ id: t['id'] }] });
    expect(r.status).toBe(200);
    expect((await client.request('GET', `/v1/retain/transactions/${t['id']}`)).json.data[0].status).toBe(
      'Stop Requested',
    );
    const final = await waitFor(
      async () => {
        const x = (await client.request('GET', `/v1/retain/transactions/${t['id']}?related=true`)).json.data;
        return x[0].status === 'Refunded' ? x : null;
      },
      { timeoutMs: 30_000, what: 'captured then refunded' },
    );
    expect(final[1].status).toBe('Captured');
    expect(final[0].refunds[0].status).toBe('Completed');
    // No attempt started after the stop.
    expect(final).toHaveLength(2);
    await Promise.all([api.stop(), validator.stop(), worker.stop(), batcher.stop()]);
  });
});
