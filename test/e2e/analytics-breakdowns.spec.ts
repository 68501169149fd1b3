import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApiClient,
  closeTestDb,
  createMerchant,
  startApp,
  txn,
  uniqueId,
  usePrivateDatabase,
  waitFor,
  type RunningApp,
} from '@retain/testing';

const ENV = { RETRY_TIME_SCALE: '100000', JOB_LOCK_MS: '2000' };
const FINAL = ['Captured', 'Cancelled', 'Stopped'];
/** Declined 51 (soft) on attempts 1-2, approved on attempt 3 (decisions §12). */
const FUNDS_THEN_APPROVED = '4000000000000077';
/** Declined 46 (closed account, Visa category 1): the account's other card is charged (decisions §15). */
const CLOSED_ACCOUNT = '4000000000000507';

// The analytics breakdowns (decline class, card network, BIN, country) put every figure of a transaction
// under the keys it had when the review passed it: a capture clears auth_code_description and an adopted
// payment method changes the card and billing address, but the transaction's failure, its attempts and
// its recovery stay under one key, so each key's recovery rate is that of its own failures.
describe('analytics breakdowns through the real apps', () => {
  // Its own database and queues: a time-scaled recovery window has no room for other files' backlog.
  usePrivateDatabase('anb');
  const apps: RunningApp[] = [];

  beforeAll(async () => {
    apps.push(
      ...(await Promise.all([
        startApp('intake-api', { env: ENV }),
        startApp('submission-validator', { env: ENV }),
        startApp('retry-worker', { env: ENV }),
      ])),
    );
  });
  afterAll(async () => {
    for (const a of apps) await a.stop();
    await closeTestDb();
  });

  const newClient = async (): Promise<ApiClient> => new ApiClient(apps[0]!.url, (await createMerchant()).api_key);
  const untilFinal = async (client: ApiClient, id: string): Promise<any[]> => {
    const related = async (): Promise<any[]> =>
      (await client.request('GET', `/v1/retain/transactions/${id}?related=true`)).json.data;
    await waitFor(async () => FINAL.includes((await related())[0]?.status), { timeoutMs: 90_000, what: `${id} final` });
    return related();
  };
  const submit = async (client: ApiClient, t: Record<string, unknown>): Promise<string> => {
    const r = await client.submit([t]);
    expect(r.status, r.text).toBe(200);
    return t['id'] as string;
  };
  /** One breakdown of the (only) currency: [key, failed, recovered, attempts] per key. */
  const breakdown = async (client: ApiClient, dim: string): Promise<[string, number, number, number][]> => {
    const res = await client.request('GET', '/v1/retain/analytics');
    expect(res.status).toBe(200);
    const [usd] = res.json.currencies;
    return usd.breakdowns[dim].map((r: any) => [r.key, r.failed_count, r.recovered_count, r.attempts]);
  };

  it('a soft decline recovered on its third attempt counts under soft: failed, attempts and recovery', async () => {
    const client = await newClient();
    const id = await submit(client, txn({ auth_code: '51' }, FUNDS_THEN_APPROVED));
    const [t, ...attempts] = await untilFinal(client, id);
    expect(t.status).toBe('Captured');
    expect(attempts.map((a) => a.status)).toEqual(['Failed', 'Failed', 'Captured']);
    expect(await breakdown(client, 'decline_class')).toEqual([['soft', 1, 1, 3]]);
    expect(await breakdown(client, 'decline_code')).toEqual([['51', 1, 1, 3]]);
  });

  it("a transaction recovered on the account's other card stays under its own card and address", async () => {
    const client = await newClient();
    const account = uniqueId('acct');
    /** A transaction of the account paid with `card` under payment method `pmId`, billed in `country`. */
    const ofAccount = (pmId: string, card: string, country: string): Record<string, unknown> => {
      const t = txn({}, card);
      const pm = t['payment_method'] as Record<string, any>;
      return {
        ...t,
        account: { id: account },
        payment_method: {
          ...pm,
          id: pmId,
          billing_address: { ...pm['billing_address'], country },
          credit_card: { account: card, expiration_date: '202912' },
        },
      };
    };
    const backup = uniqueId('pm');
    const first = await untilFinal(client, await submit(client, ofAccount(backup, '5555555555554444', 'GB')));
    expect(first[0].status).toBe('Captured');
    const closed = uniqueId('pm');
    const [t, ...attempts] = await untilFinal(client, await submit(client, ofAccount(closed, CLOSED_ACCOUNT, 'US')));
    expect(t.status).toBe('Captured');
    expect(attempts.map((a) => [a.auth_code, a.payment_method.id])).toEqual([
      ['46', closed],
      ['00', backup],
    ]);
    // The first transaction: Mastercard 555555, GB, one attempt. The second: Visa 400000, US, two attempts
    // (its 46 on that card, then the capture on the backup card), as submitted.
    expect(await breakdown(client, 'card_network')).toEqual([
      ['mastercard', 1, 1, 1],
      ['visa', 1, 1, 2],
    ]);
    expect(await breakdown(client, 'bin')).toEqual([
      ['400000', 1, 1, 2],
      ['555555', 1, 1, 1],
    ]);
    expect(await breakdown(client, 'country')).toEqual([
      ['GB', 1, 1, 1],
      ['US', 1, 1, 2],
    ]);
    expect(await breakdown(client, 'decline_class')).toEqual([['soft', 2, 2, 3]]);
  });
});
