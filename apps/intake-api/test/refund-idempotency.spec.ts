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

  it('a key is kept 24 hours: used again after them, it is a new call (retention has not swept it yet)', async () => {
    const t = await insertTransactionRow(await testDb(), merchantId, {
      status: 'Captured',
      capturedMinor: '5000',
      amountMinor: '5000',
    });
    expect((await refund(t.merchantTxnId, 10, 'refund-inv-24h')).status).toBe(200);
    // 25 hours on, before the next retention sweep deletes the key.
    await (
      await testDb()
    ).query(
      `UPDATE refund_idempotency_keys SET created_at = now() - interval '25 hours' WHERE merchant_id = $1 AND key = $2`,
      [merchantId, 'refund-inv-24h'],
    );
    // Another body with the key: a new call, not refused; and then the key holds the new answer.
    expect((await refund(t.merchantTxnId, 20, 'refund-inv-24h')).status).toBe(200);
    expect(await refundsOf(t.id)).toEqual(['1000', '2000']);
    const again = await refund(t.merchantTxnId, 20, 'refund-inv-24h');
    expect(again.status).toBe(200);
    expect(await refundsOf(t.id)).toEqual(['1000', '2000']);
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

  // 200,000 nested arrays: JSON.parse reads them, a recursive walk (JSON.stringify) of them throws.
  const DEEP = `${'['.repeat(200_000)}${']'.repeat(200_000)}`;

  it('a body nested 200,000 deep answers with the key as it does without (the deep item alone rejected)', async () => {
    const db = await testDb();
    const rows = () =>
      Promise.all(
        Array.from({ length: 3 }, () =>
          insertTransactionRow(db, merchantId, {
            status: 'Captured',
            capturedMinor: '5000',
            amountMinor: '5000',
          }),
        ),
      );
    const send = (text: string, key?: string) =>
      client.request('POST', '/v1/retain/refunds', text, key === undefined ? {} : { 'Idempotency-Key': key });
    const [a, b, c] = await rows();
    // An unknown top-level field holding the nesting: the refund is made, and a retry replays it.
    const top = `{"refunds":[{"id":"${a!.merchantTxnId}","amount":10}],"extra":${DEEP}}`;
    const first = await send(top, 'deep-top');
    expect(first.status, first.text).toBe(200);
    expect(first.json).toEqual({ message: '1 refunds received for processing' });
    expect(await send(top, 'deep-top')).toMatchObject({ status: 200, json: first.json });
    expect(await refundsOf(a!.id)).toEqual(['1000']);
    // The nesting inside an item: that item alone is rejected (RET009), the other one refunded.
    const item = `{"refunds":[{"id":"${b!.merchantTxnId}","amount":10},{"id":"${c!.merchantTxnId}","x":${DEEP}}]}`;
    const keyed = await send(item, 'deep-item');
    expect(keyed.status, keyed.text).toBe(207);
    expect(keyed.json).toMatchObject({
      message: '1 refunds received for processing',
      error_count: 1,
      rejected: [{ id: c!.merchantTxnId, errors: [{ code: 'RET009' }] }],
    });
    expect(await refundsOf(b!.id)).toEqual(['1000']);
    expect(await refundsOf(c!.id)).toEqual([]);
    // Without the key the same body gets the same answer (a second refund of b: no key, a new call).
    const unkeyed = await send(item);
    expect(unkeyed.status).toBe(207);
    expect(unkeyed.json).toEqual(keyed.json);
    expect(await refundsOf(c!.id)).toEqual([]);
    // An empty list beside the nesting: 400 RET400 as without the key, nothing stored.
    const empty = await send(`{"refunds":[],"extra":${DEEP}}`, 'deep-empty');
    expect(empty.status).toBe(400);
    expect(empty.json).toEqual({ code: 'RET400', message: 'Invalid parameter: refunds' });
  });

  it('the same refunds with keys in another order or unknown fields added are the same request', async () => {
    const t = await insertTransactionRow(await testDb(), merchantId, {
      status: 'Captured',
      capturedMinor: '5000',
      amountMinor: '5000',
    });
    const send = (text: string) =>
      client.request('POST', '/v1/retain/refunds', text, { 'Idempotency-Key': 'same-request-key' });
    const first = await send(`{"refunds":[{"id":"${t.merchantTxnId}","amount":10}]}`);
    expect(first.status).toBe(200);
    for (const text of [
      `{"refunds":[{"amount":10.0,"id":"${t.merchantTxnId}"}]}`,
      `{"note":"retry","refunds":[{"id":"${t.merchantTxnId}","amount":1e1,"reason":"dup"}]}`,
    ]) {
      const again = await send(text);
      expect(again.status, text).toBe(200);
      expect(again.json).toEqual(first.json);
    }
    expect(await refundsOf(t.id)).toEqual(['1000']);
    // Another amount is another request.
    const other = await send(`{"refunds":[{"id":"${t.merchantTxnId}","amount":11}]}`);
    expect(other.status).toBe(400);
    expect(other.json).toEqual({
      code: 'RET400',
      message: 'Invalid parameter: Idempotency-Key (used with another request body)',
    });
    expect(await refundsOf(t.id)).toEqual(['1000']);
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
