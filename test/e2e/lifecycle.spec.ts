import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApiClient,
  WebhookReceiver,
  closeTestDb,
  createMerchant,
  startApp,
  testDb,
  txn,
  waitFor,
  type AppName,
  type RunningApp,
  type TestMerchant,
  usePrivateDatabase,
} from '@retain/testing';

const ENV = {
  RETRY_TIME_SCALE: '1000000',
  JOB_LOCK_MS: '2000',
  LOG_LEVEL: 'debug',
  REFUND_BATCH_CRON: '*/1 * * * * *',
};
const WORKERS: AppName[] = ['submission-validator', 'retry-worker', 'refund-batcher', 'webhook-dispatcher'];
const CARDS = ['4111111111111111', '5555555555554444', '4000000000000077', '4000000000000119', '4000000000000002'];

// Issue 6: the whole service as processes — logs never carry secrets, and SIGTERM loses nothing.
describe('the whole service', () => {
  // Its own database and queues: a time-scaled recovery window has no room for other files' backlog.
  usePrivateDatabase('lif');
  const apps = new Map<AppName, RunningApp>();
  const logs: string[] = [];
  let receiver: WebhookReceiver;
  let merchant: TestMerchant;
  let client: ApiClient;

  const start = async (app: AppName): Promise<void> => {
    apps.set(app, await startApp(app, { env: ENV }));
  };
  const stop = async (app: AppName, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> => {
    const a = apps.get(app)!;
    const code = await a.stop(signal);
    logs.push(a.logs());
    return code;
  };

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    await Promise.all((['intake-api', ...WORKERS] as AppName[]).map(start));
    merchant = await createMerchant(receiver.url);
    client = new ApiClient(apps.get('intake-api')!.url, merchant.api_key);
  });
  afterAll(async () => {
    for (const app of apps.keys()) await stop(app);
    await receiver.stop();
    await closeTestDb();
  });

  it(
    'finishes every recovery, refund and push exactly once across SIGTERMs of every worker',
    { timeout: 180_000 },
    async () => {
      const batch = Array.from({ length: 150 }, (_, i) => txn({}, CARDS[i % CARDS.length]));
      const r = await client.submit(batch);
      expect(r.status).toBe(200);
      const ids = batch.map((t) => t['id'] as string);
      // Restart each worker in the middle of the flow; each must exit 0 and hand over its work.
      for (const app of WORKERS) {
        await new Promise((res) => setTimeout(res, 300));
        expect(await stop(app), `${app} exit code`).toBe(0);
        await start(app);
      }
      const db = await testDb();
      await waitFor(
        async () => {
          const [x] = await db.query(
            `SELECT count(*) FILTER (WHERE status IN ('Captured', 'Settled', 'Cancelled'))::int AS done FROM transactions
            WHERE merchant_txn_id = ANY($1::text[])`,
            [ids],
          );
          return x.done === ids.length;
        },
        { timeoutMs: 90_000, what: 'every transaction final' },
      );
      // Captured, or Settled already (the settlement check moves captures on): both refundable. Seen
      // once: every capture settled between the two queries, so the refund call named none (400).
      const captured: { merchant_txn_id: string }[] = await db.query(
        `SELECT merchant_txn_id FROM transactions WHERE merchant_txn_id = ANY($1::text[])
            AND status IN ('Captured', 'Settled') LIMIT 10`,
        [ids],
      );
      expect(captured.length).toBeGreaterThan(0);
      const refund = await client.request('POST', '/v1/retain/refunds', {
        refunds: captured.map((c) => ({ id: c.merchant_txn_id })),
      });
      expect(refund.status).toBe(200);
      await stop('refund-batcher');
      await start('refund-batcher');
      await waitFor(
        async () => {
          const [x] = await db.query(
            `SELECT count(*)::int AS n FROM transactions WHERE merchant_txn_id = ANY($1::text[]) AND status = 'Refunded'`,
            [captured.map((c) => c.merchant_txn_id)],
          );
          return x.n === captured.length;
        },
        { what: 'refunds completed' },
      );
      // Every push announced was delivered, each message id exactly once.
      await waitFor(
        async () => {
          const [x] = await db.query(
            `SELECT count(*)::int AS n FROM webhook_messages w JOIN merchants m ON m.id = w.merchant_id
              WHERE m.login = $1 AND w.status = 'pending'`,
            [merchant.login],
          );
          return x.n === 0;
        },
        { what: "this merchant's pushes delivered" },
      );
      const [{ n: messages }] = await db.query(
        `SELECT count(*)::int AS n FROM webhook_messages w JOIN merchants m ON m.id = w.merchant_id WHERE m.login = $1`,
        [merchant.login],
      );
      const ids2 = receiver.received.map((p) => String(p.body.header['message_id']));
      expect(new Set(ids2).size).toBe(messages);
      // No double charge, no refund sent twice.
      const dup = await db.query(
        `SELECT a.transaction_id FROM attempts a WHERE a.state = 'captured' GROUP BY 1 HAVING count(*) > 1`,
      );
      expect(dup).toEqual([]);
      // Every refund of this merchant reached the processor once and only once: one sandbox
      // operation per refund vid (the idempotency key), and each refund Completed.
      const sent: { vid: string; status: string; ops: number }[] = await db.query(
        `SELECT r.vid, r.status, count(o.idempotency_key)::int AS ops
           FROM refunds r JOIN merchants m ON m.id = r.merchant_id
           LEFT JOIN sandbox_operations o ON o.idempotency_key = r.vid AND o.kind = 'refund'
          WHERE m.login = $1 AND r.kind = 'refund' GROUP BY r.vid, r.status`,
        [merchant.login],
      );
      expect(sent).toHaveLength(captured.length);
      expect(sent.filter((s) => s.status !== 'Completed' || s.ops !== 1)).toEqual([]);
    },
  );

  it('never writes card numbers, API keys or webhook secrets to any log', async () => {
    // More traffic with secrets in places a careless log line would catch them.
    const noted = txn({ metadata: { note: 'card 4111111111111111' } }, '4000000000000077');
    const calls = [
      await client.submit([noted]),
      await client.request('GET', '/v1/retain/transactions?limit=1', undefined, {
        authorization: `Basic ${Buffer.from(`${merchant.login}:${merchant.api_key}`).toString('base64')}`,
      }),
      await client.request(
        'POST',
        '/v1/retain/transactions',
        '{"transactions": [{"id": "x", "payment_method": {"credit_card": {"account": "5555555555554444"',
      ),
    ];
    expect(calls.map((c) => c.status)).toEqual([200, 200, 400]);
    // Until every app has done its part with the noted transaction: review, three attempts and the
    // delivery of its `retry succeeded` push (the API wrote its lines before it answered).
    await waitFor(
      () =>
        receiver
          .byEvent('retry succeeded')
          .some((p) => p.body.header['transaction_id'] === noted['id'] && p.answered === 202),
      { what: 'the retry succeeded push of the noted transaction' },
    );
    const all = [...logs, ...[...apps.values()].map((a) => a.logs())].join('\n');
    expect(all.length).toBeGreaterThan(1000);
    for (const secret of [...CARDS, merchant.api_key, merchant.webhook_secret, merchant.webhook_secret.slice(6)]) {
      expect(all.includes(secret), `a log contains ${secret.slice(0, 6)}…`).toBe(false);
    }
    // The logs are JSON lines.
    const lines = all.split('\n').filter((l) => l.startsWith('{'));
    expect(lines.length).toBeGreaterThan(20);
    expect(() => lines.slice(0, 50).forEach((l) => JSON.parse(l))).not.toThrow();
  });
});
