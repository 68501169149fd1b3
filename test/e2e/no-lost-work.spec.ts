import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis } from '@retain/queues';
import {
  ApiClient,
  WebhookReceiver,
  closeTestDb,
  createMerchant,
  startApp,
  testDb,
  txn,
  waitFor,
  type RunningApp,
  type TestMerchant,
  usePrivateDatabase,
} from '@retain/testing';

// architecture "Postgres is the source of truth; Redis carries work, not state": with the real
// processes running, wiping every Redis key of the queues right after a submission and again while
// its push is pending loses nothing and duplicates nothing.
describe('no lost work when Redis loses everything', () => {
  // Its own database and queues: its apps serve this file's work, not a backlog earlier files left.
  usePrivateDatabase('nlw');
  const ENV = { WEBHOOK_RETRY_SCHEDULE: '1s,1s,1s,1s,1s,1s,1s,1s' };
  const redis = createRedis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
  let apps: RunningApp[] = [];
  let receiver: WebhookReceiver;
  let merchant: TestMerchant;
  let client: ApiClient;

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    apps = await Promise.all([
      startApp('intake-api', { env: ENV }),
      startApp('submission-validator', { env: ENV }),
      startApp('webhook-dispatcher', { env: ENV }),
    ]);
    merchant = await createMerchant(receiver.url);
    client = new ApiClient(apps[0]!.url, merchant.api_key);
  });
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.stop()));
    redis.disconnect();
    await receiver.stop();
    await closeTestDb();
  });

  /** Deletes every key of this run's queues (QUEUE_PREFIX), as a Redis restart without persistence would. */
  const wipeQueues = async (): Promise<number> => {
    const keys = await redis.keys(`${process.env['QUEUE_PREFIX']}*`);
    if (keys.length > 0) await redis.del(...keys);
    return keys.length;
  };

  it('reviews once and delivers exactly one validation failed push per message', async () => {
    receiver.status = 503; // keep the push pending until the second wipe
    const garbage = txn();
    (garbage['payment_method'] as any).credit_card.account = 'eyJhbGciOiJSU0EtT0FFUC0yNTYifQ.AAAA.BBBB.CCCC.DDDD';
    const token = txn({ payment_method: { id: 'tok_nobody_knows', is_tokenized: true } });
    const good = txn();
    const r = await client.submit([garbage, token, good]);
    expect(r.status).toBe(200);
    await wipeQueues();
    const requestId = r.headers.get('x-request-id')!;

    const db = await testDb();
    const [message] = await waitFor(
      async () => {
        const rows = await db.query(
          `SELECT w.message_id, w.status FROM webhook_messages w
             JOIN webhook_deliveries d ON d.message_id = w.message_id
            WHERE w.payload_id = $1 AND w.status = 'pending' LIMIT 1`,
          [requestId],
        );
        return rows.length > 0 ? rows : null;
      },
      { timeoutMs: 45_000, what: 'a pending validation failed push with a failed attempt' },
    );
    expect(await wipeQueues()).toBeGreaterThan(0);
    receiver.status = 202;

    await waitFor(
      async () =>
        (await db.query(`SELECT status FROM webhook_messages WHERE message_id = $1`, [message.message_id]))[0]
          .status === 'delivered',
      { timeoutMs: 45_000, what: 'delivery after the second wipe' },
    );
    // Until no work is left that could still produce a duplicate: every outbox row (the review job, each
    // delivery job) completed, so no sweeper publishes anything again.
    await waitFor(
      async () =>
        (
          await db.query(
            `SELECT count(*)::int AS n FROM outbox o WHERE o.completed_at IS NULL
                AND (o.payload->>'submissionId' = (SELECT id::text FROM submissions WHERE request_id = $1)
                  OR o.payload->>'messageId' IN (SELECT w.message_id FROM webhook_messages w
                       JOIN merchants m ON m.id = w.merchant_id WHERE m.login = $2))`,
            [requestId, merchant.login],
          )
        )[0].n === 0,
      { timeoutMs: 45_000, what: 'every outbox row completed' },
    );

    // One review: the submission reviewed once, one push announced, every transaction judged once.
    const [sub] = await db.query(`SELECT reviewed_at, review_error_count FROM submissions WHERE request_id = $1`, [
      requestId,
    ]);
    expect(sub.reviewed_at).not.toBeNull();
    expect(sub.review_error_count).toBe(2);
    const messages = await db.query(
      `SELECT message_id FROM webhook_messages WHERE merchant_id = (SELECT id FROM merchants WHERE login = $1)`,
      [merchant.login],
    );
    expect(messages).toHaveLength(1);
    const statuses = await db.query(
      `SELECT merchant_txn_id, review_status FROM transactions WHERE submission_id =
         (SELECT id FROM submissions WHERE request_id = $1) ORDER BY merchant_txn_id`,
      [requestId],
    );
    expect(Object.fromEntries(statuses.map((x: any) => [x.merchant_txn_id, x.review_status]))).toEqual({
      [garbage['id'] as string]: 'rejected',
      [token['id'] as string]: 'rejected',
      [good['id'] as string]: 'passed',
    });

    // What the merchant saw: exactly one accepted validation failed push per message id.
    const accepted = receiver.received.filter((p) => p.answered >= 200 && p.answered < 300);
    expect(accepted.map((p) => p.body.header['message_id'])).toEqual([message.message_id]);
    const push = accepted[0]!;
    expect(push.body.header['event_name']).toBe('validation failed');
    expect(push.body.header['request_id']).toBe(requestId);
    expect(push.body.header['error_count']).toBe(2);
    const codes = Object.fromEntries(
      (push.body.content['rejected'] as any[]).map((x) => [x.id, x.errors.map((e: any) => e.code)]),
    );
    expect(codes).toEqual({ [garbage['id'] as string]: ['RET010'], [token['id'] as string]: ['RET011'] });
    // Every delivery attempt carried the same message id.
    expect(new Set(receiver.received.map((p) => p.body.header['message_id']))).toEqual(new Set([message.message_id]));
  });
});
