import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApiClient,
  WebhookReceiver,
  closeTestDb,
  createMerchant,
  startApp,
  testDb,
  txn,
  usePrivateDatabase,
  waitFor,
  type RunningApp,
} from '@retain/testing';

const ENV = {
  RETRY_TIME_SCALE: '100000',
  JOB_LOCK_MS: '2000',
  REFUND_BATCH_CRON: '*/1 * * * * *',
  SETTLEMENT_CHECK_INTERVAL: '1s',
};
const PARTIAL_CARD = '4000000000003220';

// The amounts a merchant is told about a partial authorization (decisions §15) that settles and is
// then refunded in parts (decisions §8, README "Settlement"): the API (one, related, list), the
// refunds list, the pushes and the rows agree, and nothing past the captured half is ever refunded.
describe('a partial authorization settled and refunded, through the real apps', () => {
  usePrivateDatabase('pst');
  const apps: RunningApp[] = [];
  let client: ApiClient;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    apps.push(
      ...(await Promise.all([
        startApp('intake-api', { env: ENV }),
        startApp('submission-validator', { env: ENV }),
        startApp('retry-worker', { env: ENV }),
        startApp('refund-batcher', { env: ENV }),
        startApp('webhook-dispatcher', { env: ENV }),
      ])),
    );
    const merchant = await createMerchant(receiver.url);
    client = new ApiClient(apps[0]!.url, merchant.api_key);
  });
  afterAll(async () => {
    for (const a of apps) await a.stop();
    await receiver.stop();
    await closeTestDb();
  });

  const one = async (id: string) =>
    (await client.request('GET', `/v1/retain/transactions/${id}`)).json.data[0] as Record<string, any>;
  const until = (id: string, status: string) =>
    waitFor(async () => ((await one(id)).status === status ? one(id) : null), { timeoutMs: 30_000, what: status });
  const refund = (id: string, amount?: number) =>
    client.request('POST', '/v1/retain/refunds', { refunds: [amount === undefined ? { id } : { id, amount }] });

  it('settles the captured half, refunds at most it, and every view says the same', { timeout: 120_000 }, async () => {
    const t = txn({ amount: 20.27 }, PARTIAL_CARD);
    const id = t['id'] as string;
    expect((await client.submit([t])).status).toBe(200);
    // Half of 20.27 rounded down: 10.13 (which the sandbox refuses to refund: a refund of it fails).
    const settled = await until(id, 'Settled');
    expect(settled).toMatchObject({ amount: 20.27, partial_amount: 10.13, forced_deposit: false });
    const listed = (await client.request('GET', `/v1/retain/transactions?limit=10`)).json.data as any[];
    expect(listed.find((r) => r.id === id)).toMatchObject({ status: 'Settled', amount: 20.27, partial_amount: 10.13 });
    const push = await waitFor(() =>
      receiver.byEvent('retry succeeded').find((p) => p.body.header['transaction_id'] === id),
    );
    expect(push.body.content).toMatchObject({ amount: 20.27, partial_amount: 10.13, status: 'Captured' });

    // More than the half: RET027, nothing changes.
    const over = await refund(id, 10.14);
    expect(over.json.rejected[0].errors[0].code).toBe('RET027');
    // The whole half, refused by the processor (.13): back to Settled, nothing refunded.
    expect((await refund(id)).status).toBe(200);
    await waitFor(async () => receiver.byEvent('refund failed').find((p) => p.body.header['transaction_id'] === id));
    expect(await until(id, 'Settled')).toMatchObject({ refunds: [{ amount: 10.13, status: 'Failed' }] });

    // 6.00, then 4.03, then the rest (0.10) without an amount.
    expect((await refund(id, 6)).status).toBe(200);
    await until(id, 'Partially Refunded');
    expect((await refund(id, 4.14)).json.rejected[0].errors[0].code).toBe('RET027');
    expect((await refund(id, 4.03)).status).toBe(200);
    await waitFor(async () =>
      (await one(id)).refunds.filter((r: any) => r.status === 'Completed').length === 2 ? true : null,
    );
    expect((await refund(id)).status).toBe(200);
    const refunded = await until(id, 'Refunded');
    const completed = (refunded.refunds as any[]).filter((r) => r.status === 'Completed').map((r) => r.amount);
    expect(completed.sort()).toEqual([0.1, 4.03, 6]);
    expect((await refund(id, 0.01)).json.rejected[0].errors[0].code).toBe('RET027');

    // The refunds list and the rows say the same; the pushes carried those refunds.
    const listedRefunds = (await client.request('GET', `/v1/retain/refunds/${id}`)).json.data as any[];
    expect(
      listedRefunds.filter((r) => r.status === 'Completed').reduce((s, r) => s + Math.round(r.amount * 100), 0),
    ).toBe(1013);
    const db = await testDb();
    const [row] = await db.query(
      `SELECT t.status, t.captured_amount_minor::int AS captured, t.partial_amount_minor::int AS partial,
              t.settled_at IS NOT NULL AS settled,
              (SELECT sum(amount_minor)::int FROM refunds r WHERE r.transaction_id = t.id AND r.status = 'Completed') AS refunded,
              (SELECT sum(coalesce(partial_amount_minor, amount_minor))::int FROM attempts a
                WHERE a.transaction_id = t.id AND a.state = 'captured') AS charged
         FROM transactions t WHERE t.merchant_txn_id = $1`,
      [id],
    );
    expect(row).toEqual({
      status: 'Refunded',
      captured: 1013,
      partial: 1013,
      settled: true,
      refunded: 1013,
      charged: 1013,
    });
    await waitFor(() =>
      receiver.byEvent('refund completed').filter((p) => p.body.header['transaction_id'] === id).length >= 3
        ? true
        : null,
    );
    const last = receiver
      .byEvent('refund completed')
      .filter((p) => p.body.header['transaction_id'] === id)
      .find((p) => (p.body.content as any).status === 'Refunded');
    expect(last?.body.content).toMatchObject({ partial_amount: 10.13, amount: 20.27 });
  });
});
