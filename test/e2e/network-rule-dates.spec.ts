import { spawnSync } from 'node:child_process';
import path from 'node:path';
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

const ENV = { RETRY_TIME_SCALE: '100000', JOB_LOCK_MS: '2000' };

// network-rules.md, dated changes: from 25 Oct 2026 a Visa `57` is category 1 (never reattempted);
// from Oct 2025 until then issuers' `57` is read as `05` (a generic soft decline, retried). A decline
// is judged by the rules in force when it arrived: the submitted transaction's `timestamp`. The same
// card and code, declined on either side of the date, end differently through the real apps.
describe('network rules by date through the real apps (Visa 57 before and after 25 Oct 2026)', () => {
  // Its own database and queues: a time-scaled recovery window has no room for other files' backlog.
  usePrivateDatabase('nrd');
  const apps: RunningApp[] = [];
  let client: ApiClient;

  beforeAll(async () => {
    apps.push(
      ...(await Promise.all([
        startApp('intake-api', { env: ENV }),
        startApp('submission-validator', { env: ENV }),
        startApp('retry-worker', { env: ENV }),
      ])),
    );
    const merchant = await createMerchant();
    client = new ApiClient(apps[0]!.url, merchant.api_key);
  });
  afterAll(async () => {
    for (const a of apps) await a.stop();
    await closeTestDb();
  });

  const final = (id: string) =>
    waitFor(
      async () => {
        const rows = (await client.request('GET', `/v1/retain/transactions/${id}?related=true`)).json.data as any[];
        return ['Captured', 'Cancelled'].includes(rows?.[0]?.status) ? rows : null;
      },
      { timeoutMs: 60_000, what: `${id} final` },
    );

  it('a 57 declined on 24 Oct 2026 is retried (read as 05); one declined on 25 Oct 2026 is never retried', async () => {
    const before = txn({ auth_code: '57', timestamp: '2026-10-24T22:00:00Z' });
    const after = txn({ auth_code: '57', timestamp: '2026-10-25T02:00:00Z' });
    expect((await client.submit([before, after])).status).toBe(200);

    const [b, ...bAttempts] = await final(before['id'] as string);
    expect(b.status).toBe('Captured');
    expect(bAttempts.map((x: any) => x.status)).toEqual(['Captured']);

    const [a, ...aAttempts] = await final(after['id'] as string);
    expect(a.status).toBe('Cancelled');
    expect(a.auth_code_description).toBe('Hard Failure');
    expect(aAttempts).toHaveLength(0);
  });

  it('records the fee each attempt risks and reports the fees avoided against a naive schedule (API and CLI)', async () => {
    const merchant = await createMerchant();
    const api = new ApiClient(apps[0]!.url, merchant.api_key);
    // A Visa 14 (category 1): never retried, so nothing paid; a naive daily schedule would have made
    // 30 excess reattempts at $0.10. A Visa 51 recovered on its first attempt: nothing either way.
    const hard = txn({ auth_code: '14' });
    const soft = txn({ auth_code: '51' });
    expect((await api.submit([hard, soft])).status).toBe(200);
    const finalOf = async (id: string) =>
      waitFor(
        async () => {
          const rows = (await api.request('GET', `/v1/retain/transactions/${id}?related=true`)).json.data as any[];
          return ['Captured', 'Cancelled'].includes(rows?.[0]?.status) ? rows : null;
        },
        { timeoutMs: 60_000, what: `${id} final` },
      );
    expect((await finalOf(hard['id'] as string))[0].status).toBe('Cancelled');
    expect((await finalOf(soft['id'] as string))[0].status).toBe('Captured');

    const db = await testDb();
    const rows = await db.query(
      `SELECT t.merchant_txn_id, t.network_fees_minor, t.naive_network_fees_minor, a.network_fee_risked_minor
         FROM transactions t LEFT JOIN attempts a ON a.transaction_id = t.id
        WHERE t.merchant_txn_id = ANY($1) ORDER BY t.merchant_txn_id = $2 DESC`,
      [[hard['id'], soft['id']], hard['id']],
    );
    expect(rows).toEqual([
      {
        merchant_txn_id: hard['id'],
        network_fees_minor: 0,
        naive_network_fees_minor: 300,
        network_fee_risked_minor: null,
      },
      { merchant_txn_id: soft['id'], network_fees_minor: 0, naive_network_fees_minor: 0, network_fee_risked_minor: 10 },
    ]);

    const analytics = (await api.request('GET', '/v1/retain/analytics')).json;
    expect(analytics.currencies).toEqual([expect.objectContaining({ currency: 'USD', network_fees_avoided: 3 })]);
    const main = path.resolve(__dirname, '../../dist/apps/cli/src/main.js');
    const cli = spawnSync(process.execPath, [main, 'analytics', 'fees', '--login', merchant.login], {
      env: process.env,
      encoding: 'utf8',
    });
    expect(cli.status).toBe(0);
    expect(JSON.parse(cli.stdout).currencies).toEqual([{ currency: 'USD', network_fees_avoided: 3 }]);
  });

  it('obeys the original Mastercard advice code (decisions §16) from the first attempt', async () => {
    const mc = '5555555555554444';
    const delayed = txn({ auth_code: '51', network_advice_code: '30' }, mc);
    // Another card: a MAC 03 binds its card for good, so it would stop `delayed` too on the same one.
    const stopped = txn({ auth_code: '51', network_advice_code: '03' }, '5105105105105100');
    const bad = txn({ auth_code: '51', network_advice_code: '3' }, mc);
    const r = await client.submit([delayed, stopped, bad]);
    expect(r.status).toBe(207);
    expect(r.json.rejected).toEqual([{ id: bad['id'], errors: [expect.objectContaining({ code: 'RET009' })] }]);
    const [d, ...dAttempts] = await final(delayed['id'] as string);
    expect(d).toMatchObject({ status: 'Captured', network_advice_code: '30' });
    // The first attempt waited for the advised 10 days (240 h) after the decline, on the scaled clock.
    expect(dAttempts[0].retry_plan.rule).toContain('advice code 30');
    const [s2, ...sAttempts] = await final(stopped['id'] as string);
    expect(s2).toMatchObject({ status: 'Cancelled', network_advice_code: '03' });
    expect(sAttempts).toHaveLength(0);
  });

  it('a timestamp ahead of the submission: the advice code 25 delay (24 h) runs from the submission, and the attempt is made', async () => {
    // The merchant's clock, or a mistake: the decline cannot have come after the submission.
    const ahead = new Date(Date.now() + 30 * 86_400_000);
    ahead.setUTCMilliseconds(0);
    const t = txn({ auth_code: '51', network_advice_code: '25', timestamp: ahead.toISOString() }, '5555555555554444');
    expect((await client.submit([t])).status).toBe(200);
    const [got, ...attempts] = await final(t['id'] as string);
    expect(got).toMatchObject({ status: 'Captured', network_advice_code: '25' });
    // The timestamp is stored and shown as sent.
    expect(Date.parse(got.timestamp)).toBe(ahead.getTime());
    expect(attempts).toHaveLength(1);
    expect(attempts[0].retry_plan.rule).toContain('advice code 25');
    const [{ submitted_ts: submitted }] = await (
      await testDb()
    ).query(`SELECT submitted_ts FROM transactions WHERE merchant_txn_id = $1`, [t['id']]);
    // 24 h at RETRY_TIME_SCALE 100000: 0.864 s after the submission, long before the timestamp.
    const sent = Date.parse(attempts[0].timestamp ?? attempts[0].created_at);
    expect(sent - new Date(submitted).getTime()).toBeGreaterThanOrEqual(864);
    expect(sent).toBeLessThan(ahead.getTime());
  });

  it('attempts show their own advice code (decisions §16), not the submission’s', async () => {
    const api = new ApiClient(apps[0]!.url, (await createMerchant()).api_key);
    // Declined 51 with MAC 03 by the sandbox on its first attempt; submitted without an advice code.
    const declined = txn({ auth_code: '51' }, '5100000000000008');
    // Submitted with MAC 02 (try again later, no delay); approved on its first attempt, which has none.
    const approved = txn({ auth_code: '51', network_advice_code: '02' }, '5555555555554444');
    expect((await api.submit([declined, approved])).status).toBe(200);
    const finalOf = (id: string) =>
      waitFor(
        async () => {
          const rows = (await api.request('GET', `/v1/retain/transactions/${id}?related=true`)).json.data as any[];
          return ['Captured', 'Cancelled'].includes(rows?.[0]?.status) ? rows : null;
        },
        { timeoutMs: 60_000, what: `${id} final` },
      );
    const [d, ...dAttempts] = await finalOf(declined['id'] as string);
    expect(d).toMatchObject({ status: 'Cancelled', network_advice_code: null });
    expect(dAttempts).toEqual([
      expect.objectContaining({ retry_number: 1, status: 'Failed', auth_code: '51', network_advice_code: '03' }),
    ]);
    const [a, ...aAttempts] = await finalOf(approved['id'] as string);
    expect(a).toMatchObject({ status: 'Captured', network_advice_code: '02' });
    expect(aAttempts).toEqual([expect.objectContaining({ status: 'Captured', network_advice_code: null })]);
    // The attempt fetched by its own retain_transaction_id shows the same.
    const byRetainId = (await api.request('GET', `/v1/retain/transactions/${dAttempts[0].retain_transaction_id}`)).json
      .data as any[];
    expect(byRetainId).toEqual([expect.objectContaining({ network_advice_code: '03' })]);
  });

  it('the UTC policy obeys the original advice code 30 too: no attempt within 10 days (scaled) of the decline', async () => {
    const utc = await startApp('intake-api', { env: { ...ENV, RETRY_POLICY: 'utc-heuristics-2026-10' } });
    apps.push(utc);
    const utcClient = new ApiClient(utc.url, (await createMerchant()).api_key);
    const failedAt = new Date(Date.now() - 1000);
    const delayed = txn(
      { auth_code: '51', network_advice_code: '30', timestamp: failedAt.toISOString() },
      '5555555555554444',
    );
    expect((await utcClient.submit([delayed])).status).toBe(200);
    const rows = await waitFor(
      async () => {
        const r = (await utcClient.request('GET', `/v1/retain/transactions/${delayed['id']}?related=true`)).json
          .data as any[];
        return ['Captured', 'Cancelled'].includes(r?.[0]?.status) ? r : null;
      },
      { timeoutMs: 60_000, what: 'final' },
    );
    const [t, first] = rows;
    expect(t).toMatchObject({ status: 'Captured', network_advice_code: '30' });
    const [{ policy_version: policy }] = await (
      await testDb()
    ).query(`SELECT policy_version FROM transactions WHERE merchant_txn_id = $1`, [delayed['id']]);
    expect(policy).toBe('utc-heuristics-2026-10');
    // 240 h at RETRY_TIME_SCALE 100000: 8.64 s after the decline.
    const sent = Date.parse(first.timestamp ?? first.created_at);
    expect(sent - failedAt.getTime()).toBeGreaterThanOrEqual(8_640);
  });
});
