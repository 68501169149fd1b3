import { loadConfig } from '@retain/config';
import { MerchantsRepository } from '@retain/db';
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

// decisions §2: Basic and Bearer, 401 with WWW-Authenticate, 403 for a disabled merchant.
describe('authentication', () => {
  let api: RunningApp;
  let merchant: TestMerchant;

  beforeAll(async () => {
    api = await startApp('intake-api');
    merchant = await createMerchant();
  });
  afterAll(async () => {
    await api.stop();
    await closeTestDb();
  });

  const get = (headers: Record<string, string>) =>
    fetch(`${api.url}/v1/retain/transactions`, { headers }).then(async (r) => ({
      status: r.status,
      headers: r.headers,
      json: (await r.json().catch(() => undefined)) as any,
    }));

  it('accepts Bearer and Basic credentials', async () => {
    expect((await get({ authorization: `Bearer ${merchant.api_key}` })).status).toBe(200);
    const basic = Buffer.from(`${merchant.login}:${merchant.api_key}`).toString('base64');
    expect((await get({ authorization: `Basic ${basic}` })).status).toBe(200);
  });

  it('answers 401 RET401 with a Basic challenge for missing or wrong credentials', async () => {
    for (const headers of <Record<string, string>[]>[
      {},
      { authorization: 'Bearer rk_notakey000000000000000000000000000000' },
      { authorization: `Basic ${Buffer.from(`someone-else:${merchant.api_key}`).toString('base64')}` },
      { authorization: 'Token abc' },
    ]) {
      const r = await get(headers);
      expect(r.status).toBe(401);
      expect(r.json).toEqual({ code: 'RET401', message: 'Authentication required' });
      expect(r.headers.get('www-authenticate')).toBe('Basic realm="retain"');
    }
  });

  it('applies a disable (403 RET403) and a key rotation (old key 401) to the very next call', async () => {
    const m = await createMerchant();
    const repo = new MerchantsRepository(await testDb(), loadConfig('cli').cardKeys);
    // Warm any per-process state with the old key first: the change must apply to the next call.
    expect((await get({ authorization: `Bearer ${m.api_key}` })).status).toBe(200);
    const rotated = await repo.rotateKey(m.login);
    expect((await get({ authorization: `Bearer ${m.api_key}` })).status).toBe(401);
    expect((await get({ authorization: `Bearer ${rotated.api_key}` })).status).toBe(200);
    await repo.setDisabled(m.login, true);
    const r = await get({ authorization: `Bearer ${rotated.api_key}` });
    expect(r.status).toBe(403);
    expect(r.json.code).toBe('RET403');
    await repo.setDisabled(m.login, false);
    expect((await get({ authorization: `Bearer ${rotated.api_key}` })).status).toBe(200);
  });

  it('serves /v1, /v2 and the bare alias alike, and gives every call an X-Request-Id', async () => {
    const client = new ApiClient(api.url, merchant.api_key);
    for (const prefix of ['/v1', '/v2', '']) {
      const r = await client.request('GET', `${prefix}/retain/transactions`);
      expect(r.status).toBe(200);
      expect(r.headers.get('x-request-id')).toMatch(/^[0-9a-f]{32}$/);
    }
    const posted = await client.request('POST', '/v2/retain/transactions', { transactions: [txn()] });
    expect(posted.status).toBe(200);
  });
});
