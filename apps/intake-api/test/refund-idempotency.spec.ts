import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApiClient,
  closeTestDb,
  createMerchant,
  insertTransactionRow,
  startApp,
  testDb,
  type RunningApp,
} from '@retain/testing';

// A partial refund sent again after a lost response must not refund twice: Idempotency-Key on
// POST /v1/retain/refunds (Stripe's convention), through the real intake-api over HTTP.
describe('refund calls with an Idempotency-Key', () => {
  let api: RunningApp;
  let client: ApiClient;
  let merchantId: string;

  beforeAll(async () => {
    api = await startApp('intake-api');
    const m = await createMerchant();
    client = new ApiClient(api.url, m.api_key);
    const db = await testDb();
    [{ id: merchantId }] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [m.login]);
  });
  afterAll(async () => {
    await api.stop();
    await closeTestDb();
  });

  const refundsOf = async (id: string): Promise<string[]> =>
    (
      await (
        await testDb()
      ).query(`SELECT amount_minor::text AS a FROM refunds WHERE transaction_id = $1 ORDER BY created_at`, [id])
    ).map((r: { a: string }) => r.a);
  const refund = (id: string, amount: number, key?: string) =>
    client.request(
      'POST',
      '/v1/retain/refunds',
      { refunds: [{ id, amount }] },
      key === undefined ? {} : { 'Idempotency-Key': key },
    );

  it('a retry with the key gets the first answer and refunds nothing more; without a key it is a new refund', async () => {
    const t = await insertTransactionRow(await testDb(), merchantId, {
      status: 'Captured',
      capturedMinor: '5000',
      amountMinor: '5000',
    });
    const first = await refund(t.merchantTxnId, 10, 'refund-inv-1-a');
    expect(first.status).toBe(200);
    const again = await refund(t.merchantTxnId, 10, 'refund-inv-1-a');
    expect(again.status).toBe(first.status);
    expect(again.json).toEqual(first.json);
    expect(await refundsOf(t.id)).toEqual(['1000']);
    // The key with another body: refused, nothing changes.
    const other = await refund(t.merchantTxnId, 20, 'refund-inv-1-a');
    expect(other.status).toBe(400);
    expect(other.json).toMatchObject({ code: 'RET400' });
    expect(await refundsOf(t.id)).toEqual(['1000']);
    // No key: a second partial refund is a second refund, as before.
    expect((await refund(t.merchantTxnId, 10)).status).toBe(200);
    expect(await refundsOf(t.id)).toEqual(['1000', '1000']);
  });

  it('calls with one key at the same time make one refund, and each gets its answer', async () => {
    const t = await insertTransactionRow(await testDb(), merchantId, {
      status: 'Captured',
      capturedMinor: '5000',
      amountMinor: '5000',
    });
    const answers = await Promise.all(Array.from({ length: 6 }, () => refund(t.merchantTxnId, 5, 'same-time-key')));
    for (const a of answers) expect(a.status).toBe(200);
    expect(await refundsOf(t.id)).toEqual(['500']);
  });

  it('refuses a malformed key and a dry run stores none', async () => {
    const t = await insertTransactionRow(await testDb(), merchantId, {
      status: 'Captured',
      capturedMinor: '5000',
      amountMinor: '5000',
    });
    const long = await refund(t.merchantTxnId, 5, 'k'.repeat(256));
    expect(long.status).toBe(400);
    expect(long.json).toMatchObject({ code: 'RET400' });
    const dry = await client.request(
      'POST',
      '/v1/retain/refunds?dryrun=1',
      { refunds: [{ id: t.merchantTxnId, amount: 5 }] },
      { 'Idempotency-Key': 'dry-key' },
    );
    expect(dry.status).toBe(200);
    expect(await refundsOf(t.id)).toEqual([]);
    // The key was not taken by the dry run: the real call with it refunds.
    expect((await refund(t.merchantTxnId, 5, 'dry-key')).status).toBe(200);
    expect(await refundsOf(t.id)).toEqual(['500']);
  });
});
