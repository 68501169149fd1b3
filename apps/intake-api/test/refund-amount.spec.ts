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

// POST /v1/retain/refunds: `amount` is an optional number (service-spec); leaving it out refunds all
// that is refundable. An explicit `"amount": null` is no number: refused RET009 like any other amount
// that is not one (a client whose amount became NaN sends null, and must not refund everything).
describe('refund amount', () => {
  let app: RunningApp;
  let client: ApiClient;
  let merchantId: string;

  beforeAll(async () => {
    app = await startApp('intake-api');
    const m = await createMerchant();
    client = new ApiClient(app.url, m.api_key);
    [{ id: merchantId }] = await (await testDb()).query(`SELECT id FROM merchants WHERE login = $1`, [m.login]);
  });
  afterAll(async () => {
    await app.stop();
    await closeTestDb();
  });

  const refunds = async (id: string): Promise<string[]> =>
    (await (await testDb()).query(`SELECT amount_minor::text AS a FROM refunds WHERE transaction_id = $1`, [id])).map(
      (r: { a: string }) => r.a,
    );

  it('refuses an explicit null amount with RET009 and refunds nothing; an omitted amount refunds everything', async () => {
    const t = await insertTransactionRow(await testDb(), merchantId, {
      status: 'Captured',
      capturedMinor: '5000',
      amountMinor: '5000',
    });
    const nul = await client.request('POST', '/v1/retain/refunds', {
      refunds: [{ id: t.merchantTxnId, amount: null }],
    });
    expect(nul.status).toBe(207);
    expect(nul.json).toEqual({
      message: '0 refunds received for processing',
      error_count: 1,
      rejected: [
        {
          id: t.merchantTxnId,
          errors: [{ code: 'RET009', message: 'Schema validation error: amount must be a number' }],
        },
      ],
    });
    expect(await refunds(t.id)).toEqual([]);
    // The same with an Idempotency-Key: refused the same way, and nothing refunded.
    const keyed = await client.request(
      'POST',
      '/v1/retain/refunds',
      { refunds: [{ id: t.merchantTxnId, amount: null }] },
      { 'Idempotency-Key': 'null-amount-1' },
    );
    expect(keyed.status).toBe(207);
    expect(keyed.json.rejected[0].errors[0].code).toBe('RET009');
    expect(await refunds(t.id)).toEqual([]);

    const all = await client.request('POST', '/v1/retain/refunds', { refunds: [{ id: t.merchantTxnId }] });
    expect(all.status).toBe(200);
    expect(all.json).toEqual({ message: '1 refunds received for processing' });
    expect(await refunds(t.id)).toEqual(['5000']);
  });
});
