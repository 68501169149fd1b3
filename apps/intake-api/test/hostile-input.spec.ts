import net from 'node:net';
import { parseJsonStrictly } from '@retain/domain';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApiClient,
  closeTestDb,
  createMerchant,
  startApp,
  testDb,
  txn,
  uniqueId,
  type RunningApp,
  type TestMerchant,
} from '@retain/testing';

const PAN = '4111111111111111';

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  raw: string;
}

/** Sends bytes on a fresh socket and reads everything until the server closes it (or `waitMs`). */
function rawExchange(url: string, payload: string | Buffer, waitMs = 10_000): Promise<RawResponse> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => socket.write(payload));
    let raw = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no close within ${waitMs} ms; got ${JSON.stringify(raw.slice(0, 300))}`));
    }, waitMs);
    socket.on('data', (c: Buffer) => {
      raw += c.toString('latin1');
      // One complete response is enough: the server may keep the socket open.
      const head = raw.indexOf('\r\n\r\n');
      const len = /content-length:\s*(\d+)/i.exec(raw.slice(0, head))?.[1];
      if (head >= 0 && len !== undefined && raw.length >= head + 4 + Number(len)) socket.end();
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(parseRaw(raw));
    });
  });
}

function parseRaw(raw: string): RawResponse {
  const head = raw.indexOf('\r\n\r\n');
  const lines = raw.slice(0, head < 0 ? raw.length : head).split('\r\n');
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(lines[0] ?? '')?.[1] ?? 0);
  const headers: Record<string, string> = {};
  for (const l of lines.slice(1)) {
    const i = l.indexOf(':');
    if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  const len = Number(headers['content-length'] ?? '0');
  const body = head < 0 ? '' : raw.slice(head + 4, head + 4 + len);
  return { status, headers, body, raw };
}

function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_r, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** The error shape every failure answers with, and never the card number. */
function expectErrorShape(r: { status: number; headers: Record<string, string>; body: string; raw: string }): void {
  expect(r.status, r.raw.slice(0, 300)).toBeGreaterThanOrEqual(400);
  expect(r.status).toBeLessThan(500);
  const json = JSON.parse(r.body);
  expect(Object.keys(json).sort()).toEqual(['code', 'message']);
  expect(json.code).toMatch(/^RET\d+$/);
  expect(r.headers['x-request-id']).toMatch(/^[0-9a-f]{32}$/);
  expect(r.raw).not.toContain(PAN);
}

describe('hostile input (issue 9)', () => {
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

  const savedIds = async (ids: string[]): Promise<string[]> =>
    (
      await (
        await testDb()
      ).query(`SELECT merchant_txn_id FROM transactions WHERE merchant_txn_id = ANY($1::text[]) ORDER BY 1`, [ids])
    ).map((r: { merchant_txn_id: string }) => r.merchant_txn_id);

  it('rejects only the items with NUL or unpaired surrogates (any field, nested, keys) and saves the rest', async () => {
    const good = [txn(), txn()];
    const bad = [
      txn({ metadata: { plan: 'a\u0000b' } }),
      txn({ account: { id: `acct_${uniqueId()}`, email: 'x\ud800@example.com' } }),
      txn({ metadata: { ['k\udc00']: 'v' } }),
      txn({ subscription: { id: `sub\u0000${uniqueId()}` } }),
      txn({ division_number: 'd\ud83d' }),
      txn({ extra: { deep: ['\u0000'] } }),
    ];
    (bad[1]!['payment_method'] as any).billing_address.line1 = 'x\u0000';
    const r = await client.submit([good[0], ...bad, good[1]]);
    expect(r.status).toBe(207);
    expect(r.json.success_count).toBe(2);
    expect(r.json.error_count).toBe(bad.length);
    expect(r.json.rejected.map((e: any) => e.id)).toEqual(bad.map((t) => t['id']));
    for (const e of r.json.rejected) expect(e.errors.map((x: any) => x.code)).toContain('RET009');
    const all = [...good, ...bad].map((t) => t['id'] as string);
    expect(await savedIds(all)).toEqual(good.map((t) => t['id']).sort());
  });

  it('names an item by its index when its id itself cannot be stored', async () => {
    const good = txn();
    const r = await client.submit([good, txn({ id: 'bad\u0000id' })]);
    expect(r.status).toBe(207);
    expect(r.json.rejected).toEqual([
      { id: 'transactions[1]', errors: [{ code: 'RET009', message: expect.stringContaining('id') }] },
    ]);
  });

  it('rejects an amount below one minor unit and dates outside years 0001-9999 per item', async () => {
    const good = txn();
    const bad = [
      txn({ amount: 1e-25 }),
      txn({ timestamp: '0000-06-01T00:00:00Z' }),
      txn({ timestamp: '0001-01-01T00:30:00+01:00' }),
      txn({ timestamp: '9999-12-31T23:30:00-01:00' }),
    ];
    const r = await client.submit([good, ...bad]);
    expect(r.status).toBe(207);
    expect(r.json.rejected.map((e: any) => [e.id, e.errors.map((x: any) => x.code)])).toEqual(
      bad.map((t) => [t['id'], ['RET009']]),
    );
    expect(await savedIds([good, ...bad].map((t) => t['id'] as string))).toEqual([good['id']]);
  });

  it('refunds: a bad id or an amount below one minor unit is RET009 for that item, no stop is created', async () => {
    const a = txn();
    const b = txn();
    expect((await client.submit([a, b])).status).toBe(200);
    const r = await client.request('POST', '/v1/retain/refunds', {
      refunds: [{ id: 'x\u0000' }, { id: a['id'], amount: 1e-25 }, { id: '\udc00' }, { id: b['id'] }],
    });
    expect(r.status).toBe(207);
    expect(r.json.message).toBe('1 refunds received for processing');
    expect(r.json.rejected.map((e: any) => [e.id, e.errors.map((x: any) => x.code)])).toEqual([
      ['refunds[0]', ['RET009']],
      [a['id'], ['RET009']],
      ['refunds[2]', ['RET009']],
    ]);
    const rows = await (
      await testDb()
    ).query(`SELECT merchant_txn_id, status FROM transactions WHERE merchant_txn_id = ANY($1::text[]) ORDER BY 1`, [
      [a['id'], b['id']],
    ]);
    const status = Object.fromEntries(rows.map((x: any) => [x.merchant_txn_id, x.status]));
    expect(status[a['id'] as string]).toBe('Failed');
    expect(status[b['id'] as string]).not.toBe('Failed');
  });

  it('answers 400 RET400 for NUL or broken text in query and path parameters', async () => {
    for (const path of [
      '/v1/retain/transactions/a%00b',
      '/v1/retain/refunds/a%00b',
      '/v1/retain/transactions?account_id=a%00b',
      '/v1/retain/transactions?status=Failed%00',
      '/v1/retain/transactions?starting_after=%00',
      '/v1/retain/refunds?starting_after=%00',
      '/v1/retain/transactions/abc?related=%00',
      // A surrogate cannot be percent-encoded (not valid UTF-8): in a path it is a bad URL.
      '/v1/retain/transactions/a%ED%A0%80',
    ]) {
      const r = await client.request('GET', path);
      expect(r.status, path).toBe(400);
      expect(r.json?.code, path).toBe('RET400');
      expect(r.json.message).toMatch(/^Invalid parameter: /);
    }
  });

  it('never names a parameter or key that could hold a card number (decisions §10)', async () => {
    // The card number's digits, in whatever the message wraps them. Soft: every entry point is reported.
    const expectNoCard = (message: string, what: string): void => {
      expect.soft(message.replace(/\D/g, ''), what).not.toContain(PAN);
    };
    const dotted = PAN.replace(/(\d{4})(?!$)/g, '$1.');
    // A query parameter nobody knows: `query` instead of its name.
    for (const path of [
      `/v1/retain/analytics?${PAN}=1`,
      `/v1/retain/analytics?x${PAN}=1`,
      `/v1/retain/analytics?${dotted}=1`,
      `/v1/retain/webhook-messages?${PAN}=1`,
      `/v1/retain/webhook-messages?x_${PAN.slice(0, 8)}_${PAN.slice(8)}=1`,
      `/v1/retain/transactions?x${PAN}=%00`,
    ]) {
      const r = await client.request('GET', path);
      expect(r.status, path).toBe(400);
      expect.soft(r.json, path).toEqual({ code: 'RET400', message: 'Invalid parameter: query' });
    }
    // A tunable of an experiment variant.
    const experiment = await client.request('POST', '/v1/retain/experiments', {
      name: 'card-named config',
      holdout_share: 0.1,
      variants: [{ name: 'a', policy_version: 'adaptive-2026-11', config: { [`x${PAN}`]: 1 } }],
    });
    expect(experiment.status).toBe(400);
    expect(Object.keys(experiment.json).sort()).toEqual(['code', 'message']);
    expect(experiment.json.code).toBe('RET400');
    expect.soft(experiment.json.message).toMatch(/^Invalid parameter: variants\[0\]\.config key /);
    expectNoCard(experiment.json.message, 'experiment');
    // Keys inside a transaction item (unknown field, metadata) and a refund item.
    const good = txn();
    const bad = [
      txn({ extra: { [`x${PAN}`]: 'a\u0000' } }),
      txn({ metadata: { [dotted]: 5 } }),
      txn({ metadata: { [`x_${PAN}`]: 'a\u0000' } }),
    ];
    const submitted = await client.submit([good, ...bad]);
    expect(submitted.status).toBe(207);
    expect(submitted.json.rejected.map((e: any) => e.id)).toEqual(bad.map((t) => t['id']));
    for (const e of submitted.json.rejected)
      for (const x of e.errors) {
        expect.soft(x.code).toBe('RET009');
        expectNoCard(x.message, e.id);
      }
    expect(await savedIds([good, ...bad].map((t) => t['id'] as string))).toEqual([good['id']]);
    const refund = await client.request('POST', '/v1/retain/refunds', {
      refunds: [{ id: good['id'], [`x${PAN}`]: '\u0000' }],
    });
    expect(refund.status).toBe(207);
    expect(refund.json.rejected[0].errors[0].code).toBe('RET009');
    expectNoCard(refund.json.rejected[0].errors[0].message, 'refund');
  });

  it('refuses an experiment name Postgres cannot store (NUL, unpaired surrogate) with 400 RET400, storing nothing', async () => {
    const variants = [
      { name: 'a', policy_version: 'adaptive-2026-11' },
      { name: 'b', policy_version: 'utc-heuristics-2026-10' },
    ];
    for (const name of ['a\u0000b', 'a\ud800b', '\udc00']) {
      const r = await client.request('POST', '/v1/retain/experiments', { name, variants });
      expect.soft(r.status, JSON.stringify(name)).toBe(400);
      expect.soft(r.json?.code, JSON.stringify(name)).toBe('RET400');
      expect.soft(r.json?.message, JSON.stringify(name)).toMatch(/^Invalid parameter: name \(/);
    }
    const list = await client.request('GET', '/v1/retain/experiments');
    expect(list.status).toBe(200);
    expect(list.json.data).toEqual([]);
  });

  it('refuses a variant tunable outside its range (a window of a billion days, an hour of 99) with 400 naming it and the range, storing nothing', async () => {
    const other = { name: 'b', policy_version: 'utc-heuristics-2026-10' };
    for (const [config, field, range] of [
      [{ windowDays: 1e9 }, 'windowDays', /from 1 to 60/],
      [{ windowDays: 0 }, 'windowDays', /from 1 to 60/],
      [{ maxAttempts: 2.5 }, 'maxAttempts', /whole number from 0 to 20/],
      [{ attemptDeadlineDays: [1, 2, 1e12] }, 'attemptDeadlineDays', /list .* from 0 to 60/],
      [{ waitCostPerDay: 3 }, 'waitCostPerDay', /from 0 to 1/],
      [{ budgetByClass: { funds: 1000 } }, 'budgetByClass', /whole number from 0 to 20/],
    ] as const) {
      const r = await client.request('POST', '/v1/retain/experiments', {
        name: 'out of range',
        variants: [{ name: 'a', policy_version: 'adaptive-2026-11', config }, other],
      });
      expect.soft(r.status, field).toBe(400);
      expect.soft(r.json?.code, field).toBe('RET400');
      expect.soft(r.json?.message, field).toMatch(`Invalid parameter: variants[0].config.${field} (`);
      expect.soft(r.json?.message, field).toMatch(range);
    }
    const hour = await client.request('POST', '/v1/retain/experiments', {
      name: 'out of range',
      variants: [{ name: 'a', policy_version: 'utc-heuristics-2026-10', config: { attemptHourUtc: 99 } }, other],
    });
    expect
      .soft(hour.json?.message)
      .toMatch(/^Invalid parameter: variants\[0\]\.config\.attemptHourUtc \(.*from 0 to 23/);
    const list = await client.request('GET', '/v1/retain/experiments');
    expect(list.json.data).toEqual([]);
  });

  it('reads back ids of 101 to 128 characters (the spec limit), unicode ones too', async () => {
    const ids = [
      `${uniqueId()}_`.padEnd(101, 'x'),
      `${uniqueId()}_`.padEnd(128, 'y'),
      `${uniqueId()}_`.padEnd(128, 'é'),
      // 128 characters outside the Basic Multilingual Plane (256 UTF-16 code units, 4 UTF-8 bytes each).
      (() => {
        const prefix = `${uniqueId()}_`;
        return prefix + '\u{1F600}'.repeat(128 - prefix.length);
      })(),
    ];
    expect((await client.submit(ids.map((id) => txn({ id })))).status).toBe(200);
    for (const id of ids) {
      const r = await client.request('GET', `/v1/retain/transactions/${encodeURIComponent(id)}`);
      expect(r.status, `${[...id].length} characters`).toBe(200);
      expect(r.json.data[0].id).toBe(id);
      const refunds = await client.request('GET', `/v1/retain/refunds/${encodeURIComponent(id)}`);
      expect(refunds.status).toBe(200);
      // The push log filters by the same ids (a limit in characters, not UTF-16 code units).
      const pushes = await client.request(
        'GET',
        `/v1/retain/webhook-messages?transaction_id=${encodeURIComponent(id)}`,
      );
      expect(pushes.status, `${[...id].length} characters`).toBe(200);
    }
    const tooLongFilter = await client.request('GET', `/v1/retain/webhook-messages?transaction_id=${'z'.repeat(129)}`);
    expect(tooLongFilter.json).toEqual({ code: 'RET400', message: 'Invalid parameter: transaction_id' });
    const tooLong = await client.request('GET', `/v1/retain/transactions/${'z'.repeat(129)}`);
    expect(tooLong.status).toBe(404);
    expect(tooLong.json).toEqual({ code: 'RET0404', message: 'No matching results found' });
    const wayTooLong = await client.request('GET', `/v1/retain/transactions/${'z'.repeat(5000)}`);
    expect(wayTooLong.status).toBe(404);
    expect(wayTooLong.json.code).toBe('RET0404');
  });

  it('answers a malformed URL with {code, message} and X-Request-Id, never echoing it (no auth needed)', async () => {
    for (const path of [
      `/v1/retain/transactions/${PAN}%E0%A4%A`,
      `/v1/retain/transactions/${PAN}%`,
      `/v1/retain/refunds/${PAN}%ZZ`,
    ]) {
      const r = await rawExchange(api.url, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      expect(r.status, path).toBe(400);
      expectErrorShape(r);
    }
  });

  it('answers broken framing, oversized headers and garbage with {code, message}, X-Request-Id and no echo', async () => {
    const cases: [string, string, number][] = [
      [
        'bad chunk',
        `POST /v1/retain/transactions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz${PAN}\r\n`,
        400,
      ],
      [
        'header too large',
        `GET /v1/retain/transactions HTTP/1.1\r\nHost: x\r\nX-Card: ${PAN.repeat(2000)}\r\n\r\n`,
        431,
      ],
      ['not HTTP', `HELLO ${PAN}\r\n\r\n`, 400],
      [
        'both lengths',
        `POST /v1/retain/transactions HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
        400,
      ],
    ];
    for (const [what, payload, status] of cases) {
      const r = await rawExchange(api.url, payload);
      expect(r.status, what).toBe(status);
      expectErrorShape(r);
    }
  });

  it('answers bad JSON, a wrong content type and a body too large in the error shape, never echoing the body', async () => {
    const post = (body: string, contentType: string | null, length = Buffer.byteLength(body)) =>
      rawExchange(
        api.url,
        `POST /v1/retain/transactions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${merchant.api_key}\r\n` +
          (contentType === null ? '' : `Content-Type: ${contentType}\r\n`) +
          `Content-Length: ${length}\r\nConnection: close\r\n\r\n${body}`,
      );
    for (const [body, type] of [
      [`{"transactions":[${PAN}`, 'application/json'],
      [`{"transactions":["${PAN}"]}x`, 'application/json'],
      [`{"transactions":[{"id":"${PAN}"}]}`, 'text/plain'],
      [`transactions=${PAN}`, 'application/x-www-form-urlencoded'],
      [`{"transactions":[{"id":"${PAN}"}]}`, 'application/octet-stream'],
      [`{"transactions":[{"id":"${PAN}"}]}`, null],
    ] as const) {
      const r = await post(body, type);
      expect(r.status, `${type} ${body}`).toBe(400);
      expectErrorShape(r);
      expect(JSON.parse(r.body)).toEqual({ code: 'RET400', message: 'Invalid parameter: transactions' });
    }
    // Over the 10 MiB limit by its Content-Length: answered before the body is read.
    const big = await post(`{"transactions":[{"id":"${PAN}"`, 'application/json', 20 * 1024 * 1024);
    expect(big.status).toBe(413);
    expectErrorShape({ ...big, status: 400 });
    expect(JSON.parse(big.body).code).toBe('RET413');
  });

  it('refuses "Bearer <key> <junk>" with 401 RET401', async () => {
    for (const authorization of [`Bearer ${merchant.api_key} junk`, `Bearer ${merchant.api_key}\tx`]) {
      const r = await client.request('GET', '/v1/retain/transactions', undefined, { authorization });
      expect(r.status, authorization).toBe(401);
      expect(r.json).toEqual({ code: 'RET401', message: 'Authentication required' });
    }
    expect((await client.request('GET', '/v1/retain/transactions')).status).toBe(200);
  });

  it('refuses a body with a duplicate JSON key (anywhere) with 400 RET400 and saves nothing', async () => {
    const t = txn();
    const json = JSON.stringify({ transactions: [t] });
    for (const body of [
      json.replace('"amount":19.99', '"amount":19.99,"amount":0.01'),
      json.replace('"plan":"gold"', '"plan":"gold","\\u0070lan":"silver"'),
      `{"transactions":[],${json.slice(1)}`,
    ]) {
      const r = await client.request('POST', '/v1/retain/transactions', body);
      expect(r.status).toBe(400);
      expect(r.json).toEqual({ code: 'RET400', message: 'Invalid parameter: transactions (duplicate key in JSON)' });
    }
    const refund = await client.request('POST', '/v1/retain/refunds', '{"refunds":[{"id":"a","id":"b"}]}');
    expect(refund.status).toBe(400);
    expect(refund.json).toEqual({ code: 'RET400', message: 'Invalid parameter: refunds (duplicate key in JSON)' });
    // Any other JSON body is named as the body, not as transactions it does not hold.
    for (const [method, path] of [
      ['POST', '/v1/retain/session'],
      ['POST', '/v1/retain/experiments'],
      ['PUT', '/v1/retain/merchant/webhook'],
    ] as const) {
      const other = await client.request(method, path, '{"login":"a","login":"b","api_key":"c"}');
      expect(other.status, path).toBe(400);
      expect(other.json, path).toEqual({ code: 'RET400', message: 'Invalid parameter: body (duplicate key in JSON)' });
    }
    expect(await savedIds([t['id'] as string])).toEqual([]);
    // The same keys in different objects are not duplicates.
    expect((await client.submit([t])).status).toBe(200);
  });
  // Merchant metadata keys written with JSON escapes, on Node 24: V8's JSON.parse (nodejs/node#63785)
  // reads such a key as another key it met before at the same place of an object of the same shape,
  // so one body or stored row could change the keys of the next. First keys unique to these tests:
  // the poisoned shapes are not shared with other tests.
  describe('metadata keys written with escapes (V8 JSON.parse bug)', () => {
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
        ).query(
          `SELECT array(SELECT jsonb_object_keys(metadata)) AS keys FROM transactions WHERE merchant_txn_id = $1`,
          [id],
        )
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
});

describe('a request that stalls (issue 9)', () => {
  /** Opens a socket and sends `payload` (an unfinished request); resolves what came back once closed. */
  async function stalled(url: string, payload: string): Promise<{ closed: Promise<RawResponse> }> {
    const { hostname, port } = new URL(url);
    const socket = net.connect(Number(port), hostname);
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    let raw = '';
    socket.on('data', (c: Buffer) => (raw += c.toString('latin1')));
    socket.on('error', () => undefined);
    socket.write(payload);
    return { closed: new Promise((resolve) => socket.once('close', () => resolve(parseRaw(raw)))) };
  }

  const expectTimeout = (r: RawResponse): void => {
    expect(r.status, r.raw.slice(0, 200)).toBe(408);
    expectErrorShape({ ...r, status: 400 });
    expect(JSON.parse(r.body).code).toBe('RET408');
  };

  it('is cut off at HTTP_REQUEST_TIMEOUT with a 408 in the error shape, and shutdown does not wait on it', async () => {
    const local = await startApp('intake-api', { env: { HTTP_REQUEST_TIMEOUT: '2s' } });
    const m = await createMerchant();
    const body = JSON.stringify({ transactions: [txn({}, PAN)] });
    const halfBody =
      `POST /v1/retain/transactions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${m.api_key}\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 40)}`;

    // While the server runs: half a body, and headers that never end.
    const body1 = await stalled(local.url, halfBody);
    const headers1 = await stalled(local.url, `GET /v1/retain/transactions HTTP/1.1\r\nHost: x\r\nX-Slow: 1`);
    expectTimeout(await within(body1.closed, 20_000, 'the stalled body to be cut off'));
    expectTimeout(await within(headers1.closed, 20_000, 'the stalled headers to be cut off'));

    // During a graceful shutdown: the request in flight (headers and half the body read) does not hold it.
    const body2 = await stalled(local.url, halfBody);
    await new Promise((r) => setTimeout(r, 200));
    const exit = local.stop('SIGTERM', 30_000);
    expectTimeout(await within(body2.closed, 20_000, 'the stalled socket to be closed'));
    expect(await exit).toBe(0);
  });
});
