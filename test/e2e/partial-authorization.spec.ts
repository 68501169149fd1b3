import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROLLUP } from '@retain/db';
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
  usePrivateDatabase,
} from '@retain/testing';

const ENV = { RETRY_TIME_SCALE: '100000', JOB_LOCK_MS: '2000', REFUND_BATCH_CRON: '*/1 * * * * *' };
const PARTIAL_CARD = '4000000000003220';

// decisions §15: 4000000000003220 is approved for half of the amount. The transaction ends
// Captured with partial_amount = the captured half, which is also all that can be refunded; the
// push and the analytics count what was captured, not what was asked. Generated attempts inherit
// the submitted metadata plus the service's read-only `retain:` entries.
describe('partial authorizations through the real apps', () => {
  // Its own database and queues: a time-scaled recovery window has no room for other files' backlog.
  usePrivateDatabase('par');
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

  const related = async (id: string) =>
    (await client.request('GET', `/v1/retain/transactions/${id}?related=true`)).json.data as Record<string, any>[];

  it('refuses metadata under the reserved prefix with RET009 and saves nothing', async () => {
    const t = txn({ metadata: { plan: 'gold', 'retain:attempt': '7' } }, PARTIAL_CARD);
    const r = await client.submit([t]);
    expect(r.status).toBe(207);
    expect(r.json.rejected[0].errors[0].code).toBe('RET009');
    expect((await client.request('GET', `/v1/retain/transactions/${t['id']}`)).status).toBe(404);
  });

  it('ends Captured with partial_amount; refunds are limited to what was captured', { timeout: 90_000 }, async () => {
    const t = txn({ amount: 19.99 }, PARTIAL_CARD);
    const id = t['id'] as string;
    expect((await client.submit([t])).status).toBe(200);
    const [submitted, attempt] = await waitFor(
      async () => {
        const rows = await related(id);
        return rows[0]?.status === 'Captured' ? rows : null;
      },
      { timeoutMs: 60_000, what: 'Captured' },
    );
    // Half of 19.99, rounded down to the cent.
    expect(submitted).toMatchObject({ id, amount: 19.99, partial_amount: 9.99, status: 'Captured' });
    expect(attempt).toMatchObject({ amount: 19.99, partial_amount: 9.99, status: 'Captured', retry_number: 1 });
    // Metadata: the attempt inherits the submitted transaction's, plus the service's read-only entries.
    expect(submitted!['metadata']).toEqual({ plan: 'gold' });
    expect(attempt!['metadata']).toEqual({
      plan: 'gold',
      'retain:generated': 'retry',
      'retain:original_vid': submitted!['vid'],
      'retain:retry_number': '1',
      'retain:policy_version': 'adaptive-2026-11',
    });

    const push = await waitFor(() =>
      receiver.byEvent('retry succeeded').find((p) => p.body.header['transaction_id'] === id),
    );
    expect(push.body.content as Record<string, unknown>).toMatchObject({ partial_amount: 9.99 });

    // More than was captured is refused and changes nothing.
    const over = await client.request('POST', '/v1/retain/refunds', { refunds: [{ id, amount: 10 }] });
    expect(over.status).toBe(207);
    expect(over.json.rejected[0].errors[0].code).toBe('RET027');
    expect((await related(id))[0]!.status).toBe('Captured');

    // A refund without an amount refunds what was captured: the transaction ends Refunded.
    expect((await client.request('POST', '/v1/retain/refunds', { refunds: [{ id }] })).status).toBe(200);
    const refunded = await waitFor(
      async () => {
        const rows = await related(id);
        return rows[0]?.status === 'Refunded' ? rows[0] : null;
      },
      { timeoutMs: 30_000, what: 'Refunded' },
    );
    expect(refunded.refunds).toEqual([expect.objectContaining({ amount: 9.99, status: 'Completed' })]);

    // The analytics rollup counts the captured half as recovered.
    const db = await testDb();
    const [row] = await db.query(
      `SELECT sum(r.recovered_amount)::int AS recovered FROM (${ROLLUP}) r
         JOIN transactions t ON t.merchant_id = r.merchant_id
        WHERE t.merchant_txn_id = $1 AND r.dim = 'all' AND r.day = (t.submitted_ts AT TIME ZONE 'UTC')::date`,
      [id],
    );
    expect(row.recovered).toBe(999);
  });
});
