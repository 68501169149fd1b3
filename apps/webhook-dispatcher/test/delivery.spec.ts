import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { WebhookMessagesRepository } from '@retain/db';
import { EventName } from '@retain/domain';
import { OutboxRelay, QueueName, QueueRegistry, announce, createRedis } from '@retain/queues';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  WebhookReceiver,
  closeTestDb,
  createMerchant,
  startApp,
  testDb,
  usePrivateDatabase,
  waitFor,
  type RunningApp,
  type TestMerchant,
} from '@retain/testing';

const ENV = { WEBHOOK_RETRY_SCHEDULE: '1s,1s,1s' };
const cli = (...args: string[]) => {
  const r = spawnSync(process.execPath, [path.resolve(__dirname, '../../../dist/apps/cli/src/main.js'), ...args], {
    env: process.env,
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout);
};

// decisions §9: signed delivery, retries with the same message_id, 410, SSRF guard, dead + replay.
describe('webhook delivery', () => {
  // Its own database and queue prefix: the dispatcher claims every pending push of its database, and
  // one test clears the prefix's Redis keys, so no other file's messages or jobs share them.
  usePrivateDatabase('delivery');
  let dispatcher: RunningApp;
  let receiver: WebhookReceiver;
  let merchant: TestMerchant;
  const redis = createRedis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
  let queues: QueueRegistry;
  let relay: OutboxRelay;

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    merchant = await createMerchant(receiver.url);
    queues = new QueueRegistry(redis, process.env['QUEUE_PREFIX']!);
    relay = new OutboxRelay(await testDb(), queues);
    dispatcher = await startApp('webhook-dispatcher', { env: ENV });
  });
  afterAll(async () => {
    await dispatcher.stop();
    await queues.close();
    redis.disconnect();
    await receiver.stop();
    await closeTestDb();
  });

  /** A push as the engine records it: row + outbox in one transaction, then the fast-path publish. */
  const push = async (merchantId: string, payloadId = 'p'.repeat(40), publish = true): Promise<string> => {
    const db = await testDb();
    const ids = await db.transaction((m) =>
      announce(m, [
        {
          merchantId,
          eventName: EventName.RetrySucceeded,
          payloadId,
          merchantTransactionId: 'inv-1',
          content: { id: 'inv-1', status: 'Captured' },
        },
      ]),
    );
    if (publish) await relay.publish(ids);
    const [row] = await db.query(
      `SELECT w.message_id FROM webhook_messages w JOIN outbox o ON o.payload->>'messageId' = w.message_id WHERE o.id = $1`,
      [ids[0]],
    );
    return row.message_id;
  };
  const merchantRow = async (login: string) =>
    (await (await testDb()).query(`SELECT id FROM merchants WHERE login = $1`, [login]))[0].id as string;
  const message = async (id: string) =>
    (await (await testDb()).query(`SELECT * FROM webhook_messages WHERE message_id = $1`, [id]))[0];

  /** No delivery job of these messages is left to run (waiting, delayed, active): the queue is done with them. */
  const deliveryJobsDone = async (messageIds: string[]): Promise<boolean> => {
    const open = await queues
      .get(QueueName.WebhookDeliver)
      .getJobs(['waiting', 'delayed', 'active', 'prioritized', 'waiting-children']);
    return !open.some((j) => j && messageIds.includes((j.data as { messageId?: string }).messageId ?? ''));
  };

  it('delivers the spec body with Standard Webhooks headers that verify', async () => {
    const id = await push(await merchantRow(merchant.login));
    const got = await waitFor(() => receiver.received.find((p) => p.body.header['message_id'] === id));
    const h = got.body.header;
    expect(h['merchant_vid']).toHaveLength(40);
    expect(h['payload_id']).toHaveLength(40);
    expect(h['transaction_id']).toBe('inv-1');
    expect(h['event_name']).toBe('retry succeeded');
    expect(String(h['submitted'])).toMatch(/[+-]\d\d:\d\d$/);
    expect(got.headers['webhook-id']).toBe(id);
    expect(got.headers['webhook-timestamp']).toMatch(/^\d{10}$/);
    expect(() =>
      new Webhook(merchant.webhook_secret).verify(got.raw, got.headers as Record<string, string>),
    ).not.toThrow();
    expect(() =>
      new Webhook(`whsec_${Buffer.alloc(32, 1).toString('base64')}`).verify(
        got.raw,
        got.headers as Record<string, string>,
      ),
    ).toThrow();
    await waitFor(async () => (await message(id)).status === 'delivered', { what: 'delivered status' });
    // The announcing outbox row (its wake-up job) is completed too, so no sweeper publishes it again;
    // the job may finish a moment after the pump delivered (seen under a loaded full run).
    await waitFor(
      async () => {
        const [ob] = await (
          await testDb()
        ).query(`SELECT completed_at FROM outbox WHERE payload->>'messageId' = $1`, [id]);
        return ob?.completed_at != null;
      },
      { what: 'the outbox row completed' },
    );
  });

  it('after `merchant set-webhook --rotate-secret` delivers to the same URL, signed with the new secret', async () => {
    // A merchant not looked up by the dispatcher yet (its cache would sign with the old secret for 5 s).
    const m = await createMerchant(receiver.url);
    const rotated = cli('merchant', 'set-webhook', '--login', m.login, '--rotate-secret');
    const id = await push(await merchantRow(m.login));
    const got = await waitFor(() => receiver.received.find((p) => p.body.header['message_id'] === id), {
      timeoutMs: 15_000,
      what: 'the push after the rotation',
    }).catch(async (err: Error) => {
      const { status, last_error } = await message(id);
      throw new Error(`${err.message} (the message is ${status}: ${last_error})`);
    });
    const headers = got.headers as Record<string, string>;
    expect(() => new Webhook(rotated.webhook_secret).verify(got.raw, headers)).not.toThrow();
    expect(() => new Webhook(m.webhook_secret).verify(got.raw, headers)).toThrow();
    expect(rotated.webhook_url).toBe(receiver.url);
    await waitFor(async () => (await message(id)).status === 'delivered', { what: 'delivered status' });
  });

  it('delivers a message once when several jobs name it at the same time', async () => {
    // Duplicate jobs (a stalled job run again, two sweepers racing) land in the same claim batch:
    // the grouped claim hands each message to one job only.
    const merchantId = await merchantRow(merchant.login);
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push(await push(merchantId, String(i).padStart(40, 'd'), false));
    await queues.get(QueueName.WebhookDeliver).addBulk(
      ids.flatMap((messageId) =>
        [1, 2, 3].map((copy) => ({
          name: 'deliver',
          data: { v: 1, messageId },
          opts: { jobId: `${messageId}-dup${copy}` },
        })),
      ),
    );
    const db = await testDb();
    await waitFor(
      async () =>
        (
          await db.query(
            `SELECT count(*)::int AS n FROM webhook_messages WHERE message_id = ANY($1) AND status = 'delivered'`,
            [ids],
          )
        )[0].n === ids.length,
      { what: 'every message delivered' },
    );
    // Every duplicate job has run (not only the one that delivered) before counting deliveries.
    await waitFor(() => deliveryJobsDone(ids), { what: 'every duplicate job finished' });
    for (const id of ids) {
      expect(receiver.received.filter((p) => p.body.header['message_id'] === id)).toHaveLength(1);
      const [{ n }] = await db.query(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE message_id = $1`, [id]);
      expect(n).toBe(1);
    }
  });

  it('retries a receiver that is down with the same message_id, and logs every attempt', async () => {
    receiver.status = 503;
    const id = await push(await merchantRow(merchant.login));
    await waitFor(() => receiver.received.filter((p) => p.body.header['message_id'] === id).length >= 2, {
      what: 'two failed tries',
    });
    receiver.status = 202;
    await waitFor(async () => (await message(id)).status === 'delivered', { what: 'delivered after recovery' });
    const tries = receiver.received.filter((p) => p.body.header['message_id'] === id);
    expect(new Set(tries.map((t) => t.headers['webhook-id']))).toEqual(new Set([id]));
    const log = cli('webhooks', 'log', id);
    expect(log.status).toBe('delivered');
    expect(log.attempts.length).toBe(tries.length);
    expect(log.attempts[0].status_code).toBe(503);
    expect(log.attempts[log.attempts.length - 1].status_code).toBe(202);
    expect(typeof log.attempts[0].latency_ms).toBe('number');
  });

  it('stops at once on 410 Gone', async () => {
    receiver.status = 410;
    const id = await push(await merchantRow(merchant.login));
    await waitFor(async () => (await message(id)).status === 'gone', { what: 'gone' });
    // Retries are rows with a due time picked by the tick, and jobs in the queue: neither is left.
    expect((await message(id)).next_attempt_at).toBeNull();
    await waitFor(() => deliveryJobsDone([id]), { what: 'no delivery job left' });
    expect(receiver.received.filter((p) => p.body.header['message_id'] === id)).toHaveLength(1);
    receiver.status = 202;
  });

  it('keeps a message dead after the schedule, and replays it from the CLI with the same id', async () => {
    receiver.status = 500;
    const id = await push(await merchantRow(merchant.login));
    await waitFor(async () => (await message(id)).status === 'dead', { timeoutMs: 20_000, what: 'dead' });
    expect(receiver.received.filter((p) => p.body.header['message_id'] === id)).toHaveLength(4);
    receiver.status = 202;
    const since = new Date(Date.now() - 60_000).toISOString();
    const out = cli('webhooks', 'replay', '--dead', '--since', since);
    expect(out.message_ids).toContain(id);
    await waitFor(async () => (await message(id)).status === 'delivered', { what: 'replayed delivery' });
    const single = await push(await merchantRow(merchant.login));
    await waitFor(async () => (await message(single)).status === 'delivered');
    expect(cli('webhooks', 'replay', single)).toEqual({ replayed: 1, message_ids: [single] });
    await waitFor(() => receiver.received.filter((p) => p.body.header['message_id'] === single).length === 2);
  });

  it('counts a push it cannot sign (the secret no longer opens) as a failed attempt: dead after the schedule, nothing sent', async () => {
    // An operator dropped the data key that sealed this merchant's secret (CARD_DATA_KEY without a
    // reseal). Sending unsigned is not an option; the push follows the retry schedule and ends dead
    // (the dead-push alert fires), instead of being claimed again every lease with no record.
    const unsignable = await createMerchant(receiver.url);
    const merchantId = await merchantRow(unsignable.login);
    const b64 = (n: number) => randomBytes(n).toString('base64');
    await (
      await testDb()
    ).query(`UPDATE merchants SET webhook_secret_key_id = 'retired', webhook_secret_enc = $2 WHERE id = $1`, [
      merchantId,
      `${b64(12)}.${b64(16)}.${b64(40)}`,
    ]);
    const id = await push(merchantId);
    await waitFor(async () => (await message(id)).status === 'dead', { timeoutMs: 20_000, what: 'dead' });
    const row = await message(id);
    expect(row.attempt_count).toBe(4);
    expect(row.last_error).toMatch(/webhook secret/);
    expect(row.last_error).not.toContain(unsignable.webhook_secret);
    expect(receiver.received.filter((p) => p.body.header['message_id'] === id)).toHaveLength(0);
    // The merchant's other settings are untouched, and another merchant's pushes go out as before.
    const other = await push(await merchantRow(merchant.login));
    await waitFor(async () => (await message(other)).status === 'delivered', { what: 'other merchant delivered' });
  });

  it('ends dead, unsent, a push claimed over and over without a recorded answer (its sending stops the dispatcher)', async () => {
    // A push whose sending kills the dispatcher (out of memory, a crash) is never recorded: each 60 s lease
    // it was claimed again, its attempt count growing past the schedule, and the crash came back for good,
    // every merchant's pushes with it (the webhook audit, session 25). Schedule here: 3 retries, 4 attempts;
    // this claim is its 7th, three more than any answer was recorded for.
    const id = await push(await merchantRow(merchant.login), 'q'.repeat(40), false);
    await (
      await testDb()
    ).query(
      `UPDATE webhook_messages SET attempt_count = 6, next_attempt_at = now() - interval '1 second' WHERE message_id = $1`,
      [id],
    );
    await waitFor(async () => (await message(id)).status === 'dead', { timeoutMs: 20_000, what: 'dead' });
    expect((await message(id)).last_error).toMatch(/claimed 7 times/);
    expect(receiver.received.filter((p) => p.body.header['message_id'] === id)).toHaveLength(0);
  });

  it('never sends a push unsigned when the merchant has no stored secret: dead after the schedule, nothing sent', async () => {
    // The column allows NULL (a row written by hand or by an old version): the push went out without
    // its `webhook-signature` header (the webhook audit, session 25). README: "never sent unsigned".
    const secretless = await createMerchant(receiver.url);
    const merchantId = await merchantRow(secretless.login);
    await (
      await testDb()
    ).query(`UPDATE merchants SET webhook_secret_key_id = NULL, webhook_secret_enc = NULL WHERE id = $1`, [merchantId]);
    const id = await push(merchantId);
    await waitFor(async () => (await message(id)).status === 'dead', { timeoutMs: 20_000, what: 'dead' });
    expect((await message(id)).last_error).toMatch(/webhook secret/);
    expect(receiver.received.filter((p) => p.body.header['message_id'] === id)).toHaveLength(0);
  });

  it("delivers a push replayed while its last attempt was in flight: that attempt's failure does not end it dead", async () => {
    // `webhooks replay <id>` takes a pending message too (an operator making a retry hours away due now).
    // Its last attempt (4 of 4 with this schedule) is still waiting for the receiver when the replay comes,
    // and the replay's own attempt is sent meanwhile; the old attempt then fails, the new one is accepted.
    const held: http.ServerResponse[] = [];
    let requests = 0;
    const flaky = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (++requests < 4) {
          res.writeHead(500).end();
          return;
        }
        held.push(res);
      });
    });
    await new Promise<void>((r) => flaky.listen(0, '127.0.0.1', r));
    try {
      const m = await createMerchant(`http://127.0.0.1:${(flaky.address() as net.AddressInfo).port}/hooks`);
      const id = await push(await merchantRow(m.login));
      const db = await testDb();
      const logged = async (): Promise<{ attempt: number; status_code: number | null }[]> =>
        db.query(`SELECT attempt, status_code FROM webhook_deliveries WHERE message_id = $1 ORDER BY id`, [id]);
      await waitFor(() => held.length === 1, { what: 'the last attempt waiting for its answer' });
      expect(await message(id)).toMatchObject({ status: 'pending', attempt_count: 4 });
      expect(cli('webhooks', 'replay', id)).toEqual({ replayed: 1, message_ids: [id] });
      await waitFor(() => held.length === 2, { what: "the replay's attempt sent" });
      // The old attempt fails (recorded first), then the replay's is accepted.
      held[0]!.writeHead(500).end();
      await waitFor(async () => (await logged()).length === 4, { what: "the old attempt's failure logged" });
      held[1]!.writeHead(202).end();
      await waitFor(async () => (await logged()).length === 5, { what: "the replay's attempt logged" });
      const { status, replay_count, last_status_code, dead_at } = await message(id);
      expect({ status, replay_count, last_status_code, dead_at, log: await logged() }).toEqual({
        status: 'delivered',
        replay_count: 1,
        last_status_code: 202,
        dead_at: null,
        log: [
          { attempt: 1, status_code: 500 },
          { attempt: 2, status_code: 500 },
          { attempt: 3, status_code: 500 },
          { attempt: 4, status_code: 500 },
          { attempt: 1, status_code: 202 },
        ],
      });
    } finally {
      flaky.closeAllConnections();
      await new Promise((r) => flaky.close(r));
    }
  });

  it('replays by id a push that found no webhook URL, once the merchant has one; --dead leaves it alone', async () => {
    const m = await createMerchant(null);
    const id = await push(await merchantRow(m.login));
    await waitFor(async () => (await message(id)).status === 'no_endpoint', { what: 'no_endpoint' });
    // --dead replays pushes whose receiver failed them, not those that never had one (README).
    const dead = cli('webhooks', 'replay', '--dead', '--since', new Date(Date.now() - 60_000).toISOString());
    expect(dead.message_ids).not.toContain(id);
    expect((await message(id)).status).toBe('no_endpoint');
    // The operator sets the URL and replays the push right away.
    cli('merchant', 'set-webhook', '--login', m.login, '--url', receiver.url);
    expect(cli('webhooks', 'replay', id)).toEqual({ replayed: 1, message_ids: [id] });
    const got = await waitFor(() => receiver.received.find((p) => p.body.header['message_id'] === id), {
      timeoutMs: 15_000,
      what: 'the replayed push',
    }).catch(async (err: Error) => {
      const { status, last_error } = await message(id);
      throw new Error(`${err.message} (the message is ${status}: ${last_error})`);
    });
    expect(() => new Webhook(m.webhook_secret).verify(got.raw, got.headers as Record<string, string>)).not.toThrow();
    await waitFor(async () => (await message(id)).status === 'delivered', { what: 'delivered status' });
  });

  it('delivers every replay of the same message, each once', async () => {
    const id = await push(await merchantRow(merchant.login));
    const count = () => receiver.received.filter((p) => p.body.header['message_id'] === id).length;
    await waitFor(async () => (await message(id)).status === 'delivered', { what: 'first delivery' });
    for (let n = 2; n <= 4; n++) {
      expect(cli('webhooks', 'replay', id)).toEqual({ replayed: 1, message_ids: [id] });
      await waitFor(async () => count() === n && (await message(id)).status === 'delivered', {
        what: `replay ${n - 1} delivered`,
      });
    }
    // The dead-message replay path bumps the generation too.
    receiver.status = 500;
    expect(cli('webhooks', 'replay', id).replayed).toBe(1);
    await waitFor(async () => (await message(id)).status === 'dead', { timeoutMs: 20_000, what: 'dead' });
    receiver.status = 202;
    const before = count();
    cli('webhooks', 'replay', '--dead', '--since', new Date(Date.now() - 60_000).toISOString());
    await waitFor(async () => (await message(id)).status === 'delivered', { what: 'dead replay delivered' });
    await waitFor(() => deliveryJobsDone([id]), { what: 'no delivery job of the replay left' });
    expect(count()).toBe(before + 1);
    expect((await message(id)).replay_count).toBe(5);
  });

  it('gives up on a receiver after 10 s in all, even one that trickles its status line and headers', async () => {
    // decisions §9: timeouts (10 s) are retried. The status line and headers one line a second for 25 s:
    // an idle-socket timeout never fires, and no answer is in sight.
    const trickling = new Set<NodeJS.Timeout>();
    const sockets = new Set<net.Socket>();
    let requests = 0;
    const slow = net.createServer((socket) => {
      sockets.add(socket);
      socket.once('data', () => {
        requests++;
        socket.write('HTTP/1.1 200 OK\r\n');
        let left = 25;
        const t = setInterval(() => {
          if (socket.destroyed || --left === 0) {
            clearInterval(t);
            trickling.delete(t);
            socket.end('\r\n');
          } else socket.write(`x-slow-${left}: .\r\n`);
        }, 1000);
        trickling.add(t);
      });
      socket.on('error', () => undefined);
    });
    await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
    try {
      const m = await createMerchant(`http://127.0.0.1:${(slow.address() as net.AddressInfo).port}/hooks`);
      const id = await push(await merchantRow(m.login));
      const db = await testDb();
      const [first] = await waitFor(
        async () => {
          const rows = await db.query(
            `SELECT status_code, latency_ms, error FROM webhook_deliveries WHERE message_id = $1 ORDER BY attempt`,
            [id],
          );
          return rows.length > 0 ? rows : null;
        },
        { timeoutMs: 18_000, what: 'the first attempt logged' },
      );
      expect(first).toMatchObject({ status_code: null, error: 'timeout' });
      expect(first.latency_ms).toBeGreaterThanOrEqual(9_000);
      expect(first.latency_ms).toBeLessThan(12_000);
      // Not delivered: due again with the same message_id.
      expect((await message(id)).status).toBe('pending');
      expect(requests).toBeGreaterThanOrEqual(1);
    } finally {
      for (const t of trickling) clearInterval(t);
      for (const s of sockets) s.destroy();
      await new Promise((r) => slow.close(r));
    }
  });

  it('takes the 2xx of a receiver that answers at once and then trickles its body, cutting the body off at 10 s', async () => {
    // decisions §9: any 2xx accepts; the status line is the answer. The body (read only to be
    // dropped) still gets no more than what is left of the 10 s, so the receiver holds no slot longer.
    const trickling = new Set<NodeJS.Timeout>();
    let requests = 0;
    let cutOff = false;
    const slow = http.createServer((req, res) => {
      requests++;
      req.resume();
      res.writeHead(200, { 'content-type': 'text/plain' });
      let left = 25;
      const t = setInterval(() => {
        if (res.destroyed || --left === 0) {
          cutOff ||= res.destroyed;
          clearInterval(t);
          trickling.delete(t);
          res.end();
        } else res.write('.');
      }, 1000);
      trickling.add(t);
    });
    await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
    try {
      const m = await createMerchant(`http://127.0.0.1:${(slow.address() as net.AddressInfo).port}/hooks`);
      const id = await push(await merchantRow(m.login));
      const db = await testDb();
      const log = await waitFor(
        async () => {
          const rows = await db.query(
            `SELECT status_code, latency_ms, error FROM webhook_deliveries WHERE message_id = $1 ORDER BY attempt`,
            [id],
          );
          return rows.length > 0 ? rows : null;
        },
        { timeoutMs: 18_000, what: 'the first attempt logged' },
      );
      expect({ status: (await message(id)).status, requests, log: log.length }).toEqual({
        status: 'delivered',
        requests: 1,
        log: 1,
      });
      expect(log[0]).toMatchObject({ status_code: 200, error: null });
      // The dispatcher closed the connection at 10 s (the receiver meant to trickle for 25 s).
      expect(log[0].latency_ms).toBeGreaterThanOrEqual(9_000);
      expect(log[0].latency_ms).toBeLessThan(12_000);
      await waitFor(() => cutOff, { what: 'the receiver saw its connection closed' });
    } finally {
      for (const t of trickling) clearInterval(t);
      slow.closeAllConnections();
      await new Promise((r) => slow.close(r));
    }
  });

  it('takes a 2xx whose body cannot be read: not decoded (gzip that is not), or the connection dropped mid-body', async () => {
    // decisions §9: any 2xx accepts. The status line is the receiver's answer; what follows it is read
    // only to be dropped. Seen: a 202 with `Content-Encoding: gzip` and a plain "Accepted" (Z_DATA_ERROR),
    // and a 202 whose connection was reset half-way through its body (ECONNRESET), both retried to dead.
    const seen: { path: string; acceptEncoding: string | undefined }[] = [];
    const odd = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        seen.push({ path: req.url ?? '', acceptEncoding: req.headers['accept-encoding'] });
        if (req.url === '/gzip') {
          res.writeHead(202, { 'content-type': 'text/plain', 'content-encoding': 'gzip' });
          res.end('Accepted');
        } else {
          res.writeHead(202, { 'content-type': 'text/plain', 'content-length': '1000' });
          res.write('Acc');
          setTimeout(() => req.socket.resetAndDestroy(), 50);
        }
      });
    });
    await new Promise<void>((r) => odd.listen(0, '127.0.0.1', r));
    try {
      const base = `http://127.0.0.1:${(odd.address() as net.AddressInfo).port}`;
      const gzip = await createMerchant(`${base}/gzip`);
      const reset = await createMerchant(`${base}/reset`);
      const ids = {
        gzip: await push(await merchantRow(gzip.login)),
        reset: await push(await merchantRow(reset.login)),
      };
      const db = await testDb();
      const outcomes = [];
      for (const [kind, id] of Object.entries(ids)) {
        await waitFor(async () => (await message(id)).status !== 'pending', {
          timeoutMs: 20_000,
          what: `the ${kind} push settled`,
        });
        const { status, last_error } = await message(id);
        const log = await db.query(`SELECT status_code, error FROM webhook_deliveries WHERE message_id = $1`, [id]);
        outcomes.push({ kind, status, last_error, sent: seen.filter((s) => s.path === `/${kind}`).length, log });
      }
      expect(outcomes).toEqual(
        Object.keys(ids).map((kind) => ({
          kind,
          status: 'delivered',
          last_error: null,
          sent: 1,
          log: [{ status_code: 202, error: null }],
        })),
      );
      // Nothing is decoded, so no encoding is asked for.
      for (const s of seen) expect(s.acceptEncoding ?? 'identity').toBe('identity');
    } finally {
      odd.closeAllConnections();
      await new Promise((r) => odd.close(r));
    }
  });

  it('takes the status of a receiver whose body never ends, without reading more than a little of it', async () => {
    let sent = 0;
    const endless = http.createServer((req, res) => {
      req.resume();
      res.writeHead(202, { 'content-type': 'text/plain' });
      const chunk = Buffer.alloc(16 * 1024, 'x');
      const more = (): void => {
        while (!res.destroyed && res.write(chunk)) sent += chunk.length;
        if (!res.destroyed) res.once('drain', more);
      };
      more();
    });
    await new Promise<void>((r) => endless.listen(0, '127.0.0.1', r));
    try {
      const m = await createMerchant(`http://127.0.0.1:${(endless.address() as { port: number }).port}/hooks`);
      const id = await push(await merchantRow(m.login));
      await waitFor(async () => (await message(id)).status === 'delivered', { timeoutMs: 8_000, what: 'delivered' });
      // The dispatcher closed the connection after its cap (64 KiB, plus what the sockets buffered).
      expect(sent).toBeLessThan(8 * 1024 * 1024);
    } finally {
      endless.closeAllConnections();
      await new Promise((r) => endless.close(r));
    }
  });

  it('records a delivery once Postgres takes it again: a push whose record failed is not sent a second time after its lease', async () => {
    // Seen in bench/drills: pushes delivered just as Postgres went down were sent again 60 s later.
    const db = await testDb();
    await db.query(
      `CREATE FUNCTION test_records_fail() RETURNS trigger LANGUAGE plpgsql AS
         $$ BEGIN RAISE EXCEPTION 'the database is unavailable (test)'; END $$`,
    );
    await db.query(
      `CREATE TRIGGER test_records_fail BEFORE INSERT ON webhook_deliveries FOR EACH ROW
         EXECUTE FUNCTION test_records_fail()`,
    );
    let id = '';
    try {
      id = await push(await merchantRow(merchant.login), 'o'.repeat(40));
      await waitFor(() => receiver.received.find((p) => p.body.header['message_id'] === id), { what: 'the push' });
      // Its record fails for a while (as while Postgres is down).
      await new Promise((r) => setTimeout(r, 2_000));
    } finally {
      await db.query(`DROP TRIGGER test_records_fail ON webhook_deliveries`);
      await db.query(`DROP FUNCTION test_records_fail()`);
    }
    await waitFor(async () => (await message(id)).status === 'delivered', {
      what: 'recorded delivered once the database took it (the lease is 60 s)',
      timeoutMs: 20_000,
    });
    expect(receiver.received.filter((p) => p.body.header['message_id'] === id)).toHaveLength(1);
    const [log] = await db.query(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE message_id = $1`, [id]);
    expect(log.n).toBe(1);
  });

  it('records a delivery Postgres refused for 30 s (an outage with its restart) inside the lease: never sent a second time', async () => {
    // Seen in bench/drills (fifteenth session): a 20 s outage plus Postgres's crash recovery outlasted
    // the record's 25 s of retries, and pushes delivered as it went down were sent again 60 s later.
    const db = await testDb();
    await db.query(
      `CREATE FUNCTION test_records_fail_long() RETURNS trigger LANGUAGE plpgsql AS
         $$ BEGIN RAISE EXCEPTION 'the database is unavailable (test)'; END $$`,
    );
    await db.query(
      `CREATE TRIGGER test_records_fail_long BEFORE INSERT ON webhook_deliveries FOR EACH ROW
         EXECUTE FUNCTION test_records_fail_long()`,
    );
    let id = '';
    try {
      id = await push(await merchantRow(merchant.login), 'l'.repeat(40));
      await waitFor(() => receiver.received.find((p) => p.body.header['message_id'] === id), { what: 'the push' });
      await new Promise((r) => setTimeout(r, 30_000));
    } finally {
      await db.query(`DROP TRIGGER test_records_fail_long ON webhook_deliveries`);
      await db.query(`DROP FUNCTION test_records_fail_long()`);
    }
    await waitFor(async () => (await message(id)).status === 'delivered', {
      what: 'recorded delivered once the database took it, before the lease ran out',
      timeoutMs: 40_000,
    });
    // Once delivered it is never claimed again; unrecorded, it is delivered only by a second send at the lease's end.
    expect(receiver.received.filter((p) => p.body.header['message_id'] === id)).toHaveLength(1);
  }, 120_000);

  it('does not send a push it claimed but held back until its lease ran out: another dispatcher has it by then', async () => {
    // The pump holds claimed pushes back while MAX_UNRECORDED (256) deliveries wait for their records
    // (Postgres refusing or stalling them). Those it claimed but had not started when the records went
    // through again had their lease (60 s from the claim) run out meanwhile, and another dispatcher's
    // claim may have them: this dispatcher must not send them too.
    const db = await testDb();
    await waitFor(
      async () =>
        (await db.query(`SELECT count(*)::int AS n FROM webhook_messages WHERE status = 'pending'`))[0].n === 0,
      { what: "earlier tests' pushes settled" },
    );
    const hooks = await new WebhookReceiver().start();
    const merchantIds: string[] = [];
    for (let i = 0; i < 3; i++) merchantIds.push(await merchantRow((await createMerchant(hooks.url)).login));
    const received = (id: string) => hooks.received.filter((p) => p.body.header['message_id'] === id).length;
    const other = new WebhookMessagesRepository(db);
    // Records stall: every insert into the delivery log waits for this lock.
    const stall = db.createQueryRunner();
    await stall.connect();
    await stall.startTransaction();
    let stalled = true;
    try {
      await stall.query(`LOCK TABLE webhook_deliveries IN SHARE MODE`);
      // Three merchants: a claim takes 3 x 22 = 66 pushes, so the fourth one is only partly started at 256.
      const outbox = await db.transaction((tx) =>
        announce(
          tx,
          merchantIds.flatMap((merchantId, m) =>
            Array.from({ length: 100 }, (_, i) => ({
              merchantId,
              eventName: EventName.RetrySucceeded,
              payloadId: `${m}${String(i).padStart(39, 'h')}`,
              merchantTransactionId: `inv-held-${m}-${i}`,
              content: { id: `inv-held-${m}-${i}` },
            })),
          ),
        ),
      );
      await relay.publish(outbox);
      type Row = { message_id: string; attempt_count: number };
      const rows = (): Promise<Row[]> =>
        db.query(`SELECT message_id, attempt_count FROM webhook_messages WHERE merchant_id = ANY($1)`, [merchantIds]);
      await waitFor(() => hooks.received.length >= 256, { what: '256 pushes sent, their records waiting' });
      // Claimed by the dispatcher and held back (never sent).
      const held = (await rows()).filter((r) => r.attempt_count > 0 && received(r.message_id) === 0);
      expect(held.length).toBeGreaterThan(0);
      // Another dispatcher claims what is due, the held ones as soon as their lease runs out.
      const taken = new Map<string, Awaited<ReturnType<typeof other.claimNextDue>>['rows'][number]>();
      await waitFor(
        async () => {
          for (const r of (await other.claimNextDue(1000, 60)).rows) taken.set(r.message_id, r);
          return held.every((h) => taken.has(h.message_id));
        },
        { timeoutMs: 90_000, intervalMs: 500, what: 'the held pushes claimed by another dispatcher' },
      );
      // The records go through; the dispatcher's deliveries are all recorded (logged).
      await stall.commitTransaction();
      stalled = false;
      await waitFor(
        async () =>
          (
            await db.query(
              `SELECT count(*)::int AS n FROM webhook_deliveries d JOIN webhook_messages w USING (message_id)
                WHERE w.merchant_id = ANY($1)`,
              [merchantIds],
            )
          )[0].n >= 256,
        { what: "the dispatcher's 256 records" },
      );
      // Its pump starts what it holds on its next ticks (250 ms): a few of them.
      await new Promise((r) => setTimeout(r, 3_000));
      expect(held.filter((h) => received(h.message_id) > 0).map((h) => h.message_id)).toEqual([]);
      // The other dispatcher hands its claims back unsent: every push is then delivered, the held ones once.
      await other.releaseClaimed([...taken.values()]);
      await waitFor(
        async () =>
          (await rows()).length === 300 &&
          (
            await db.query(
              `SELECT count(*)::int AS n FROM webhook_messages WHERE merchant_id = ANY($1) AND status = 'delivered'`,
              [merchantIds],
            )
          )[0].n === 300,
        { what: 'every push delivered' },
      );
      expect(held.map((h) => received(h.message_id))).toEqual(held.map(() => 1));
    } finally {
      if (stalled) await stall.rollbackTransaction();
      await stall.release();
      await hooks.stop();
    }
  }, 150_000);

  it('loses nothing when Redis is flushed between announcement and delivery', async () => {
    await dispatcher.stop();
    const merchantId = await merchantRow(merchant.login);
    const ids = [await push(merchantId), await push(merchantId), await push(merchantId, 'q'.repeat(40), false)];
    const keys = await redis.keys(`${process.env['QUEUE_PREFIX']}*`);
    if (keys.length) await redis.del(...keys);
    dispatcher = await startApp('webhook-dispatcher', { env: ENV });
    for (const id of ids) await waitFor(async () => (await message(id)).status === 'delivered', { timeoutMs: 30_000 });
    for (const id of ids) expect(receiver.received.filter((p) => p.body.header['message_id'] === id)).toHaveLength(1);
  });
});

describe('webhook dispatcher shutdown', () => {
  it('hands claimed pushes it never sent back at shutdown: due at once, no attempt counted, each delivered once', async () => {
    // A slow endpoint: the first pipe's worth is answered one by one (every slot that frees takes one
    // message of the next claim, the rest of that claim waits in the pump), later ones after 3 s.
    const receiver = await new WebhookReceiver().start();
    receiver.delayMs = (n) => (n < 64 ? 1000 + 100 * n : 3000);
    const m = await createMerchant(receiver.url);
    const redis = createRedis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
    const queues = new QueueRegistry(redis, process.env['QUEUE_PREFIX']!);
    const db = await testDb();
    let dispatcher = await startApp('webhook-dispatcher', { env: ENV });
    try {
      const [{ id: merchantId }] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [m.login]);
      const outbox = await db.transaction((tx) =>
        announce(
          tx,
          Array.from({ length: 300 }, (_, i) => ({
            merchantId,
            eventName: EventName.RetrySucceeded,
            payloadId: String(i).padStart(40, 's'),
            merchantTransactionId: `inv-${i}`,
            content: { id: `inv-${i}` },
          })),
        ),
      );
      await new OutboxRelay(db, queues).publish(outbox);
      type Row = { message_id: string; status: string; attempt_count: number; next_attempt_at: Date | null };
      const messages = (): Promise<Row[]> =>
        db.query(
          `SELECT message_id, status, attempt_count, next_attempt_at FROM webhook_messages WHERE merchant_id = $1`,
          [merchantId],
        );
      // Slots have freed and been taken again, and more is claimed than has reached the endpoint.
      await waitFor(
        async () =>
          receiver.received.length > 64 &&
          (await messages()).filter((r) => r.attempt_count > 0).length > receiver.received.length,
        { what: 'more claimed than sent' },
      );
      expect(await dispatcher.stop()).toBe(0);
      const rows = await messages();
      const sent = new Set(receiver.received.map((p) => p.body.header['message_id'] as string));
      const unsent = rows.filter((r) => !sent.has(r.message_id));
      expect(unsent.length).toBeGreaterThan(0);
      for (const r of unsent) {
        expect(r.status).toBe('pending');
        expect(r.attempt_count).toBe(0);
        expect(r.next_attempt_at).toBeNull();
      }
      for (const r of rows.filter((x) => sent.has(x.message_id))) expect(r.status).toBe('delivered');

      receiver.delayMs = 0;
      dispatcher = await startApp('webhook-dispatcher', { env: ENV });
      await waitFor(async () => (await messages()).every((r) => r.status === 'delivered'), {
        what: 'every push delivered after the restart',
      });
      const logs = await db.query(
        `SELECT d.message_id, d.attempt FROM webhook_deliveries d JOIN webhook_messages w USING (message_id)
          WHERE w.merchant_id = $1`,
        [merchantId],
      );
      expect(logs).toHaveLength(300);
      expect(logs.every((l: { attempt: number }) => l.attempt === 1)).toBe(true);
      const counts = new Map<string, number>();
      for (const p of receiver.received)
        counts.set(String(p.body.header['message_id']), (counts.get(String(p.body.header['message_id'])) ?? 0) + 1);
      expect(counts.size).toBe(300);
      expect([...counts.values()].every((n) => n === 1)).toBe(true);
    } finally {
      await dispatcher.stop();
      await queues.close();
      redis.disconnect();
      await receiver.stop();
    }
  });
});

describe('webhook SSRF guard', () => {
  it('refuses loopback and private addresses unless WEBHOOK_ALLOW_PRIVATE=true', async () => {
    const receiver = await new WebhookReceiver().start();
    const m = await createMerchant(receiver.url);
    const dispatcher = await startApp('webhook-dispatcher', { env: { ...ENV, WEBHOOK_ALLOW_PRIVATE: 'false' } });
    const redis = createRedis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
    const queues = new QueueRegistry(redis, process.env['QUEUE_PREFIX']!);
    try {
      const db = await testDb();
      const [{ id: merchantId }] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [m.login]);
      const outbox = await db.transaction((tx) =>
        announce(tx, [{ merchantId, eventName: EventName.RetryFailed, payloadId: 'r'.repeat(40), content: {} }]),
      );
      await new OutboxRelay(db, queues).publish(outbox);
      const [{ message_id: id }] = await db.query(
        `SELECT payload->>'messageId' AS message_id FROM outbox WHERE id = $1`,
        [outbox[0]],
      );
      const [log] = await waitFor(async () => {
        const rows = await db.query(`SELECT * FROM webhook_deliveries WHERE message_id = $1`, [id]);
        return rows.length ? rows : null;
      });
      expect(log.error).toBe('address not allowed');
      expect(log.status_code).toBeNull();
      expect(receiver.received).toHaveLength(0);
      const metrics = await (await fetch(`${dispatcher.url}/metrics`)).text();
      expect(metrics).toMatch(/retain_webhook_deliveries_total\{[^}]*result="refused"/);
    } finally {
      await dispatcher.stop();
      await queues.close();
      redis.disconnect();
      await receiver.stop();
      await closeTestDb();
    }
  });
});
