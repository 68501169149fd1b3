import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiClient, closeTestDb, createMerchant, startApp, testDb, txn, type RunningApp } from '@retain/testing';

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
  });
});
