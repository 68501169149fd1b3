import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApiClient,
  closeTestDb,
  createMerchant,
  freePort,
  startApp,
  testDb,
  txn,
  type RunningApp,
  type TestMerchant,
} from '@retain/testing';

/**
 * A TCP hop between the app and the machine's Postgres or Redis that the test can take down
 * (connections refused, open ones cut) or make stall (accepts, never answers) without touching
 * the shared servers other tests use.
 */
class Hop {
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  mode: 'up' | 'stall' = 'up';

  constructor(
    readonly port: number,
    private readonly target: { host: string; port: number },
  ) {}

  async up(): Promise<void> {
    this.mode = 'up';
    if (this.server) return;
    this.server = net.createServer((client) => {
      this.sockets.add(client);
      client.on('close', () => this.sockets.delete(client));
      client.on('error', () => client.destroy());
      if (this.mode === 'stall') return;
      const upstream = net.connect(this.target.port, this.target.host);
      this.sockets.add(upstream);
      upstream.on('close', () => this.sockets.delete(upstream));
      upstream.on('error', () => client.destroy());
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => this.server!.listen(this.port, '127.0.0.1', resolve));
  }

  /** Refuses new connections and cuts the open ones (a crashed or stopped server). */
  async down(): Promise<void> {
    const s = this.server;
    this.server = null;
    for (const socket of this.sockets) socket.destroy();
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  }

  /** Accepts connections and never answers (a hung server or a black-holed network). */
  async stall(): Promise<void> {
    await this.down();
    await this.up();
    this.mode = 'stall';
  }
}

const UNAVAILABLE = { code: 'RET900', message: 'Unable to submit, please try again' };

describe('a back end that is down (decisions §16)', () => {
  let api: RunningApp;
  let merchant: TestMerchant;
  let client: ApiClient;
  let pg: Hop;
  let redis: Hop;

  beforeAll(async () => {
    const dbUrl = new URL(process.env['DATABASE_URL']!);
    const redisUrl = new URL(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
    pg = new Hop(await freePort(), { host: dbUrl.hostname, port: Number(dbUrl.port || 5432) });
    redis = new Hop(await freePort(), { host: redisUrl.hostname, port: Number(redisUrl.port || 6379) });
    await pg.up();
    await redis.up();
    const viaPg = new URL(dbUrl);
    viaPg.host = `127.0.0.1:${pg.port}`;
    const viaRedis = new URL(redisUrl);
    viaRedis.host = `127.0.0.1:${redis.port}`;
    api = await startApp('intake-api', { env: { DATABASE_URL: viaPg.toString(), REDIS_URL: viaRedis.toString() } });
    merchant = await createMerchant();
    client = new ApiClient(api.url, merchant.api_key);
  });
  afterAll(async () => {
    await pg.up();
    await redis.up();
    await api.stop();
    await pg.down();
    await redis.down();
    await closeTestDb();
  });

  const expectUnavailable = (r: { status: number; json: unknown; headers: Headers }, what: string): void => {
    expect(r.status, what).toBe(503);
    expect(r.json, what).toEqual(UNAVAILABLE);
    expect(Number(r.headers.get('retry-after')), what).toBeGreaterThan(0);
    expect(r.headers.get('x-request-id')).toMatch(/^[0-9a-f]{32}$/);
  };

  it('answers 503 RET900 with Retry-After while Postgres refuses or drops connections, and recovers', async () => {
    const before = txn();
    expect((await client.submit([before])).status).toBe(200);
    await pg.down();
    const during = txn();
    expectUnavailable(await client.submit([during]), 'submit');
    expectUnavailable(
      await client.request('POST', '/v1/retain/refunds', { refunds: [{ id: before['id'] }] }),
      'refund',
    );
    expectUnavailable(await client.request('GET', `/v1/retain/transactions/${before['id']}`), 'fetch');
    expectUnavailable(await client.request('GET', '/v1/retain/transactions'), 'list');
    await pg.up();
    const after = txn();
    expect((await client.submit([after])).status).toBe(200);
    const rows = await (
      await testDb()
    ).query(`SELECT merchant_txn_id FROM transactions WHERE merchant_txn_id = ANY($1::text[]) ORDER BY 1`, [
      [before['id'], during['id'], after['id']],
    ]);
    expect(rows.map((r: { merchant_txn_id: string }) => r.merchant_txn_id)).toEqual([before['id'], after['id']].sort());
  });

  it('answers 503 RET900 when Postgres hangs (the pool times out connecting)', async () => {
    await pg.stall();
    try {
      expectUnavailable(await client.submit([txn()]), 'submit while Postgres hangs');
    } finally {
      await pg.up();
    }
    expect((await client.submit([txn()])).status).toBe(200);
  });

  it('still accepts a submission while Redis is down: the outbox row carries the work', async () => {
    await redis.down();
    try {
      const t = txn();
      expect((await client.submit([t])).status).toBe(200);
      const [row] = await (
        await testDb()
      ).query(
        `SELECT o.published_at FROM outbox o JOIN submissions s ON o.payload->>'submissionId' = s.id::text
           JOIN transactions t ON t.submission_id = s.id WHERE t.merchant_txn_id = $1`,
        [t['id']],
      );
      expect(row).toBeDefined();
    } finally {
      await redis.up();
    }
  });
});
