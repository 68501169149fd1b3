import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApiClient,
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

const ENV = { RETRY_TIME_SCALE: '100000', JOB_LOCK_MS: '2000' };
const SF = { line1: '1 Market St', city: 'San Francisco', country: 'US', postal_code: '94105' };

// Issue 11: each transaction records the retry policy version that plans it at intake
// (RETRY_POLICY), planning uses the transaction's own version, every planned attempt says why, and
// the adaptive policy's outcomes feed the learner's slot counts once.
describe('retry policy versions through the real apps', () => {
  // Its own database and queues: a time-scaled recovery window has no room for other files' backlog.
  usePrivateDatabase('pol');
  const apps: RunningApp[] = [];
  let adaptiveIntake: ApiClient;
  let defaultIntake: ApiClient;
  let merchant: TestMerchant;

  beforeAll(async () => {
    const [adaptive, plain, ...workers] = await Promise.all([
      startApp('intake-api', { env: { ...ENV, RETRY_POLICY: 'adaptive-2026-11' } }),
      startApp('intake-api', { env: { ...ENV, RETRY_POLICY: 'utc-heuristics-2026-10' } }),
      startApp('submission-validator', { env: ENV }),
      startApp('retry-worker', { env: ENV }),
    ]);
    apps.push(adaptive!, plain!, ...workers);
    merchant = await createMerchant();
    adaptiveIntake = new ApiClient(adaptive!.url, merchant.api_key);
    defaultIntake = new ApiClient(plain!.url, merchant.api_key);
  });
  afterAll(async () => {
    for (const a of apps) await a.stop();
    await closeTestDb();
  });

  const withAddress = (): Record<string, unknown> => {
    const t = txn();
    return { ...t, payment_method: { ...(t['payment_method'] as object), billing_address: SF } };
  };
  const captured = async (id: string) => {
    const db = await testDb();
    await waitFor(
      async () => {
        const [row] = await db.query(`SELECT status FROM transactions WHERE merchant_txn_id = $1`, [id]);
        return row?.status === 'Captured';
      },
      { timeoutMs: 60_000, what: `${id} captured` },
    );
  };

  it(
    'plans an adaptive transaction in the cardholder-local time and counts its outcome once',
    { timeout: 90_000 },
    async () => {
      const t = withAddress();
      expect((await adaptiveIntake.submit([t])).status).toBe(200);
      await captured(t['id'] as string);
      const db = await testDb();
      const [row] = await db.query(`SELECT id, policy_version FROM transactions WHERE merchant_txn_id = $1`, [t['id']]);
      expect(row.policy_version).toBe('adaptive-2026-11');
      const [attempt] = await db.query(`SELECT plan FROM attempts WHERE transaction_id = $1`, [row.id]);
      expect(attempt.plan.policy_version).toBe('adaptive-2026-11');
      expect(attempt.plan.slot.timeZone).toBe('America/Los_Angeles');
      expect(typeof attempt.plan.rule).toBe('string');

      const stats = await db.query(
        `SELECT sum(attempts)::int AS attempts, sum(approvals)::int AS approvals FROM (SELECT scope, attempts, approvals FROM policy_slot_stats
                UNION ALL SELECT scope, attempts, approvals FROM policy_slot_pending) s
        WHERE scope = (SELECT id::text FROM merchants WHERE login = $1)`,
        [merchant.login],
      );
      expect(stats[0]).toEqual({ attempts: 1, approvals: 1 });

      // The API shows the attempt's explanation.
      const view = await adaptiveIntake.request('GET', `/v1/retain/transactions/${t['id']}?related=true`);
      expect(view.status).toBe(200);
      expect(JSON.stringify(view.json)).toContain('"retry_plan":{');
      expect(JSON.stringify(view.json)).toContain('"policy_version":"adaptive-2026-11"');
    },
  );

  it(
    'keeps the UTC heuristics for a transaction accepted under RETRY_POLICY=utc-heuristics-2026-10, and does not count it',
    { timeout: 90_000 },
    async () => {
      const t = withAddress();
      expect((await defaultIntake.submit([t])).status).toBe(200);
      await captured(t['id'] as string);
      const db = await testDb();
      const [row] = await db.query(`SELECT id, policy_version FROM transactions WHERE merchant_txn_id = $1`, [t['id']]);
      expect(row.policy_version).toBe('utc-heuristics-2026-10');
      const [attempt] = await db.query(`SELECT plan FROM attempts WHERE transaction_id = $1`, [row.id]);
      expect(attempt.plan.policy_version).toBe('utc-heuristics-2026-10');
      expect(attempt.plan.slot.timeZone).toBe('UTC');
      const stats = await db.query(
        `SELECT sum(attempts)::int AS attempts FROM (SELECT scope, attempts, approvals FROM policy_slot_stats
                UNION ALL SELECT scope, attempts, approvals FROM policy_slot_pending) s
        WHERE scope = (SELECT id::text FROM merchants WHERE login = $1)`,
        [merchant.login],
      );
      expect(stats[0].attempts).toBe(1);
    },
  );
});
