import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { EventName } from '@retain/domain';
import { OutboxRelay, QueueRegistry, announce, createRedis } from '@retain/queues';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApiClient,
  closeTestDb,
  createMerchant,
  startApp,
  testDb,
  txn,
  usePrivateDatabase,
  waitFor,
  type RunningApp,
} from '@retain/testing';

const FAST = { RETRY_TIME_SCALE: '1000000', JOB_LOCK_MS: '5000' };

/** Ctrl-C under `npm start` delivers two signals: the terminal's SIGINT to the group, then the forwarded one. */
async function doubleSignal(app: RunningApp, first: NodeJS.Signals, second: NodeJS.Signals): Promise<void> {
  app.child.kill(first);
  await waitFor(() => app.logs().includes(`received ${first}`), { what: `${app.app} to see ${first}` });
  app.child.kill(second);
  await waitFor(() => app.logs().includes(`received ${second}`) || app.child.exitCode !== null, {
    what: `${app.app} to see ${second}`,
  });
}

// Graceful shutdown: a signal, or the two that Ctrl-C under `npm start` delivers, lets the job in
// flight finish; the process exits 0 and the row shows the finished work.
describe('graceful shutdown with work in flight', () => {
  // Its own database and queues: a review job other files left in the worker's shared queue would
  // otherwise be ahead of this file's (a fresh-clone run timed out waiting for `reviewed`).
  usePrivateDatabase('shutdown');
  let api: RunningApp;
  let validator: RunningApp;
  const redis = createRedis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
  let queues: QueueRegistry;

  beforeAll(async () => {
    queues = new QueueRegistry(redis, process.env['QUEUE_PREFIX']!);
    [api, validator] = await Promise.all([
      startApp('intake-api', { env: FAST }),
      startApp('submission-validator', { env: FAST }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([api.stop(), validator.stop()]);
    await queues.close();
    redis.disconnect();
    await closeTestDb();
  });

  /** A transaction reviewed and due now: the next retry-worker tick takes it. */
  const dueTransaction = async (): Promise<string> => {
    const client = new ApiClient(api.url, (await createMerchant(null)).api_key);
    const t = txn({}, '4111111111111111');
    expect((await client.submit([t])).status).toBe(200);
    const db = await testDb();
    const id = t['id'] as string;
    await waitFor(
      async () =>
        (
          await db.query(
            `SELECT 1 FROM transactions WHERE merchant_txn_id = $1 AND review_status = 'passed' AND next_attempt_at IS NOT NULL`,
            [id],
          )
        ).length === 1,
      { what: 'reviewed' },
    );
    await db.query(`UPDATE transactions SET next_attempt_at = now() WHERE merchant_txn_id = $1`, [id]);
    return id;
  };

  /** The processor was called for the transaction (the worker now pauses before recording it). */
  const charged = async (id: string): Promise<boolean> =>
    (
      await (
        await testDb()
      ).query(
        `SELECT 1 FROM sandbox_operations s JOIN attempts a ON a.vid = s.idempotency_key
           JOIN transactions t ON t.id = a.transaction_id WHERE t.merchant_txn_id = $1`,
        [id],
      )
    ).length > 0;

  const statusOf = async (id: string): Promise<string> =>
    (await (await testDb()).query(`SELECT status FROM transactions WHERE merchant_txn_id = $1`, [id]))[0].status;

  it.each([
    ['SIGINT', 'SIGTERM'],
    ['SIGTERM', 'SIGTERM'],
  ] as const)('retry-worker: %s then %s mid-attempt finishes the attempt and exits 0', async (first, second) => {
    const id = await dueTransaction();
    const worker = await startApp('retry-worker', { env: { ...FAST, TEST_PAUSE_AFTER_PROCESSOR_MS: '3000' } });
    await waitFor(() => charged(id), { what: 'the processor call' });
    await doubleSignal(worker, first, second);
    expect(await worker.exited).toBe(0);
    expect(await statusOf(id)).toBe('Captured');
  });

  it('retry-worker: one SIGTERM mid-attempt finishes the attempt and exits 0', async () => {
    const id = await dueTransaction();
    const worker = await startApp('retry-worker', { env: { ...FAST, TEST_PAUSE_AFTER_PROCESSOR_MS: '2000' } });
    await waitFor(() => charged(id), { what: 'the processor call' });
    expect(await worker.stop('SIGTERM')).toBe(0);
    expect(await statusOf(id)).toBe('Captured');
  });

  it('webhook-dispatcher: SIGINT twice while the merchant is slow to answer; the push is delivered, exit 0', async () => {
    // A receiver that holds each request until the test lets it answer.
    const held: http.ServerResponse[] = [];
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => held.push(res));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const merchant = await createMerchant(`http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`);
      const db = await testDb();
      const [m] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [merchant.login]);
      const dispatcher = await startApp('webhook-dispatcher');
      const outboxIds = await db.transaction((tx) =>
        announce(tx, [
          {
            merchantId: m.id,
            eventName: EventName.RetrySucceeded,
            payloadId: 'p'.repeat(40),
            merchantTransactionId: 'inv-shutdown',
            content: { id: 'inv-shutdown', status: 'Captured' },
          },
        ]),
      );
      await new OutboxRelay(db, queues).publish(outboxIds);
      await waitFor(() => held.length > 0, { what: 'the push to reach the receiver' });
      await doubleSignal(dispatcher, 'SIGINT', 'SIGINT');
      held.shift()!.writeHead(202).end();
      expect(await dispatcher.exited).toBe(0);
      const [row] = await db.query(
        `SELECT w.status FROM webhook_messages w JOIN outbox o ON o.payload->>'messageId' = w.message_id WHERE o.id = $1`,
        [outboxIds[0]],
      );
      expect(row.status).toBe('delivered');
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});
