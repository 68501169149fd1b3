import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApiClient,
  closeTestDb,
  createMerchant,
  insertRefundRow,
  insertTransactionRow,
  startApp,
  testDb,
  txn,
  type RunningApp,
} from '@retain/testing';

// decisions §5: cursor paging newest first, filters, related reads and bad parameters.
describe('GET /retain/transactions', () => {
  let api: RunningApp;
  let client: ApiClient;
  const ids: string[] = [];

  beforeAll(async () => {
    api = await startApp('intake-api');
    const merchant = await createMerchant();
    client = new ApiClient(api.url, merchant.api_key);
    // Five submissions one after the other: newest first means reverse order.
    for (let i = 0; i < 5; i++) {
      const t = txn({ account: { id: i % 2 === 0 ? 'acct-even' : 'acct-odd' } });
      ids.push(t['id'] as string);
      expect((await client.submit([t])).status).toBe(200);
    }
  });
  afterAll(async () => {
    await api.stop();
    await closeTestDb();
  });

  it('pages newest first with next/previous partial routes and total_count of the page', async () => {
    const newestFirst = [...ids].reverse();
    const p1 = await client.request('GET', '/v1/retain/transactions?limit=2');
    expect(p1.status).toBe(200);
    expect(p1.json.object).toBe('List');
    expect(p1.json.url).toBe('?limit=2');
    expect(p1.json.total_count).toBe(2);
    expect(p1.json.data.map((t: any) => t.id)).toEqual(newestFirst.slice(0, 2));
    expect(p1.json.previous).toBeNull();
    expect(p1.json.next).toBe(`/retain/transactions?limit=2&starting_after=${newestFirst[1]}`);
    const p2 = await client.request('GET', `/v1${p1.json.next}`);
    expect(p2.json.data.map((t: any) => t.id)).toEqual(newestFirst.slice(2, 4));
    expect(p2.json.previous).toBe(`/retain/transactions?limit=2&ending_before=${newestFirst[2]}`);
    const p3 = await client.request('GET', `/v1${p2.json.next}`);
    expect(p3.json.data.map((t: any) => t.id)).toEqual(newestFirst.slice(4));
    expect(p3.json.next).toBeNull();
    const back = await client.request('GET', `/v1${p2.json.previous}`);
    expect(back.json.data.map((t: any) => t.id)).toEqual(newestFirst.slice(0, 2));
    expect(back.json.previous).toBeNull();
  });

  it('filters by account, status, submitted time and updated_since', async () => {
    const even = await client.request('GET', '/v1/retain/transactions?account_id=acct-even');
    expect(even.json.data).toHaveLength(3);
    const st = await client.request('GET', '/v1/retain/transactions?status=Failed,In%20Retry');
    expect(st.json.data).toHaveLength(5);
    expect((await client.request('GET', '/v1/retain/transactions?status=Captured')).json.data).toHaveLength(0);
    const future = await client.request('GET', '/v1/retain/transactions?submitted_since=2999-01-01T00:00:00Z');
    expect(future.json.data).toHaveLength(0);
    const mark = new Date().toISOString();
    await (
      await testDb()
    ).query(
      `UPDATE transactions SET status = 'Captured', status_changed_at = now() + interval '1 second' WHERE merchant_txn_id = $1`,
      [ids[0]],
    );
    const updated = await client.request('GET', `/v1/retain/transactions?updated_since=${encodeURIComponent(mark)}`);
    expect(updated.json.data.map((t: any) => t.id)).toEqual([ids[0]]);
    const sub = await client.request('GET', `/v1/retain/transactions?subscription_id=sub_${ids[1]}`);
    expect(sub.json.data.map((t: any) => t.id)).toEqual([ids[1]]);
  });

  it('answers 400 RET400 naming the bad parameter', async () => {
    for (const [q, name] of [
      ['limit=0', 'limit'],
      ['limit=1001', 'limit'],
      ['limit=abc', 'limit'],
      ['status=Nope', 'status'],
      ['submitted_since=yesterday', 'submitted_since'],
      ['updated_since=2026-13-40', 'updated_since'],
    ]) {
      const r = await client.request('GET', `/v1/retain/transactions?${q}`);
      expect(r.status, q).toBe(400);
      expect(r.json).toEqual({ code: 'RET400', message: `Invalid parameter: ${name}` });
    }
    const rel = await client.request('GET', `/v1/retain/transactions/${ids[0]}?related=maybe`);
    expect(rel.json).toEqual({ code: 'RET400', message: 'Invalid parameter: related' });
  });

  it('returns the submitted transaction first with related=true (attempts follow once made)', async () => {
    const r = await client.request('GET', `/v1/retain/transactions/${ids[1]}?related=true`);
    expect(r.status).toBe(200);
    expect(r.json.data[0].id).toBe(ids[1]);
    expect(r.json.data[0].retry_number).toBe(0);
    // The whole set in one answer: no page beyond it (README: the fetch's envelope).
    expect(r.json).toMatchObject({ url: '?related=true', next: null, previous: null });
    expect((await client.request('GET', `/v1/retain/transactions/${ids[1]}`)).json).toMatchObject({
      url: '',
      next: null,
      previous: null,
      total_count: 1,
    });
  });
});

// A date-only upper bound (`submitted_until`, refunds' `until`) names a whole UTC day: everything up to
// the end of that day, so since=D&until=D lists day D and until=<today> includes today. A date-time
// bound stays exact (at or before that instant).
describe('date-only upper bounds of the lists', () => {
  let api: RunningApp;
  let client: ApiClient;
  let merchantId: string;
  const times = [
    '2026-11-26T23:59:59.999Z',
    '2026-11-27T00:00:00.000Z',
    '2026-11-27T23:59:59.999Z',
    '2026-11-28T00:00:00.000Z',
  ];
  const txnIds: string[] = [];
  const refundVids: string[] = [];

  beforeAll(async () => {
    api = await startApp('intake-api');
    const merchant = await createMerchant();
    client = new ApiClient(api.url, merchant.api_key);
    const db = await testDb();
    [{ id: merchantId }] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [merchant.login]);
    for (const at of times) {
      const t = await insertTransactionRow(db, merchantId, { status: 'Captured', capturedMinor: '1999' });
      await db.query(`UPDATE transactions SET submitted_ts = $2 WHERE id = $1`, [t.id, at]);
      const refund = await insertRefundRow(db, t, 'refund', '100');
      await db.query(`UPDATE refunds SET timestamp = $2 WHERE id = $1`, [refund, at]);
      const [{ vid }] = await db.query(`SELECT vid FROM refunds WHERE id = $1`, [refund]);
      txnIds.push(t.merchantTxnId);
      refundVids.push(vid);
    }
  });
  afterAll(async () => {
    await api.stop();
    await closeTestDb();
  });

  /** Indexes (into `times`) of the transactions and of the refunds the two lists return, oldest first. */
  const listed = async (txnQuery: string, refundQuery: string) => {
    const t = await client.request('GET', `/v1/retain/transactions?${txnQuery}`);
    const r = await client.request('GET', `/v1/retain/refunds?${refundQuery}`);
    expect([t.status, r.status], `${txnQuery} / ${refundQuery}`).toEqual([200, 200]);
    return {
      transactions: t.json.data.map((x: any) => txnIds.indexOf(x.id)).reverse(),
      refunds: r.json.data.map((x: any) => refundVids.indexOf(x.vid)).reverse(),
    };
  };

  it('a date-only until includes the whole day it names', async () => {
    expect(
      await listed('submitted_since=2026-11-27&submitted_until=2026-11-27', 'since=2026-11-27&until=2026-11-27'),
    ).toEqual({ transactions: [1, 2], refunds: [1, 2] });
    expect(await listed('submitted_until=2026-11-27', 'until=2026-11-27')).toEqual({
      transactions: [0, 1, 2],
      refunds: [0, 1, 2],
    });
    expect(
      await listed(
        'submitted_since=2026-11-27T12:00:00Z&submitted_until=2026-11-27',
        'since=2026-11-27T12:00:00Z&until=2026-11-27',
      ),
    ).toEqual({ transactions: [2], refunds: [2] });
  });

  it('a date-time until stays exact', async () => {
    expect(await listed('submitted_until=2026-11-27T00:00:00Z', 'until=2026-11-27T00:00:00Z')).toEqual({
      transactions: [0, 1],
      refunds: [0, 1],
    });
    expect(await listed('submitted_until=2026-11-27T23:59:59.998Z', 'until=2026-11-27T23:59:59.998Z')).toEqual({
      transactions: [0, 1],
      refunds: [0, 1],
    });
  });

  it('pages a date-only range with the date kept in the links, and refuses a since after the day', async () => {
    const p1 = await client.request('GET', '/v1/retain/transactions?submitted_until=2026-11-27&limit=2');
    expect(p1.json.data.map((x: any) => txnIds.indexOf(x.id))).toEqual([2, 1]);
    expect(p1.json.next).toBe(`/retain/transactions?submitted_until=2026-11-27&limit=2&starting_after=${txnIds[1]}`);
    const p2 = await client.request('GET', `/v1${p1.json.next}`);
    expect(p2.json.data.map((x: any) => txnIds.indexOf(x.id))).toEqual([0]);
    expect(p2.json.next).toBeNull();
    for (const [path, name] of [
      ['/v1/retain/transactions?submitted_since=2026-11-28&submitted_until=2026-11-27', 'submitted_until'],
      ['/v1/retain/refunds?since=2026-11-28&until=2026-11-27', 'until'],
    ]) {
      expect((await client.request('GET', path!)).json).toEqual({
        code: 'RET400',
        message: `Invalid parameter: ${name}`,
      });
    }
  });
});
