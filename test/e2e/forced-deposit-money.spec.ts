import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TransactionEntity } from '@retain/db';
import { networkFeeFields } from '@retain/recovery';
import {
  ApiClient,
  closeTestDb,
  createMerchant,
  startApp,
  testDb,
  txn,
  waitFor,
  type RunningApp,
  usePrivateDatabase,
} from '@retain/testing';

const ENV = { RETRY_TIME_SCALE: '1000000', JOB_LOCK_MS: '2000', REFUND_BATCH_CRON: '*/1 * * * * *' };
/** Declined 05 on every attempt: a soft decline whose schedule runs out. */
const ALWAYS_05 = '4000000000000002';
const cliMain = path.resolve(__dirname, '../../dist/apps/cli/src/main.js');

// The money of a forced deposit (service-spec forced_deposit, previous_billing_count -1; README
// "Forced deposit"): what is charged is the amount asked, reported as such on the transaction, its
// attempt and the analytics; it is refunded like any capture; -1 opts out and nothing is charged.
// The network fees recorded at the end of each recovery are those of its rows, and the analytics'
// network_fees_avoided is their sum.
describe('forced deposit amounts and fees through the real apps', () => {
  usePrivateDatabase('fdm');
  const apps: RunningApp[] = [];
  let api: ApiClient;
  /** Another merchant (forced deposit on too): each merchant's card history is its own. */
  let api2: ApiClient;

  beforeAll(async () => {
    apps.push(
      ...(await Promise.all([
        startApp('intake-api', { env: ENV }),
        startApp('submission-validator', { env: ENV }),
        startApp('retry-worker', { env: ENV }),
        startApp('refund-batcher', { env: ENV }),
      ])),
    );
    const clients = [];
    for (let i = 0; i < 2; i++) {
      const m = await createMerchant();
      const r = spawnSync(process.execPath, [cliMain, 'merchant', 'set-forced-deposit', '--login', m.login, '--on'], {
        env: process.env,
        encoding: 'utf8',
      });
      expect(r.status).toBe(0);
      clients.push(new ApiClient(apps[0]!.url, m.api_key));
    }
    [api, api2] = clients as [ApiClient, ApiClient];
  });
  afterAll(async () => {
    for (const a of apps) await a.stop();
    await closeTestDb();
  });

  const related = async (id: string, client = api) =>
    (await client.request('GET', `/v1/retain/transactions/${id}?related=true`)).json.data as Record<string, any>[];
  const until = (id: string, statuses: string[], client = api) =>
    waitFor(
      async () => {
        const rows = await related(id, client);
        return statuses.includes(rows?.[0]?.status) ? rows : null;
      },
      { timeoutMs: 60_000, what: `${id} ${statuses.join('|')}` },
    );

  it(
    'charges and reports the amount asked, refunds it, and the fees figures are the rows',
    { timeout: 150_000 },
    async () => {
      const forced = txn({ amount: 12.34, auth_code: '05', previous_billing_count: 3 }, ALWAYS_05);
      const optedOut = txn({ amount: 56.78, auth_code: '05', previous_billing_count: -1 }, ALWAYS_05);
      expect((await api.submit([forced])).status).toBe(200);
      expect((await api2.submit([optedOut])).status).toBe(200);
      const [f, ...fAttempts] = await until(forced['id'] as string, ['Captured', 'Cancelled']);
      const [o, ...oAttempts] = await until(optedOut['id'] as string, ['Cancelled', 'Captured'], api2);

      expect(f).toMatchObject({ status: 'Captured', amount: 12.34, forced_deposit: true });
      expect(f).not.toHaveProperty('partial_amount');
      expect(fAttempts.at(-1)).toMatchObject({ status: 'Captured', amount: 12.34, forced_deposit: true });
      expect(fAttempts.at(-1)).not.toHaveProperty('partial_amount');
      expect(o).toMatchObject({ status: 'Cancelled', amount: 56.78, forced_deposit: false, refunds: [] });
      expect(oAttempts.every((a) => a.status === 'Failed' && a.forced_deposit === false)).toBe(true);

      // Nothing was charged on the opted-out one: RET015; the forced deposit is refunded in full.
      const stop = await api2.request('POST', '/v1/retain/refunds', { refunds: [{ id: optedOut['id'] }] });
      expect(stop.json.rejected[0].errors[0].code).toBe('RET015');
      expect((await api.request('POST', '/v1/retain/refunds', { refunds: [{ id: forced['id'] }] })).status).toBe(200);
      const [refunded] = await until(forced['id'] as string, ['Refunded']);
      expect(refunded!.refunds).toEqual([expect.objectContaining({ amount: 12.34, status: 'Completed' })]);

      const db = await testDb();
      const rows = await db.getRepository(TransactionEntity).find({
        where: [{ merchantTxnId: forced['id'] as string }, { merchantTxnId: optedOut['id'] as string }],
      });
      expect(rows).toHaveLength(2);
      let avoided = 0;
      for (const t of rows) {
        const fees = await networkFeeFields(db.manager, t);
        expect({ id: t.merchantTxnId, paid: t.networkFeesMinor, naive: t.naiveNetworkFeesMinor }).toEqual({
          id: t.merchantTxnId,
          paid: fees.networkFeesMinor,
          naive: fees.naiveNetworkFeesMinor,
        });
        // The analytics below are the first merchant's.
        if (t.merchantTxnId === forced['id']) avoided += fees.naiveNetworkFeesMinor! - fees.networkFeesMinor!;
      }
      const captured = rows.find((t) => t.merchantTxnId === forced['id'])!;
      expect(captured).toMatchObject({ capturedAmountMinor: '1234', forcedDeposit: true, partialAmountMinor: null });
      // The analytics say the same: recovered 12.34 and refunded 12.34 (the forced deposit), fees avoided.
      const day = new Date().toISOString().slice(0, 10);
      const a = await api.request('GET', `/v1/retain/analytics?from=${day}&to=${day}`);
      expect(a.status).toBe(200);
      const usd = (a.json.currencies as any[]).find((c) => c.currency === 'USD');
      expect(usd.network_fees_avoided).toBe(avoided / 100);
      expect(usd.totals).toMatchObject({ recovered_amount: 12.34, refunded_amount: 12.34 });
    },
  );
});
