import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { EventName } from '@retain/domain';
import { OutboxRelay, QueueRegistry, announce, createRedis } from '@retain/queues';
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
} from '@retain/testing';

/** Pushes of merchant A announced first: more than four pipes' worth (64 per claim, 64 in flight). */
const BACKLOG = 300;

// One merchant whose receiver hangs must not hold up the others' pushes. A's receiver accepts every
// connection and never answers, so each of its deliveries holds a slot until the 10 s timeout; B's
// answers 202 at once. Before the fix the dispatcher claimed oldest first with no per-merchant limit:
// A's first 64 filled every slot for 10 s, and each later round took the next 64 of A's backlog, so
// B's push, announced after A's 300, waited for five rounds (about 40 s). The deadline below is under
// one webhook timeout: B does not wait for A's exchanges at all.
describe('webhook dispatcher fairness between merchants', () => {
  usePrivateDatabase('fair');
  const hanging = new Set<http.ServerResponse>();
  let hangingRequests = 0;
  /** A's requests open at once, at most (the dispatcher gives up on each after 10 s and closes it). */
  let hangingAtOnce = 0;
  const stuck = http.createServer((req, res) => {
    hangingRequests++;
    req.resume();
    hanging.add(res);
    hangingAtOnce = Math.max(hangingAtOnce, hanging.size);
    res.on('close', () => hanging.delete(res));
  });
  let receiver: WebhookReceiver;
  let dispatcher: RunningApp;
  const redis = createRedis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
  let queues: QueueRegistry;

  beforeAll(async () => {
    await new Promise<void>((r) => stuck.listen(0, '127.0.0.1', r));
    receiver = await new WebhookReceiver().start();
    queues = new QueueRegistry(redis, process.env['QUEUE_PREFIX']!);
    // Retries of A an hour later: only A's first attempts and its backlog compete with B here.
    dispatcher = await startApp('webhook-dispatcher', { env: { WEBHOOK_RETRY_SCHEDULE: '1h' } });
  });
  afterAll(async () => {
    await dispatcher.stop();
    for (const res of hanging) res.destroy();
    stuck.closeAllConnections();
    await new Promise((r) => stuck.close(r));
    await receiver.stop();
    await queues.close();
    redis.disconnect();
    await closeTestDb();
  });

  /** Announces pushes of one merchant in one transaction and publishes their wake-up job; their message ids. */
  const pushes = async (merchantId: string, n: number, tag: string): Promise<string[]> => {
    const db = await testDb();
    const payloadIds = Array.from({ length: n }, (_, i) => `${tag}${i}`.padStart(40, '0'));
    const outbox = await db.transaction((m) =>
      announce(
        m,
        payloadIds.map((payloadId, i) => ({
          merchantId,
          eventName: EventName.RetrySucceeded,
          payloadId,
          merchantTransactionId: `inv-${tag}-${i}`,
          content: { id: `inv-${tag}-${i}` },
        })),
      ),
    );
    await new OutboxRelay(db, queues).publish(outbox);
    const rows: { message_id: string }[] = await db.query(
      `SELECT message_id FROM webhook_messages WHERE merchant_id = $1 AND payload_id = ANY($2)`,
      [merchantId, payloadIds],
    );
    expect(rows).toHaveLength(n);
    return rows.map((r) => r.message_id);
  };
  const arrived = (id: string, what: string) =>
    waitFor(() => receiver.received.find((p) => p.body.header['message_id'] === id), {
      timeoutMs: 8_000,
      intervalMs: 50,
      what,
    });

  it("delivers B's pushes while A's receiver hangs with a backlog of A's pushes announced before them", async () => {
    const db = await testDb();
    const merchantId = async (url: string) =>
      (await db.query(`SELECT id FROM merchants WHERE login = $1`, [(await createMerchant(url)).login]))[0]
        .id as string;
    const a = await merchantId(`http://127.0.0.1:${(stuck.address() as AddressInfo).port}/hooks`);
    const b = await merchantId(receiver.url);

    await pushes(a, BACKLOG, 'a');
    // A's deliveries hold the dispatcher's slots before B's push exists.
    await waitFor(() => hangingRequests >= 64, { what: "A's first deliveries in flight" });
    const [first] = await pushes(b, 1, 'b');
    await arrived(first!, "B's push while A's first deliveries hang");

    // A later round: A's first attempts have timed out and the next of its backlog hang in turn.
    await waitFor(
      async () =>
        (
          await db.query(
            `SELECT count(*)::int AS n FROM webhook_deliveries d JOIN webhook_messages w USING (message_id)
              WHERE w.merchant_id = $1`,
            [a],
          )
        )[0].n >= 64 && hangingRequests > 64,
      { timeoutMs: 30_000, what: "A's first attempts timed out and more of A's pushes in flight" },
    );
    const [second] = await pushes(b, 1, 'c');
    await arrived(second!, "B's push while A's next deliveries hang");
    expect(receiver.received.every((p) => p.answered === 202)).toBe(true);
    // A's deliveries took a merchant's share of the slots, never more.
    expect(hangingAtOnce).toBe(64);
  });

  it("lets a merchant alone use a whole pipe (64 deliveries at once, never more), A's hanging ones beside", async () => {
    // C's receiver answers each push after 1.5 s: C's deliveries pile up to its limit.
    let open = 0;
    let atOnce = 0;
    let answered = 0;
    const slow = http.createServer((req, res) => {
      open++;
      atOnce = Math.max(atOnce, open);
      req.resume();
      setTimeout(() => {
        open--;
        answered++;
        res.statusCode = 202;
        res.end();
      }, 1500);
    });
    await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
    try {
      const db = await testDb();
      const m = await createMerchant(`http://127.0.0.1:${(slow.address() as AddressInfo).port}/hooks`);
      const [{ id }] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [m.login]);
      const ids = await pushes(id, 200, 's');
      await waitFor(
        async () =>
          (
            await db.query(
              `SELECT count(*)::int AS n FROM webhook_messages WHERE message_id = ANY($1) AND status = 'delivered'`,
              [ids],
            )
          )[0].n === ids.length,
        { timeoutMs: 40_000, what: "C's pushes delivered" },
      );
      expect(answered).toBe(200);
      expect(atOnce).toBe(64);
      expect(hanging.size).toBeGreaterThan(0);
    } finally {
      slow.closeAllConnections();
      await new Promise((r) => slow.close(r));
    }
  });
});
