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
  type RunningApp,
  usePrivateDatabase,
} from '@retain/testing';

// 100,000: the 30-day window is 26 s of real time, room for a loaded machine (at 1,000,000 it was 2.6 s, and a
// loaded CI machine once let a window close before the first attempt).
const SCALE = { RETRY_TIME_SCALE: '100000' };
const FINAL = ['Captured', 'Cancelled', 'Stopped'];

// decisions §7 and §12: a whole recovery from POST to signed push, for every card of the sandbox table.
describe('recovery through the real apps', () => {
  // Its own database and queues: a time-scaled recovery window has no room for other files' backlog.
  usePrivateDatabase('rec');
  let apps: RunningApp[] = [];
  let receiver: WebhookReceiver;
  let client: ApiClient;

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    apps = await Promise.all([
      startApp('intake-api', { env: SCALE }),
      startApp('submission-validator', { env: SCALE }),
      startApp('retry-worker', { env: SCALE }),
      startApp('webhook-dispatcher', { env: SCALE }),
    ]);
    const merchant = await createMerchant(receiver.url);
    client = new ApiClient(apps[0]!.url, merchant.api_key);
  });
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.stop()));
    await receiver.stop();
    await closeTestDb();
  });

  const finalOf = (id: string) =>
    waitFor(
      async () => {
        const r = await client.request('GET', `/v1/retain/transactions/${id}?related=true`);
        return FINAL.includes(r.json?.data?.[0]?.status) ? r.json : null;
      },
      { timeoutMs: 45_000, what: `final status of ${id}` },
    );

  it('recovers or stops each sandbox card with the right attempts, statuses and pushes', async () => {
    const cases: [string, string, number, string[]][] = [
      // card, final status, attempts, attempt statuses/codes
      ['4111111111111111', 'Captured', 1, ['Captured:00']],
      ['5555555555554444', 'Captured', 1, ['Captured:00']],
      ['4000000000000077', 'Captured', 3, ['Failed:51', 'Failed:51', 'Captured:00']],
      ['4000000000000119', 'Captured', 2, ['Failed:96', 'Captured:00']],
      ['4100000000000019', 'Cancelled', 1, ['Failed:41']],
      ['5100000000000008', 'Cancelled', 1, ['Failed:51']],
      ['4000000000000069', 'Cancelled', 1, ['Failed:54']],
    ];
    const txns = cases.map(([card]) => txn({}, card));
    const r = await client.submit(txns);
    expect(r.status).toBe(200);
    for (let i = 0; i < cases.length; i++) {
      const [card, status, attempts, shape] = cases[i]!;
      const id = txns[i]!['id'] as string;
      const list = await finalOf(id);
      const [submitted, ...tries] = list.data;
      expect(submitted.status, card).toBe(status);
      expect(
        tries.map((a: any) => `${a.status}:${a.auth_code}`),
        card,
      ).toEqual(shape);
      expect(tries.map((a: any) => a.retry_number)).toEqual(Array.from({ length: attempts }, (_, k) => k + 1));
      for (const a of tries) {
        expect(a.id).toBe(id);
        expect(a.vid).toHaveLength(40);
        expect(a.vid).not.toBe(submitted.vid);
        expect(a.retain_transaction_id.length).toBeLessThanOrEqual(40);
        expect(a.timestamp).toBeTruthy();
        if (a.status === 'Failed' && a.auth_code)
          expect(['Soft Failure', 'Hard Failure']).toContain(a.auth_code_description);
      }
      if (status === 'Captured') {
        const push = await waitFor(() =>
          receiver.byEvent('retry succeeded').find((p) => p.body.header['transaction_id'] === id),
        );
        const last = tries[tries.length - 1];
        expect(push.body.content['status']).toBe('Captured');
        expect(push.body.content['vid']).toBe(last.vid);
        expect(push.body.header['payload_id']).toBe(last.vid);
        expect(push.body.content['retain_transaction_id']).toBe(last.retain_transaction_id);
        const one = await client.request('GET', `/v1/retain/transactions/${last.retain_transaction_id}`);
        expect(one.json.data).toHaveLength(1);
        expect(one.json.data[0].vid).toBe(last.vid);
      } else {
        const push = await waitFor(() =>
          receiver.byEvent('retry failed').find((p) => p.body.header['transaction_id'] === id),
        );
        expect(push.body.content['status']).toBe('Cancelled');
        expect(push.body.content['vid']).toBe(submitted.vid);
        expect(push.body.header['payload_id']).toBe(submitted.vid);
        expect(submitted.next_activity).toBeNull();
      }
    }
    // Hard declines are marked as such.
    const hard = await client.request('GET', `/v1/retain/transactions/${txns[4]!['id']}?related=true`);
    expect(hard.json.data[1].auth_code_description).toBe('Hard Failure');
  });

  it('recovers a tokenized payment method sent without credit_card (spec: optional when tokenized)', async () => {
    const t = txn({ payment_method: { id: 'tok_sandbox_0077', is_tokenized: true } });
    expect((await client.submit([t])).status).toBe(200);
    const list = await finalOf(t['id'] as string);
    const [submitted, ...tries] = list.data;
    expect(submitted.status).toBe('Captured');
    expect(tries.map((a: any) => `${a.status}:${a.auth_code}`)).toEqual(['Failed:51', 'Failed:51', 'Captured:00']);
    // Shown masked (first 6, last 4) from the de-tokenized card; the token stays the payment method id.
    expect(submitted.payment_method).toMatchObject({
      id: 'tok_sandbox_0077',
      is_tokenized: true,
      credit_card: { account: '400000******0077', expiration_date: null },
    });
    const push = await waitFor(() =>
      receiver.byEvent('retry succeeded').find((p) => p.body.header['transaction_id'] === t['id']),
    );
    expect((push.body.content as any).payment_method.credit_card.account).toBe('400000******0077');
    const [row] = await (
      await testDb()
    ).query(`SELECT card_network FROM transactions WHERE merchant_txn_id = $1`, [t['id']]);
    expect(row.card_network).toBe('visa');
  });

  it('keeps retrying a soft decline within the bounded schedule, then cancels', async () => {
    const t = txn({}, '4000000000000002');
    const before = new Date().toISOString();
    expect((await client.submit([t])).status).toBe(200);
    const list = await finalOf(t['id'] as string);
    expect(list.data[0].status).toBe('Cancelled');
    const tries = list.data.slice(1);
    expect(tries.length).toBeGreaterThanOrEqual(3);
    expect(tries.length).toBeLessThanOrEqual(20);
    expect(tries.every((a: any) => a.auth_code === '05' && a.auth_code_description === 'Soft Failure')).toBe(true);
    // updated_since finds transactions whose result changed.
    const changed = await client.request('GET', `/v1/retain/transactions?updated_since=${encodeURIComponent(before)}`);
    expect(changed.json.data.map((x: any) => x.id)).toContain(t['id']);
  });

  it('never charges a card twice for one attempt', async () => {
    // Self-contained (it must not pass vacuously when run alone): its own transactions, a charge
    // that must have happened, and exactly one processor charge per attempt made.
    const db = await testDb();
    const own = [txn({}, '4111111111111111'), txn({}, '4000000000000077'), txn({}, '4000000000000119')];
    expect((await client.submit(own)).status).toBe(200);
    for (const t of own) expect((await finalOf(t['id'] as string)).data[0].status).toBe('Captured');
    const ids = own.map((t) => t['id'] as string);
    const rows: { state: string; charges: number; outcome: string | null }[] = await db.query(
      `SELECT a.state, count(s.idempotency_key)::int AS charges, max(s.result->>'outcome') AS outcome
         FROM attempts a JOIN transactions t ON t.id = a.transaction_id
         LEFT JOIN sandbox_operations s ON s.idempotency_key = a.vid AND s.kind = 'charge'
        WHERE t.merchant_txn_id = ANY($1::text[])
        GROUP BY a.id, a.state`,
      [ids],
    );
    // 1 + 3 + 2 attempts, each sent to the processor exactly once; one capture per transaction.
    expect(rows).toHaveLength(6);
    expect(rows.every((r) => r.charges === 1)).toBe(true);
    expect(rows.filter((r) => r.state === 'captured')).toHaveLength(3);
    expect(rows.filter((r) => r.outcome === 'approved')).toHaveLength(3);
    const dupes = await db.query(
      `SELECT a.transaction_id FROM attempts a JOIN transactions t ON t.id = a.transaction_id
        WHERE a.state = 'captured' AND t.merchant_txn_id = ANY($1::text[]) GROUP BY 1 HAVING count(*) > 1`,
      [ids],
    );
    expect(dupes).toEqual([]);
  });
});
