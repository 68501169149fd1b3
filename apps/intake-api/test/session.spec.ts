import { loadConfig } from '@retain/config';
import { MerchantsRepository } from '@retain/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  closeTestDb,
  createMerchant,
  startApp,
  testDb,
  txn,
  type RunningApp,
  type TestMerchant,
} from '@retain/testing';

// decisions §14: the portal's session login, its cookie, expiry, logout and the X-Requested-With rule.
describe('portal session', () => {
  let api: RunningApp;
  let merchant: TestMerchant;
  let other: TestMerchant;

  beforeAll(async () => {
    api = await startApp('intake-api');
    merchant = await createMerchant();
    other = await createMerchant();
  });
  afterAll(async () => {
    await api.stop();
    await closeTestDb();
  });

  const call = async (method: string, path: string, headers: Record<string, string> = {}, body?: unknown) => {
    const r = await fetch(`${api.url}${path}`, {
      method,
      headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    return { status: r.status, headers: r.headers, text, json: text ? (JSON.parse(text) as any) : undefined };
  };

  /** Logs in and answers the cookie pair to send back (`cookie=<token>`). */
  const login = async (m: TestMerchant): Promise<string> => {
    const r = await call('POST', '/v1/retain/session', {}, { login: m.login, api_key: m.api_key });
    expect(r.status).toBe(204);
    const set = r.headers.get('set-cookie')!;
    expect(set).toMatch(/^cookie=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=\/$/);
    return set.split(';')[0]!;
  };

  const tokenHash = async (cookie: string): Promise<string> => {
    const { createHash } = await import('node:crypto');
    return createHash('sha256').update(cookie.slice('cookie='.length)).digest('hex');
  };

  it('logs in with login and API key: 204, an HttpOnly SameSite=Strict cookie, only its hash stored', async () => {
    const cookie = await login(merchant);
    const token = cookie.slice('cookie='.length);
    const db = await testDb();
    const rows: { token_hash: string }[] = await db.query(
      `SELECT token_hash FROM portal_sessions s JOIN merchants m ON m.id = s.merchant_id WHERE m.login = $1`,
      [merchant.login],
    );
    expect(rows.map((r) => r.token_hash)).toContain(await tokenHash(cookie));
    expect(rows.map((r) => r.token_hash)).not.toContain(token);
  });

  it('answers the same 401 RET401 for an unknown login and for a wrong key, and sets no cookie', async () => {
    const wrongKey = await call('POST', '/v1/retain/session', {}, { login: merchant.login, api_key: other.api_key });
    const unknownLogin = await call(
      'POST',
      '/v1/retain/session',
      {},
      { login: 'nobody-here', api_key: merchant.api_key },
    );
    const garbage = await call('POST', '/v1/retain/session', {}, { login: merchant.login, api_key: 'nope' });
    for (const r of [wrongKey, unknownLogin, garbage]) {
      expect(r.status).toBe(401);
      expect(r.json).toEqual({ code: 'RET401', message: 'Authentication required' });
      expect(r.headers.get('set-cookie')).toBeNull();
    }
    const missing = await call('POST', '/v1/retain/session', {}, { login: merchant.login });
    expect(missing.status).toBe(400);
    expect(missing.json).toEqual({ code: 'RET400', message: 'Invalid parameter: api_key' });
  });

  it('accepts the cookie in place of Authorization for GET, scoped to its own merchant', async () => {
    const submitted = txn();
    const post = await fetch(`${api.url}/v1/retain/transactions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${other.api_key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ transactions: [submitted] }),
    });
    expect(post.status).toBe(200);
    const cookie = await login(merchant);
    const list = await call('GET', '/v1/retain/transactions', { cookie });
    expect(list.status).toBe(200);
    expect(list.json.data).toEqual([]);
    const theirs = await call('GET', `/v1/retain/transactions/${String(submitted['id'])}`, { cookie });
    expect(theirs.status).toBe(404);
    expect(theirs.json.code).toBe('RET0404');
    const me = await call('GET', '/v1/retain/session', { cookie });
    expect(me.json).toEqual({
      login: merchant.login,
      merchant_vid: merchant.merchant_vid,
      authenticated_by: 'session',
    });
    const analytics = await call('GET', '/v1/retain/analytics', { cookie });
    expect(analytics.status).toBe(200);
    expect(analytics.json.currencies).toEqual([]);
  });

  it('refuses a cookie-authenticated write without X-Requested-With: retain-portal (403 RET403, nothing saved)', async () => {
    const cookie = await login(merchant);
    const t = txn();
    const refused = await call('POST', '/v1/retain/transactions', { cookie }, { transactions: [t] });
    expect(refused.status).toBe(403);
    expect(refused.json.code).toBe('RET403');
    const wrong = await call(
      'POST',
      '/v1/retain/transactions',
      { cookie, 'x-requested-with': 'XMLHttpRequest' },
      { transactions: [t] },
    );
    expect(wrong.status).toBe(403);
    expect((await call('GET', `/v1/retain/transactions/${String(t['id'])}`, { cookie })).status).toBe(404);
    const ok = await call(
      'POST',
      '/v1/retain/transactions',
      { cookie, 'x-requested-with': 'retain-portal' },
      { transactions: [t] },
    );
    expect(ok.status).toBe(200);
    expect((await call('GET', `/v1/retain/transactions/${String(t['id'])}`, { cookie })).status).toBe(200);
    const logoutWithout = await call('DELETE', '/v1/retain/session', { cookie });
    expect(logoutWithout.status).toBe(403);
    expect((await call('GET', '/v1/retain/session', { cookie })).status).toBe(200);
  });

  it('logout ends the session server-side and clears the cookie', async () => {
    const cookie = await login(merchant);
    const out = await call('DELETE', '/v1/retain/session', { cookie, 'x-requested-with': 'retain-portal' });
    expect(out.status).toBe(204);
    expect(out.headers.get('set-cookie')).toBe('cookie=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0');
    const after = await call('GET', '/v1/retain/transactions', { cookie });
    expect(after.status).toBe(401);
    expect(after.json).toEqual({ code: 'RET401', message: 'Authentication required' });
    const db = await testDb();
    const left = await db.query(`SELECT 1 FROM portal_sessions WHERE token_hash = $1`, [await tokenHash(cookie)]);
    expect(left).toHaveLength(0);
  });

  it('expires a session 30 minutes after its last request, and 12 hours after login however busy', async () => {
    const db = await testDb();
    const idle = await login(merchant);
    await db.query(`UPDATE portal_sessions SET last_seen_at = now() - interval '29 minutes' WHERE token_hash = $1`, [
      await tokenHash(idle),
    ]);
    expect((await call('GET', '/v1/retain/transactions', { cookie: idle })).status).toBe(200);
    // That request restarted the idle clock.
    const [seen]: { age: number }[] = await db.query(
      `SELECT extract(epoch FROM now() - last_seen_at)::float AS age FROM portal_sessions WHERE token_hash = $1`,
      [await tokenHash(idle)],
    );
    expect(seen!.age).toBeLessThan(60);
    await db.query(`UPDATE portal_sessions SET last_seen_at = now() - interval '31 minutes' WHERE token_hash = $1`, [
      await tokenHash(idle),
    ]);
    expect((await call('GET', '/v1/retain/transactions', { cookie: idle })).status).toBe(401);

    const old = await login(merchant);
    await db.query(
      `UPDATE portal_sessions SET created_at = now() - interval '11 hours 59 minutes' WHERE token_hash = $1`,
      [await tokenHash(old)],
    );
    expect((await call('GET', '/v1/retain/transactions', { cookie: old })).status).toBe(200);
    await db.query(
      `UPDATE portal_sessions SET created_at = now() - interval '12 hours 1 minute' WHERE token_hash = $1`,
      [await tokenHash(old)],
    );
    const expired = await call('GET', '/v1/retain/transactions', { cookie: old });
    expect(expired.status).toBe(401);
    expect(expired.json.code).toBe('RET401');
  });

  it('ends every session of a merchant when its API key is rotated', async () => {
    const m = await createMerchant();
    const cookie = await login(m);
    expect((await call('GET', '/v1/retain/transactions', { cookie })).status).toBe(200);
    await new MerchantsRepository(await testDb(), loadConfig('cli').cardKeys).rotateKey(m.login, true);
    expect((await call('GET', '/v1/retain/transactions', { cookie })).status).toBe(401);
  });

  it('a disabled merchant cannot log in (403 RET403) and its sessions stop working', async () => {
    const m = await createMerchant();
    const cookie = await login(m);
    const repo = new MerchantsRepository(await testDb(), loadConfig('cli').cardKeys);
    await repo.setDisabled(m.login, true);
    expect((await call('GET', '/v1/retain/transactions', { cookie })).status).toBe(403);
    const r = await call('POST', '/v1/retain/session', {}, { login: m.login, api_key: m.api_key });
    expect(r.status).toBe(403);
    expect(r.json.code).toBe('RET403');
  });

  it('refuses a login posted by an HTML form of another site (login CSRF): no cookie is set', async () => {
    // A page elsewhere can auto-submit a form to the login with the attacker's own credentials: the
    // victim's browser would keep the attacker's session, and what the victim then submits, the attacker sees.
    const form = new URLSearchParams({ login: merchant.login, api_key: merchant.api_key }).toString();
    for (const contentType of ['application/x-www-form-urlencoded', 'text/plain']) {
      const body =
        contentType === 'text/plain' ? JSON.stringify({ login: merchant.login, api_key: merchant.api_key }) : form;
      const r = await fetch(`${api.url}/v1/retain/session`, {
        method: 'POST',
        headers: { 'content-type': contentType },
        body,
      });
      expect(r.status).toBe(400);
      expect(((await r.json()) as { code: string }).code).toBe('RET400');
      expect(r.headers.get('set-cookie')).toBeNull();
    }
    const loginFrom = (site: string) =>
      call(
        'POST',
        '/v1/retain/session',
        { 'sec-fetch-site': site },
        { login: merchant.login, api_key: merchant.api_key },
      );
    // A browser names a request sent from another site (Sec-Fetch-Site): refused even as JSON.
    const cross = await loginFrom('cross-site');
    expect(cross.status).toBe(403);
    expect(cross.json.code).toBe('RET403');
    expect(cross.headers.get('set-cookie')).toBeNull();
    // The portal's own login (same origin) still works.
    expect((await loginFrom('same-origin')).status).toBe(204);
  });

  it('refuses a write sent by a browser from another site, whatever its credentials: 403 RET403, nothing changed', async () => {
    // Basic credentials a browser cached (the API's Basic challenge) go along with a form of another
    // site; SameSite does not cover them. Such a form could rotate the merchant's key.
    const m = await createMerchant();
    const basic = `Basic ${Buffer.from(`${m.login}:${m.api_key}`).toString('base64')}`;
    for (const site of ['cross-site', 'same-site']) {
      const r = await fetch(`${api.url}/v1/retain/merchant/api-key/rotate`, {
        method: 'POST',
        headers: { authorization: basic, 'sec-fetch-site': site, 'content-type': 'application/x-www-form-urlencoded' },
        body: '',
      });
      expect(r.status).toBe(403);
      expect(((await r.json()) as { code: string }).code).toBe('RET403');
    }
    // The key still works: nothing was rotated.
    expect((await call('GET', '/v1/retain/transactions', { authorization: basic })).status).toBe(200);
    // Reads from another site are not refused (a link opened from elsewhere), nor are non-browser clients.
    expect(
      (await call('GET', '/v1/retain/transactions', { authorization: basic, 'sec-fetch-site': 'cross-site' })).status,
    ).toBe(200);
    const t = txn();
    expect(
      (await call('POST', '/v1/retain/transactions', { authorization: basic }, { transactions: [t] })).status,
    ).toBe(200);
  });

  it('Authorization wins over a cookie, and a bad cookie with no Authorization is 401', async () => {
    expect((await call('GET', '/v1/retain/transactions', { cookie: 'cookie=not-a-session' })).status).toBe(401);
    const r = await call('GET', '/v1/retain/session', {
      cookie: 'cookie=not-a-session',
      authorization: `Bearer ${merchant.api_key}`,
    });
    expect(r.status).toBe(200);
    expect(r.json.authenticated_by).toBe('header');
  });

  it('refuses a request carrying two session cookies (one planted from a sibling subdomain): 401 RET401', async () => {
    // A sibling subdomain can set `cookie=<its token>; Domain=.example.com; Path=/v1/retain`: the browser then
    // sends it first, before the portal's own. Taking the first would authenticate the victim as the attacker.
    const victim = await login(merchant);
    const attacker = await login(other);
    for (const [path, headers] of [
      ['/v1/retain/session', { cookie: `${attacker}; ${victim}` }],
      [
        '/v1/retain/transactions',
        { cookie: `${victim}; theme=dark; ${attacker}`, 'x-requested-with': 'retain-portal' },
      ],
      // A nameless cookie whose value is `cookie=…` is sent as `cookie=…` too.
      ['/v1/retain/session', { cookie: `${attacker}; ${attacker}` }],
    ] as const) {
      const r = await call('GET', path, headers);
      expect({ path, status: r.status, json: r.json }).toEqual({
        path,
        status: 401,
        json: { code: 'RET401', message: 'Authentication required' },
      });
    }
    // Each alone still works, and other cookies beside it do not matter.
    expect((await call('GET', '/v1/retain/session', { cookie: `theme=dark; ${victim}` })).json.login).toBe(
      merchant.login,
    );
    // A write: refused before anything is looked at.
    const t = txn();
    const write = await call(
      'POST',
      '/v1/retain/transactions',
      { cookie: `${attacker}; ${victim}`, 'x-requested-with': 'retain-portal' },
      { transactions: [t] },
    );
    expect(write.status).toBe(401);
    expect((await call('GET', `/v1/retain/transactions/${String(t['id'])}`, { cookie: attacker })).status).toBe(404);
    // Logout ends every session the request names, ours included.
    const out = await call('DELETE', '/v1/retain/session', {
      cookie: `${attacker}; ${victim}`,
      'x-requested-with': 'retain-portal',
    });
    expect(out.status).toBe(204);
    expect((await call('GET', '/v1/retain/session', { cookie: victim })).status).toBe(401);
    expect((await call('GET', '/v1/retain/session', { cookie: attacker })).status).toBe(401);
  });

  it('a login racing a key rotation never leaves a session alive after it', async () => {
    const m = await createMerchant();
    const db = await testDb();
    const { Client } = await import('pg');
    const rotation = new Client({ connectionString: process.env['DATABASE_URL'] });
    await rotation.connect();
    try {
      // The rotation's statements (MerchantsRepository.rotateKey), held open: the keys revoked and the
      // sessions ended, not committed yet, while the old key logs in.
      await rotation.query('BEGIN');
      const [{ id }] = (await rotation.query(`SELECT id FROM merchants WHERE login = $1`, [m.login])).rows;
      await rotation.query(`UPDATE merchant_api_keys SET revoked_at = now() WHERE merchant_id = $1`, [id]);
      await rotation.query(`DELETE FROM portal_sessions WHERE merchant_id = $1`, [id]);
      const pending = call('POST', '/v1/retain/session', {}, { login: m.login, api_key: m.api_key });
      await new Promise((resolve) => setTimeout(resolve, 500));
      await rotation.query('COMMIT');
      const r = await pending;
      const cookie = r.headers.get('set-cookie')?.split(';')[0];
      const after = cookie ? (await call('GET', '/v1/retain/session', { cookie })).status : 401;
      expect({ login: r.status, sessionAfterRotation: after }).toEqual({ login: 401, sessionAfterRotation: 401 });
      const [{ n }] = await db.query(`SELECT count(*)::int AS n FROM portal_sessions WHERE merchant_id = $1`, [id]);
      expect(n).toBe(0);
    } finally {
      await rotation.end();
    }
  });

  it('a session opened before a merchant was disabled does not come back when it is enabled again', async () => {
    const m = await createMerchant();
    const cookie = await login(m);
    const repo = new MerchantsRepository(await testDb(), loadConfig('cli').cardKeys);
    await repo.setDisabled(m.login, true);
    expect((await call('GET', '/v1/retain/transactions', { cookie })).status).toBe(403);
    await repo.setDisabled(m.login, false);
    expect((await call('GET', '/v1/retain/transactions', { cookie })).status).toBe(401);
    // A fresh login works again.
    expect((await call('GET', '/v1/retain/transactions', { cookie: await login(m) })).status).toBe(200);
  });

  it('concurrent failed logins cannot pass the brake together: at most 10 of 40 are judged', async () => {
    const m = await createMerchant();
    const results = await Promise.all(
      Array.from({ length: 40 }, () => call('POST', '/v1/retain/session', {}, { login: m.login, api_key: 'rk_wrong' })),
    );
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 401).length).toBeLessThanOrEqual(10);
    expect(statuses.filter((s) => s !== 401 && s !== 429)).toEqual([]);
  });

  it('behind a trusted proxy (TRUST_PROXY) the brake keys on the client: another client can still log in', async () => {
    const proxied = await startApp('intake-api', { env: { TRUST_PROXY: '127.0.0.1' } });
    try {
      const m = await createMerchant();
      const from = (ip: string, apiKey: string) =>
        fetch(`${proxied.url}/v1/retain/session`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-forwarded-for': ip },
          body: JSON.stringify({ login: m.login, api_key: apiKey }),
        });
      for (let i = 0; i < 10; i++) expect((await from('203.0.113.5', 'rk_wrong')).status).toBe(401);
      expect((await from('203.0.113.5', m.api_key)).status).toBe(429);
      // The merchant, from its own address, is not locked out by someone else's failures.
      expect((await from('198.51.100.7', m.api_key)).status).toBe(204);
    } finally {
      await proxied.stop();
    }
  });

  it('brakes repeated failed logins for one login with 429 and Retry-After', async () => {
    const m = await createMerchant();
    for (let i = 0; i < 10; i++) {
      expect((await call('POST', '/v1/retain/session', {}, { login: m.login, api_key: 'rk_wrong' })).status).toBe(401);
    }
    const braked = await call('POST', '/v1/retain/session', {}, { login: m.login, api_key: m.api_key });
    expect(braked.status).toBe(429);
    expect(braked.json.code).toBe('RET429');
    expect(Number(braked.headers.get('retry-after'))).toBeGreaterThan(0);
  });
});
