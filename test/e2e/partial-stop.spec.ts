import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TransactionEntity } from '@retain/db';
import { networkFeeFields } from '@retain/recovery';
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

// 100,000: the 30-day window is 26 s of real time.
const ENV = { RETRY_TIME_SCALE: '100000', JOB_LOCK_MS: '2000', REFUND_BATCH_CRON: '*/1 * * * * *' };
const PARTIAL_CARD = '4000000000003220';

// A stop of the whole amount (decisions §8) while the attempt of a partial authorization (decisions
// §15) is in flight: the capture of half turns the stop into a refund of that half, never of the amount
// asked; the pushes, the API, the refunds list and the rows say the same; the fees are recorded.
describe('a stop racing a partial authorization, through the real apps', () => {
  usePrivateDatabase('pstop');
  const apps: RunningApp[] = [];
  let client: ApiClient;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    apps.push(
      ...(await Promise.all([
        startApp('intake-api', { env: ENV }),
        startApp('submission-validator', { env: ENV }),
        startApp('retry-worker', { env: { ...ENV, TEST_PAUSE_AFTER_PROCESSOR_MS: '6000' } }),
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

  it('refunds the captured half, once, and every view agrees', { timeout: 120_000 }, async () => {
    const db = await testDb();
    const t = txn({ amount: 19.99 }, PARTIAL_CARD);
    const id = t['id'] as string;
    expect((await client.submit([t])).status).toBe(200);
    await waitFor(
      async () =>
        (
          await db.query(
            `SELECT 1 FROM attempts a JOIN transactions t ON t.id = a.transaction_id
              JOIN sandbox_operations s ON s.idempotency_key = a.vid
             WHERE t.merchant_txn_id = $1 AND a.state = 'pending'`,
            [id],
          )
        ).length > 0,
      { timeoutMs: 60_000, what: 'an attempt in flight' },
    );
    // The whole amount: accepted while in retry (at most the amount), refunded at most what is captured.
    expect((await client.request('POST', '/v1/retain/refunds', { refunds: [{ id, amount: 19.99 }] })).status).toBe(200);
    expect((await client.request('GET', `/v1/retain/transactions/${id}`)).json.data[0].status).toBe('Stop Requested');
    const final = await waitFor(
      async () => {
        const x = (await client.request('GET', `/v1/retain/transactions/${id}?related=true`)).json.data;
        return x[0].status === 'Refunded' ? x : null;
      },
      { timeoutMs: 60_000, what: 'captured then refunded' },
    );
    expect(final).toHaveLength(2);
    expect(final[0]).toMatchObject({
      amount: 19.99,
      partial_amount: 9.99,
      refunds: [{ amount: 9.99, status: 'Completed' }],
    });
    expect(final[1]).toMatchObject({ status: 'Captured', amount: 19.99, partial_amount: 9.99 });
    const listed = (await client.request('GET', `/v1/retain/refunds/${id}`)).json.data;
    expect(listed).toEqual([expect.objectContaining({ amount: 9.99, status: 'Completed' })]);

    const succeeded = await waitFor(() =>
      receiver.byEvent('retry succeeded').find((p) => p.body.header['transaction_id'] === id),
    );
    expect(succeeded.body.content).toMatchObject({ status: 'Captured', partial_amount: 9.99 });
    const completed = await waitFor(() =>
      receiver.byEvent('refund completed').find((p) => p.body.header['transaction_id'] === id),
    );
    expect(completed.body.content).toMatchObject({
      status: 'Refunded',
      partial_amount: 9.99,
      refunds: [{ amount: 9.99, status: 'Completed' }],
    });

    const row = await db.getRepository(TransactionEntity).findOneByOrFail({ merchantTxnId: id });
    expect(row).toMatchObject({ capturedAmountMinor: '999', partialAmountMinor: '999' });
    const fees = await networkFeeFields(db.manager, row);
    expect({ paid: row.networkFeesMinor, naive: row.naiveNetworkFeesMinor }).toEqual({
      paid: fees.networkFeesMinor,
      naive: fees.naiveNetworkFeesMinor,
    });
    const [{ sum }] = await db.query(
      `SELECT sum(amount_minor)::int AS sum FROM refunds WHERE transaction_id = $1 AND status = 'Completed'`,
      [row.id],
    );
    expect(sum).toBe(999);
    // Nothing left: more is RET027.
    const more = await client.request('POST', '/v1/retain/refunds', { refunds: [{ id, amount: 0.01 }] });
    expect(more.json.rejected[0].errors[0].code).toBe('RET027');
  });
});
