import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  WebhookReceiver,
  closeTestDb,
  createMerchant,
  startApp,
  testDb,
  waitFor,
  type RunningApp,
  type TestMerchant,
} from '@retain/testing';

// What the portal's settings pages use, through the API: key and secret rotation, the webhook URL,
// a test push, the push delivery log and the replay of a dead push; and the security headers.
describe('merchant settings and the push delivery log', () => {
  let api: RunningApp;
  let dispatcher: RunningApp;
  let receiver: WebhookReceiver;
  let merchant: TestMerchant;

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    const env = { WEBHOOK_RETRY_SCHEDULE: '50ms,50ms', SCHEDULER_TICK: '100ms' };
    [api, dispatcher] = await Promise.all([startApp('intake-api', { env }), startApp('webhook-dispatcher', { env })]);
    merchant = await createMerchant(receiver.url);
  });
  afterAll(async () => {
    await Promise.all([api.stop(), dispatcher.stop()]);
    await receiver.stop();
    await closeTestDb();
  });

  const call = async (method: string, path: string, headers: Record<string, string>, body?: unknown) => {
    const r = await fetch(`${api.url}${path}`, {
      method,
      headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    return { status: r.status, headers: r.headers, json: text ? (JSON.parse(text) as any) : undefined };
  };
  const bearer = (m: TestMerchant) => ({ authorization: `Bearer ${m.api_key}` });
  const portal = async (m: TestMerchant) => {
    const r = await call('POST', '/v1/retain/session', {}, { login: m.login, api_key: m.api_key });
    expect(r.status).toBe(204);
    return { cookie: r.headers.get('set-cookie')!.split(';')[0]!, 'x-requested-with': 'retain-portal' };
  };

  it('reads and sets the webhook URL; a bad URL is 400 and changes nothing', async () => {
    const m = await createMerchant('https://example.com/a');
    expect((await call('GET', '/v1/retain/merchant/webhook', bearer(m))).json).toEqual({
      url: 'https://example.com/a',
    });
    for (const url of ['ftp://example.com/x', 'not a url', 'https://user:pw@example.com/', 42]) {
      const r = await call('PUT', '/v1/retain/merchant/webhook', bearer(m), { url });
      expect(r.status).toBe(400);
      expect(r.json).toEqual({ code: 'RET400', message: 'Invalid parameter: url' });
    }
    expect((await call('GET', '/v1/retain/merchant/webhook', bearer(m))).json).toEqual({
      url: 'https://example.com/a',
    });
    const set = await call('PUT', '/v1/retain/merchant/webhook', bearer(m), { url: 'https://example.com/b' });
    expect(set.json).toEqual({ url: 'https://example.com/b' });
    expect((await call('GET', '/v1/retain/merchant', bearer(m))).json).toEqual({
      login: m.login,
      merchant_vid: m.merchant_vid,
      webhook_url: 'https://example.com/b',
    });
  });

  it('rotates the API key: the new key answered once, the old one and every portal session end', async () => {
    const m = await createMerchant();
    const session = await portal(m);
    const r = await call('POST', '/v1/retain/merchant/api-key/rotate', bearer(m));
    expect(r.status).toBe(200);
    expect(r.json.api_key).toMatch(/^rk_[A-Za-z0-9_-]{40}$/);
    expect(r.headers.get('cache-control')).toBe('no-store');
    expect((await call('GET', '/v1/retain/transactions', bearer(m))).status).toBe(401);
    expect((await call('GET', '/v1/retain/transactions', { cookie: session.cookie })).status).toBe(401);
    expect((await call('GET', '/v1/retain/transactions', { authorization: `Bearer ${r.json.api_key}` })).status).toBe(
      200,
    );
    // From the portal: the session that rotated gets its cookie cleared.
    const fresh = { ...m, api_key: r.json.api_key as string };
    const s2 = await portal(fresh);
    const viaPortal = await call('POST', '/v1/retain/merchant/api-key/rotate', s2);
    expect(viaPortal.status).toBe(200);
    expect(viaPortal.headers.get('set-cookie')).toBe('cookie=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0');
    expect((await call('POST', '/v1/retain/merchant/api-key/rotate', { cookie: s2.cookie })).status).toBe(401);
  });

  it('rotates the webhook secret (portal write needs X-Requested-With), signs the next push with it, sends a test push', async () => {
    const session = await portal(merchant);
    const refused = await call('POST', '/v1/retain/merchant/webhook-secret/rotate', { cookie: session.cookie });
    expect(refused.status).toBe(403);
    expect(refused.json.code).toBe('RET403');
    const r = await call('POST', '/v1/retain/merchant/webhook-secret/rotate', session);
    expect(r.status).toBe(200);
    expect(r.json.webhook_secret).toMatch(/^whsec_[A-Za-z0-9+/=]{44}$/);
    expect(r.json.webhook_secret).not.toBe(merchant.webhook_secret);
    const sent = await call('POST', '/v1/retain/merchant/webhook/test', session);
    expect(sent.status).toBe(202);
    const messageId = sent.json.message_id as string;
    expect(messageId).toMatch(/^[0-9A-Za-z]{27}$/);
    const push = await waitFor(() => receiver.received.find((p) => p.body.header['message_id'] === messageId), {
      what: 'the test push',
    });
    expect(push.body.header['event_name']).toBe('test');
    expect(() =>
      new Webhook(r.json.webhook_secret).verify(push.raw, push.headers as Record<string, string>),
    ).not.toThrow();
    expect(() =>
      new Webhook(merchant.webhook_secret).verify(push.raw, push.headers as Record<string, string>),
    ).toThrow();
    const logged = await waitFor(async () => {
      const one = await call('GET', `/v1/retain/webhook-messages/${messageId}`, { cookie: session.cookie });
      return one.json.status === 'delivered' ? one : null;
    });
    expect(logged.json.attempts).toEqual([
      expect.objectContaining({ attempt: 1, status_code: 202, url: receiver.url, error: null }),
    ]);
  });

  it('lists pushes newest first and replays a dead one with the same message_id', async () => {
    const m = await createMerchant(receiver.url);
    const session = await portal(m);
    receiver.status = 500;
    const first = (await call('POST', '/v1/retain/merchant/webhook/test', session)).json.message_id as string;
    const dead = await waitFor(async () => {
      const one = await call('GET', `/v1/retain/webhook-messages/${first}`, bearer(m));
      return one.json.status === 'dead' ? one.json : null;
    });
    expect(dead.attempts.map((a: any) => a.status_code)).toEqual([500, 500, 500]);
    const list = await call('GET', '/v1/retain/webhook-messages?status=dead', { cookie: session.cookie });
    expect(list.json.data.map((x: any) => x.message_id)).toEqual([first]);
    receiver.status = 202;
    const replayRefused = await call('POST', `/v1/retain/webhook-messages/${first}/replay`, { cookie: session.cookie });
    expect(replayRefused.status).toBe(403);
    const replay = await call('POST', `/v1/retain/webhook-messages/${first}/replay`, session);
    expect(replay.status).toBe(202);
    expect(replay.json).toEqual({ message_id: first, status: 'pending' });
    await waitFor(async () => {
      const one = await call('GET', `/v1/retain/webhook-messages/${first}`, bearer(m));
      return one.json.status === 'delivered';
    });
    expect(receiver.received.filter((p) => p.body.header['message_id'] === first).at(-1)!.answered).toBe(202);
    // Another merchant's message is not there.
    expect((await call('GET', `/v1/retain/webhook-messages/${first}`, bearer(merchant))).status).toBe(404);
    expect((await call('POST', `/v1/retain/webhook-messages/${first}/replay`, bearer(merchant))).status).toBe(404);
    const mine = await call('GET', '/v1/retain/webhook-messages?limit=100', bearer(merchant));
    expect(mine.json.data.map((x: any) => x.message_id)).not.toContain(first);
  });

  it('answers with security headers: closed CSP and no-store on the API, the portal CSP under /portal/', async () => {
    const r = await call('GET', '/v1/retain/transactions', bearer(merchant));
    expect(r.headers.get('content-security-policy')).toBe("default-src 'none'; frame-ancestors 'none'");
    expect(r.headers.get('cache-control')).toBe('no-store');
    expect(r.headers.get('x-content-type-options')).toBe('nosniff');
    expect(r.headers.get('x-frame-options')).toBe('DENY');
    expect(r.headers.get('referrer-policy')).toBe('no-referrer');
    const p = await fetch(`${api.url}/portal/`);
    const csp = p.headers.get('content-security-policy')!;
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).toContain("frame-ancestors 'none'");
  });
});

// A test push is made on the merchant's request, each one retried up to 8 times, its every answer and error
// shown in the push log: unlimited, a merchant could probe hosts and ports from the dispatcher's network or flood
// a third party. No dispatcher here: the pushes stay pending.
describe('test pushes are limited per merchant', () => {
  let api: RunningApp;

  beforeAll(async () => {
    api = await startApp('intake-api');
  });
  afterAll(async () => {
    await api.stop();
    await closeTestDb();
  });

  const send = async (m: TestMerchant) => {
    const r = await fetch(`${api.url}/v1/retain/merchant/webhook/test`, {
      method: 'POST',
      headers: { authorization: `Bearer ${m.api_key}` },
    });
    const text = await r.text();
    return { status: r.status, headers: r.headers, json: text ? (JSON.parse(text) as any) : undefined };
  };
  const testPushes = async (m: TestMerchant): Promise<{ message_id: string; status: string }[]> =>
    (await testDb()).query(
      `SELECT w.message_id, w.status FROM webhook_messages w JOIN merchants m ON m.id = w.merchant_id
        WHERE m.login = $1 AND w.event_name = 'test' ORDER BY w.message_id`,
      [m.login],
    );

  it('the 11th while 10 are pending answers 429 RET429 with Retry-After and makes no push; another merchant is unaffected', async () => {
    const m = await createMerchant('https://example.com/hooks');
    const other = await createMerchant('https://example.com/hooks');
    for (let i = 0; i < 10; i++) expect((await send(m)).status).toBe(202);
    const refused = await send(m);
    expect({ status: refused.status, json: refused.json }).toEqual({
      status: 429,
      json: { code: 'RET429', message: 'Too many test pushes, try again later' },
    });
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(3600);
    expect(await testPushes(m)).toHaveLength(10);
    expect((await send(other)).status).toBe(202);
    expect(await testPushes(other)).toHaveLength(1);
  });

  it('a test push frees its place an hour after it ended; a replay of one counts as one', async () => {
    const m = await createMerchant('https://example.com/hooks');
    for (let i = 0; i < 10; i++) expect((await send(m)).status).toBe(202);
    const db = await testDb();
    const [first, second] = await testPushes(m);
    // Delivered just now: a responsive receiver cannot be flooded, the push still counts for an hour.
    await db.query(`UPDATE webhook_messages SET status = 'delivered', delivered_at = now() WHERE message_id = $1`, [
      first!.message_id,
    ]);
    expect((await send(m)).status).toBe(429);
    // Its replay (the merchant's API) would send it again: refused the same way, the push left as it was.
    const replay = await fetch(`${api.url}/v1/retain/webhook-messages/${first!.message_id}/replay`, {
      method: 'POST',
      headers: { authorization: `Bearer ${m.api_key}` },
    });
    expect(replay.status).toBe(429);
    expect(await replay.json()).toEqual({ code: 'RET429', message: 'Too many test pushes, try again later' });
    expect((await testPushes(m))[0]!.status).toBe('delivered');
    // Ended over an hour ago: its place is free again, for one push.
    await db.query(
      `UPDATE webhook_messages SET status = 'dead', dead_at = now() - interval '61 minutes',
              updated_at = now() - interval '61 minutes' WHERE message_id = $1`,
      [second!.message_id],
    );
    expect((await send(m)).status).toBe(202);
    expect((await send(m)).status).toBe(429);
    expect(await testPushes(m)).toHaveLength(11);
    // Still pending but last sent over an hour ago (a receiver still broken, its next retry hours away): a
    // merchant fixing its endpoint can test it again, never locked out for the whole retry schedule.
    await db.query(
      `UPDATE webhook_messages SET status = 'pending', next_attempt_at = now() + interval '5 hours',
              updated_at = now() - interval '61 minutes' WHERE message_id = $1`,
      [first!.message_id],
    );
    expect((await send(m)).status).toBe(202);
  });

  it('concurrent calls, as from several intake-api replicas, cannot pass the limit together', async () => {
    const m = await createMerchant('https://example.com/hooks');
    const second = await startApp('intake-api');
    try {
      const results = await Promise.all(
        Array.from({ length: 24 }, (_, i) =>
          fetch(`${(i % 2 ? second : api).url}/v1/retain/merchant/webhook/test`, {
            method: 'POST',
            headers: { authorization: `Bearer ${m.api_key}` },
          }).then((r) => r.status),
        ),
      );
      expect(results.filter((s) => s === 202)).toHaveLength(10);
      expect(results.filter((s) => s !== 202 && s !== 429)).toEqual([]);
      expect(await testPushes(m)).toHaveLength(10);
    } finally {
      await second.stop();
    }
  });
});
