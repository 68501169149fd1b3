import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApiClient,
  createMerchant,
  startApp,
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

// Issue 12: the retry worker asks the processor which captures have settled and moves them from
// Captured to Settled (the sandbox settles at the next UTC midnight, on the time-scaled clock).
// A settled transaction is refunded like a captured one.
describe('settlement through the real apps', () => {
  // The settlement check takes the least recently checked Captured transactions of the whole database.
  usePrivateDatabase('stl');
  const apps: RunningApp[] = [];
  let client: ApiClient;

  beforeAll(async () => {
    apps.push(
      ...(await Promise.all([
        startApp('intake-api', { env: ENV }),
        startApp('submission-validator', { env: ENV }),
        startApp('retry-worker', { env: ENV }),
        startApp('refund-batcher', { env: ENV }),
      ])),
    );
    const merchant = await createMerchant();
    client = new ApiClient(apps[0]!.url, merchant.api_key);
  });
  afterAll(async () => {
    for (const a of apps) await a.stop();
  });

  const statusOf = async (id: string): Promise<string> =>
    (await client.request('GET', `/v1/retain/transactions/${id}`)).json.data[0].status;

  it('moves a recovered transaction from Captured to Settled, then refunds it', { timeout: 60_000 }, async () => {
    const t = txn();
    const id = t['id'] as string;
    expect((await client.submit([t])).status).toBe(200);
    await waitFor(async () => (await statusOf(id)) === 'Settled', { timeoutMs: 30_000, what: 'Settled' });

    expect((await client.request('POST', '/v1/retain/refunds', { refunds: [{ id }] })).status).toBe(200);
    await waitFor(async () => (await statusOf(id)) === 'Refunded', { timeoutMs: 30_000, what: 'Refunded' });
  });
});
