import { spawn, type ChildProcess } from 'node:child_process';
import { EventName } from '@retain/domain';
import { OutboxRelay, QueueRegistry, announce, createRedis } from '@retain/queues';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  WebhookReceiver,
  closeTestDb,
  createMerchant,
  freePort,
  startApp,
  testDb,
  waitFor,
  type RunningApp,
} from '@retain/testing';

/** A private Redis for this test alone (the shared one on 6379 is never touched). */
class PrivateRedis {
  private child: ChildProcess | undefined;
  constructor(readonly port: number) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    const child = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no'],
      { stdio: 'ignore' },
    );
    this.child = child;
    await waitFor(
      async () => {
        const r = createRedis(this.url, { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 1 });
        r.on('error', () => {});
        try {
          await r.connect();
          return (await r.ping()) === 'PONG';
        } finally {
          r.disconnect();
        }
      },
      { what: 'the private redis-server' },
    );
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }
}

// A Redis outage: the app logs connection errors as JSON lines through pino, a few per connection
// per interval (with a count of the ones held back), never raw stack traces; when Redis is back it
// works again.
describe('Redis outage', () => {
  let redisServer: PrivateRedis;
  let dispatcher: RunningApp;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    redisServer = new PrivateRedis(await freePort());
    await redisServer.start();
    receiver = await new WebhookReceiver().start();
  });
  afterAll(async () => {
    await dispatcher?.stop();
    await redisServer.stop();
    await receiver.stop();
    await closeTestDb();
  });

  it('logs connection errors as rate-limited JSON lines and recovers when Redis is back', async () => {
    dispatcher = await startApp('webhook-dispatcher', { env: { REDIS_URL: redisServer.url } });
    const before = dispatcher.logs().length;
    await redisServer.stop();
    await waitFor(async () => (await fetch(`${dispatcher.url}/readyz`)).status === 503, { what: 'not ready' });
    // The outage lasts a few seconds: long enough for every connection to retry many times.
    await new Promise((r) => setTimeout(r, 6000));
    await redisServer.start();
    await waitFor(async () => (await fetch(`${dispatcher.url}/readyz`)).ok, { what: 'ready again' });

    // Work flows again: a push published now is delivered.
    const merchant = await createMerchant(receiver.url);
    const db = await testDb();
    const [m] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [merchant.login]);
    const redis = createRedis(redisServer.url);
    const queues = new QueueRegistry(redis, process.env['QUEUE_PREFIX']!);
    try {
      const ids = await db.transaction((tx) =>
        announce(tx, [
          {
            merchantId: m.id,
            eventName: EventName.RetrySucceeded,
            payloadId: 'r'.repeat(40),
            merchantTransactionId: 'inv-outage',
            content: { id: 'inv-outage', status: 'Captured' },
          },
        ]),
      );
      await new OutboxRelay(db, queues).publish(ids);
      await waitFor(() => receiver.received.length > 0, { what: 'the push after the outage' });
    } finally {
      await queues.close();
      redis.disconnect();
    }

    const lines = dispatcher
      .logs()
      .slice(before)
      .split('\n')
      .filter((l) => l.trim() !== '');
    const notJson = lines.filter((l) => {
      try {
        JSON.parse(l);
        return false;
      } catch {
        return true;
      }
    });
    expect(notJson.slice(0, 20), `${notJson.length} lines are not JSON`).toEqual([]);
    const redisErrors = lines.filter((l) => /ECONNREFUSED|Connection is closed|connect/i.test(l));
    expect(redisErrors.length, redisErrors.join('\n')).toBeGreaterThan(0);
    expect(redisErrors.length, redisErrors.join('\n')).toBeLessThanOrEqual(12);
  });
});
