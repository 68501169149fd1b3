import http from 'node:http';
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

  it('answers 401 before looking at a body it cannot read (empty, not JSON, duplicate keys, over 10 MiB)', async () => {
    const post = (path: string, headers: Record<string, string>, body?: string) =>
      fetch(`${api.url}/v1/retain/${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body,
      }).then(async (r) => ({
        status: r.status,
        headers: r.headers,
        json: (await r.json().catch(() => undefined)) as any,
      }));
    /**
     * A body announced over 10 MiB: the answer comes from the headers, before the body is read, and
     * the server then closes the connection; a client still writing the 10 MiB would fail on the
     * closed socket (EPIPE) before it reads the answer, so only the first bytes are sent here.
     */
    const postOversized = (path: string, headers: Record<string, string>) =>
      new Promise<{ status: number; headers: Headers; json: any }>((resolve, reject) => {
        const req = http.request(`${api.url}/v1/retain/${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-length': String(10 * 1024 * 1024 + 1), ...headers },
        });
        req.on('response', (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => (text += chunk));
          res.on('end', () => {
            req.destroy();
            resolve({
              status: res.statusCode ?? 0,
              headers: new Headers(res.headers as Record<string, string>),
              json: JSON.parse(text),
            });
          });
        });
        req.on('error', reject);
        req.write('x'.repeat(1024));
      });
    const wrong = { authorization: 'Bearer rk_notakey000000000000000000000000000000' };
    for (const [path, headers, body] of <[string, Record<string, string>, string | null | undefined][]>[
      ['transactions', {}, undefined],
      ['transactions', {}, 'not json'],
      ['transactions', wrong, '{"transactions":[],"transactions":[]}'],
      ['refunds', {}, undefined],
      ['transactions', wrong, null], // over 10 MiB
    ]) {
      const r = body === null ? await postOversized(path, headers) : await post(path, headers, body);
      expect([path, r.status, r.json]).toEqual([path, 401, { code: 'RET401', message: 'Authentication required' }]);
      expect(r.headers.get('www-authenticate')).toBe('Basic realm="retain"');
    }
    // With good credentials the body's own error stands; the login call (no credentials) keeps its 400.
    const good = await post('transactions', { authorization: `Bearer ${merchant.api_key}` }, 'not json');
    expect([good.status, good.json.code]).toEqual([400, 'RET400']);
    const login = await post('session', {}, 'not json');
    expect([login.status, login.json.code]).toEqual([400, 'RET400']);
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
