import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiClient, closeTestDb, createMerchant, startApp, txn, waitFor, type RunningApp } from '@retain/testing';

const ENV = { RETRY_TIME_SCALE: '1000000', JOB_LOCK_MS: '2000' };

// network-rules.md, dated changes: from 25 Oct 2026 a Visa `57` is category 1 (never reattempted);
// from Oct 2025 until then issuers' `57` is read as `05` (a generic soft decline, retried). A decline
// is judged by the rules in force when it arrived: the submitted transaction's `timestamp`. The same
// card and code, declined on either side of the date, end differently through the real apps.
describe('network rules by date through the real apps (Visa 57 before and after 25 Oct 2026)', () => {
  const apps: RunningApp[] = [];
  let client: ApiClient;

  beforeAll(async () => {
    apps.push(
      ...(await Promise.all([
        startApp('intake-api', { env: ENV }),
        startApp('submission-validator', { env: ENV }),
        startApp('retry-worker', { env: ENV }),
      ])),
    );
    const merchant = await createMerchant();
    client = new ApiClient(apps[0]!.url, merchant.api_key);
  });
  afterAll(async () => {
    for (const a of apps) await a.stop();
    await closeTestDb();
  });

  const final = (id: string) =>
    waitFor(
      async () => {
        const rows = (await client.request('GET', `/v1/retain/transactions/${id}?related=true`)).json.data as any[];
        return ['Captured', 'Cancelled'].includes(rows?.[0]?.status) ? rows : null;
      },
      { timeoutMs: 60_000, what: `${id} final` },
    );

  it('a 57 declined on 24 Oct 2026 is retried (read as 05); one declined on 25 Oct 2026 is never retried', async () => {
    const before = txn({ auth_code: '57', timestamp: '2026-10-24T22:00:00Z' });
    const after = txn({ auth_code: '57', timestamp: '2026-10-25T02:00:00Z' });
    expect((await client.submit([before, after])).status).toBe(200);

    const [b, ...bAttempts] = await final(before['id'] as string);
    expect(b.status).toBe('Captured');
    expect(bAttempts.map((x: any) => x.status)).toEqual(['Captured']);

    const [a, ...aAttempts] = await final(after['id'] as string);
    expect(a.status).toBe('Cancelled');
    expect(a.auth_code_description).toBe('Hard Failure');
    expect(aAttempts).toHaveLength(0);
  });
});
