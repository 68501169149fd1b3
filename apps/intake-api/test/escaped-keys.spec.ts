import { parseJsonStrictly } from '@retain/domain';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApiClient,
  closeTestDb,
  createMerchant,
  startApp,
  testDb,
  txn,
  type RunningApp,
  type TestMerchant,
} from '@retain/testing';

/**
 * Merchant metadata keys written with JSON escapes, through the real intake-api on Node 24: V8's
 * JSON.parse (nodejs/node#63785) reads such a key as another key it met before at the same place
 * of an object of the same shape, so one body or stored row could change the keys of the next.
 * First keys are unique to this file: the poisoned shapes are not shared with other tests.
 */
describe('metadata keys written with escapes (V8 JSON.parse bug)', () => {
  let api: RunningApp;
  let merchant: TestMerchant;
  let client: ApiClient;

  beforeAll(async () => {
    api = await startApp('intake-api');
    merchant = await createMerchant();
    client = new ApiClient(api.url, merchant.api_key);
  });
  afterAll(async () => {
    await api.stop();
    await closeTestDb();
  });

  /** POSTs one transaction whose metadata is the raw JSON text `metadata`. */
  async function submitWithMetadata(metadata: string): Promise<string> {
    const t = txn();
    const body = JSON.stringify({ transactions: [{ ...t, metadata: '@@' }] }).replace('"@@"', metadata);
    const r = await client.request('POST', '/v1/retain/transactions', body);
    expect(r.status, r.text).toBe(200);
    return t['id'] as string;
  }

  const storedKeys = async (id: string): Promise<string[]> =>
    (
      await (
        await testDb()
      ).query(`SELECT array(SELECT jsonb_object_keys(metadata)) AS keys FROM transactions WHERE merchant_txn_id = $1`, [
        id,
      ])
    )[0].keys;

  it('stores the keys a body spells with escapes, whatever bodies came before', async () => {
    await submitWithMetadata('{"esc_h":"a","\\\\":"x"}');
    const quote = await submitWithMetadata('{"esc_h":"b","\\"":"y"}');
    await submitWithMetadata('{"esc_k":"a","\\\\":"x"}');
    // How Python's json.dumps writes a non-ASCII key by default.
    const accented = await submitWithMetadata('{"esc_k":"c","\\u00e9t\\u00e9":"z"}');
    expect((await storedKeys(quote)).sort()).toEqual(['"', 'esc_h']);
    expect((await storedKeys(accented)).sort()).toEqual(['esc_k', 'été']);
  });

  it('reads back stored keys that Postgres writes escaped, whatever rows were read before', async () => {
    // Postgres writes `{"~": "a", "x\\": "x"}` for the first: "~" sorts first (shorter keys first).
    const before = await submitWithMetadata('{"~":"a","x\\\\":"x"}');
    const after = await submitWithMetadata('{"~":"b","x\\"":"y"}');
    expect((await storedKeys(after)).sort()).toEqual(['x"', '~']);
    const read = async (id: string): Promise<Record<string, unknown>> => {
      const r = await client.request('GET', `/v1/retain/transactions/${encodeURIComponent(id)}`);
      expect(r.status).toBe(200);
      // The response is read strictly: this test's own JSON.parse has the same bug.
      return (parseJsonStrictly(r.text) as { data: { metadata: Record<string, unknown> }[] }).data[0]!.metadata;
    };
    expect(await read(before)).toEqual({ '~': 'a', 'x\\': 'x' });
    expect(await read(after)).toEqual({ '~': 'b', 'x"': 'y' });
  });
});
