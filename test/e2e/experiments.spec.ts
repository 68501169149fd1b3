import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HOLDOUT_ARM, LEGACY_POLICY_VERSION, POLICY_VERSION, assignArm } from '@retain/domain';
import { SANDBOX_PARTIAL_CARD } from '@retain/processor';
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

// 100,000: the 30-day window is 26 s of real time, room for a loaded machine (at 1,000,000 it was 2.6 s, and a
// loaded CI machine once let every window close before the first attempt).
const ENV = { RETRY_TIME_SCALE: '100000', JOB_LOCK_MS: '2000' };
const DECLINED_54 = '4000000000000069';
/** A token no processor knows: the review rejects it (RET011), and it is never retried. */
const UNKNOWN_TOKEN = 'tok_sandbox_9999';
const cliMain = path.resolve(__dirname, '../../dist/apps/cli/src/main.js');
const cli = (...args: string[]): any => {
  const r = spawnSync(process.execPath, [cliMain, ...args], { env: process.env, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout);
};

// Issue 11: a merchant runs retry-policy variants side by side; each transaction is assigned an arm
// at intake (sticky, with a holdout on the default policy), plans with its arm's policy version,
// and the per-arm results come back with intervals through the API and the CLI.
/** One arm's results in GET /v1/retain/experiments/{id}. */
interface ArmResult {
  arm: string;
  transactions: number;
  in_flight: number;
  recovered_count: number;
  recovered_amount: number;
  attempts: number;
  recovery_rate: { value: number; low: number; high: number };
  recovered_per_transaction: { value: number; low: number; high: number };
  vs_holdout: unknown;
}

describe('policy experiments through the real apps', () => {
  // Its own database and queues: a time-scaled recovery window has no room for other files' backlog.
  usePrivateDatabase('exp');
  const apps: RunningApp[] = [];
  let api: ApiClient;
  let merchant: TestMerchant;

  beforeAll(async () => {
    const started = await Promise.all([
      startApp('intake-api', { env: ENV }),
      startApp('submission-validator', { env: ENV }),
      startApp('retry-worker', { env: ENV }),
    ]);
    apps.push(...started);
    merchant = await createMerchant();
    api = new ApiClient(started[0]!.url, merchant.api_key);
  });
  afterAll(async () => {
    for (const a of apps) await a.stop();
    await closeTestDb();
  });

  const viewOf = async (id: string) =>
    (
      (await api.request('GET', `/v1/retain/transactions/${encodeURIComponent(id)}`)).json as {
        data: { retry_policy: { version: string; experiment_id: string | null; arm: string | null } }[];
      }
    ).data[0]!;

  const experimentBody = {
    name: 'adaptive vs heuristics',
    holdout_share: 0.2,
    variants: [
      { name: 'adaptive', policy_version: POLICY_VERSION, weight: 1 },
      { name: 'heuristics', policy_version: LEGACY_POLICY_VERSION, weight: 1, config: { maxAttempts: 4 } },
    ],
  };

  it('refuses a bad experiment with RET400 and creates nothing', async () => {
    const bad = await api.request('POST', '/v1/retain/experiments', {
      ...experimentBody,
      variants: [{ name: 'x', policy_version: 'v0' }, experimentBody.variants[0]],
    });
    expect(bad.status).toBe(400);
    expect(bad.json).toEqual({
      code: 'RET400',
      message: expect.stringContaining('variants[0].policy_version'),
    });
    expect((await api.request('GET', '/v1/retain/experiments')).json.data).toEqual([]);
  });

  it("refuses settings the variant's policy never reads, with RET400 naming the field, and creates nothing", async () => {
    const m = await createMerchant();
    const client = new ApiClient(apps[0]!.url, m.api_key);
    for (const [variant, field] of [
      [
        { name: 'a', policy_version: POLICY_VERSION, config: { attemptHourUtc: 10 } },
        'variants[0].config.attemptHourUtc',
      ],
      [
        { name: 'a', policy_version: LEGACY_POLICY_VERSION, config: { budgetByClass: { funds: 6 } } },
        'variants[0].config.budgetByClass',
      ],
    ] as const) {
      const res = await client.request('POST', '/v1/retain/experiments', {
        name: 'unread',
        holdout_share: 0.1,
        variants: [variant],
      });
      expect(res.status).toBe(400);
      expect(res.json).toEqual({ code: 'RET400', message: expect.stringContaining(`Invalid parameter: ${field}`) });
    }
    expect((await client.request('GET', '/v1/retain/experiments')).json.data).toEqual([]);
  });

  it('lists experiments a page at a time, newest first, following next to the end (API and CLI)', async () => {
    const m = await createMerchant();
    const client = new ApiClient(apps[0]!.url, m.api_key);
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) {
      const created = await client.request('POST', '/v1/retain/experiments', { ...experimentBody, name: `e${i}` });
      expect(created.status).toBe(201);
      ids.unshift(created.json.id);
      expect((await client.request('POST', `/v1/retain/experiments/${created.json.id}/stop`)).status).toBe(200);
    }
    const first = await client.request('GET', '/v1/retain/experiments');
    expect(first.status).toBe(200);
    expect(first.json).toMatchObject({ object: 'List', previous: null, total_count: 10 });
    expect(first.json.data.map((e: { id: string }) => e.id)).toEqual(ids.slice(0, 10));
    // Each experiment of the page comes with its results.
    expect(first.json.data.every((e: { results?: unknown }) => Array.isArray(e.results))).toBe(true);
    const second = await client.request('GET', first.json.next);
    expect(second.json.data.map((e: { id: string }) => e.id)).toEqual(ids.slice(10));
    expect(second.json.next).toBeNull();
    const small = await client.request('GET', '/v1/retain/experiments?limit=5');
    expect(small.json.data.map((e: { id: string }) => e.id)).toEqual(ids.slice(0, 5));
    expect(small.json.next).toBe(`/v1/retain/experiments?limit=5&starting_after=${ids[4]}`);
    for (const [query, field] of [
      ['limit=0', 'limit'],
      ['limit=101', 'limit'],
      ['limit=x', 'limit'],
      ['starting_after=nope', 'starting_after'],
      ['status=running', 'status'],
    ]) {
      const bad = await client.request('GET', `/v1/retain/experiments?${query}`);
      expect.soft(bad.status, query).toBe(400);
      expect.soft(bad.json, query).toEqual({ code: 'RET400', message: `Invalid parameter: ${field}` });
    }
    // An id the merchant has no experiment with (another merchant's) is a bad cursor, as in the
    // transactions list: not an empty page that looks like the list's end.
    const other = await api.request('GET', `/v1/retain/experiments?starting_after=${ids[0]}`);
    expect(other.status).toBe(400);
    expect(other.json).toEqual({ code: 'RET400', message: 'Invalid parameter: starting_after' });
    const cliPage = cli('experiments', 'list', '--login', m.login, '--limit', '3', '--starting-after', ids[8]!);
    expect(cliPage.map((e: { id: string }) => e.id)).toEqual(ids.slice(9, 12));
  });

  it(
    'assigns arms stickily, plans with each arm, and reports per-arm results with intervals (API and CLI)',
    { timeout: 120_000 },
    async () => {
      const created = await api.request('POST', '/v1/retain/experiments', experimentBody);
      expect(created.status).toBe(201);
      const exp = created.json as { id: string; status: string; holdout_policy: string };
      expect(exp.status).toBe('running');
      // One experiment at a time.
      const conflict = await api.request('POST', '/v1/retain/experiments', experimentBody);
      expect(conflict.status).toBe(409);
      // A conflict, not a bad parameter: RET<status>, as every answer outside the spec's codes.
      expect(conflict.json).toEqual({
        code: 'RET409',
        message: `Conflict: experiment ${exp.id} is running (stop it first)`,
      });

      const txns = Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? txn() : txn({}, DECLINED_54)));
      expect((await api.submit(txns)).status).toBe(200);
      const db = await testDb();
      const ids = txns.map((t) => t['id'] as string);
      await waitFor(
        async () => {
          const [r] = await db.query(
            `SELECT count(*)::int AS open FROM transactions t JOIN merchants m ON m.id = t.merchant_id
              WHERE m.login = $1 AND t.merchant_txn_id = ANY($2) AND t.status IN ('Failed', 'In Retry')`,
            [merchant.login, ids],
          );
          return r.open === 0;
        },
        { timeoutMs: 90_000, what: 'every transaction final' },
      );

      // Each transaction shows its arm; the arm is the sticky hash of (experiment, transaction id).
      const definition = { id: exp.id, holdout_share: 0.2, variants: experimentBody.variants as never };
      const versionOf: Record<string, string> = {
        adaptive: POLICY_VERSION,
        heuristics: LEGACY_POLICY_VERSION,
        [HOLDOUT_ARM]: exp.holdout_policy,
      };
      const arms = new Map<string, number>();
      for (const id of ids) {
        const view = await viewOf(id);
        const arm = assignArm(definition, id);
        expect(view.retry_policy).toEqual({ version: versionOf[arm], experiment_id: exp.id, arm });
        arms.set(arm, (arms.get(arm) ?? 0) + 1);
      }
      expect(arms.size).toBeGreaterThanOrEqual(2);

      // Per-arm results equal the rows.
      const result = (await api.request('GET', `/v1/retain/experiments/${exp.id}`)).json as { results: ArmResult[] };
      const rows: { arm: string; n: number; recovered: number; attempts: number }[] = await db.query(
        `SELECT t.experiment_arm AS arm, count(*)::int AS n,
                count(*) FILTER (WHERE EXISTS (SELECT 1 FROM attempts a WHERE a.transaction_id = t.id AND a.state = 'captured'))::int AS recovered,
                (SELECT count(*)::int FROM attempts a JOIN transactions u ON u.id = a.transaction_id
                  WHERE u.experiment_id = $1 AND u.experiment_arm = t.experiment_arm AND a.state <> 'pending') AS attempts
           FROM transactions t WHERE t.experiment_id = $1 GROUP BY t.experiment_arm`,
        [exp.id],
      );
      expect(result.results.map((r) => r.arm).sort()).toEqual([...arms.keys()].sort());
      for (const r of result.results) {
        const row = rows.find((x) => x.arm === r.arm)!;
        expect(r.transactions).toBe(arms.get(r.arm));
        expect(r.transactions).toBe(row.n);
        expect(r.in_flight).toBe(0);
        expect(r.recovered_count).toBe(row.recovered);
        expect(r.attempts).toBe(row.attempts);
        expect(r.recovered_amount).toBeCloseTo(row.recovered * 19.99, 2);
        expect(r.recovery_rate.value).toBeCloseTo(row.recovered / row.n, 4);
        expect(r.recovery_rate.low).toBeLessThanOrEqual(r.recovery_rate.value);
        expect(r.recovery_rate.high).toBeGreaterThanOrEqual(r.recovery_rate.value);
        expect(Math.abs(r.recovered_per_transaction.value - (row.recovered * 19.99) / row.n)).toBeLessThanOrEqual(
          0.0051,
        );
        if (r.arm === HOLDOUT_ARM) expect(r.vs_holdout).toBeNull();
      }
      // The approved card recovers on its first attempt in every arm: 20 of 40.
      expect(result.results.reduce((s, r) => s + r.recovered_count, 0)).toBe(20);

      // The CLI shows the same results.
      const shown = cli('experiments', 'show', exp.id, '--login', merchant.login);
      expect(shown.results).toEqual(result.results);

      // Stopping: new transactions get the default policy, assigned ones keep their arm.
      const stopped = await api.request('POST', `/v1/retain/experiments/${exp.id}/stop`);
      expect(stopped.status).toBe(200);
      expect((stopped.json as { status: string }).status).toBe('stopped');
      const after = txn();
      expect((await api.submit([after])).status).toBe(200);
      const late = await viewOf(after['id'] as string);
      expect(late.retry_policy).toEqual({ version: exp.holdout_policy, experiment_id: null, arm: null });
      const again = await viewOf(ids[0]!);
      expect(again.retry_policy.arm).toBe(assignArm(definition, ids[0]!));

      // Another merchant sees none of it.
      const other = await createMerchant();
      const otherApi = new ApiClient(apps[0]!.url, other.api_key);
      expect((await otherApi.request('GET', `/v1/retain/experiments/${exp.id}`)).status).toBe(404);
      // A new experiment can start once the first is stopped (CLI).
      const cliStarted = cli(
        'experiments',
        'start',
        '--login',
        merchant.login,
        '--name',
        'six attempts',
        '--holdout',
        '0.1',
        '--variant',
        `six=${POLICY_VERSION}`,
      );
      expect(cliStarted.status).toBe('running');
      expect(cli('experiments', 'list', '--login', merchant.login).map((e: { id: string }) => e.id)).toEqual([
        cliStarted.id,
        exp.id,
      ]);
    },
  );

  /** The merchant's results of one experiment, per arm. */
  /** A new merchant with an experiment holding out half its transactions against one variant. */
  const halfHeldOut = async (name: string, variant: string, policyVersion: string) => {
    const m = await createMerchant();
    const client = new ApiClient(apps[0]!.url, m.api_key);
    const created = await client.request('POST', '/v1/retain/experiments', {
      name,
      holdout_share: 0.5,
      variants: [{ name: variant, policy_version: policyVersion }],
    });
    return { m, client, created };
  };
  const resultsOf = async (client: ApiClient, id: string) =>
    ((await client.request('GET', `/v1/retain/experiments/${id}`)).json as { results: ArmResult[] }).results;
  /** Waits until none of these transactions is still being recovered or reviewed. */
  const settled = async (login: string, ids: string[]) => {
    const db = await testDb();
    await waitFor(
      async () => {
        const [r] = await db.query(
          `SELECT count(*)::int AS open FROM transactions t JOIN merchants m ON m.id = t.merchant_id
            WHERE m.login = $1 AND t.merchant_txn_id = ANY($2)
              AND (t.review_status = 'pending' OR (t.review_status = 'passed' AND t.status IN ('Failed', 'In Retry')))`,
          [login, ids],
        );
        return r.open === 0;
      },
      { timeoutMs: 60_000, what: 'every transaction reviewed and final' },
    );
  };

  it(
    "the holdout keeps the experiment's holdout_policy, whatever RETRY_POLICY says later",
    { timeout: 90_000 },
    async () => {
      const { m, client, created } = await halfHeldOut('holdout stays', 'heuristics', LEGACY_POLICY_VERSION);
      expect(created.status).toBe(201);
      const exp = created.json as { id: string; holdout_share: number; variants: never; holdout_policy: string };
      expect(exp.holdout_policy).toBe(POLICY_VERSION);
      // The operator changes RETRY_POLICY after the experiment started (another intake-api here).
      const changed = await startApp('intake-api', { env: { ...ENV, RETRY_POLICY: LEGACY_POLICY_VERSION } });
      try {
        const later = new ApiClient(changed.url, m.api_key);
        const txns = Array.from({ length: 8 }, () => txn());
        expect((await later.submit(txns)).status).toBe(200);
        const holdout = txns.map((t) => t['id'] as string).filter((id) => assignArm(exp, id) === HOLDOUT_ARM);
        expect(holdout.length).toBeGreaterThan(0);
        for (const id of holdout) {
          const view = (
            (await client.request('GET', `/v1/retain/transactions/${id}`)).json as {
              data: { retry_policy: unknown }[];
            }
          ).data[0]!;
          expect(view.retry_policy).toEqual({ version: POLICY_VERSION, experiment_id: exp.id, arm: HOLDOUT_ARM });
        }
      } finally {
        await changed.stop();
      }
    },
  );

  it('results count a partial authorization at the captured part', { timeout: 90_000 }, async () => {
    const { m, client, created } = await halfHeldOut('partial', 'adaptive', POLICY_VERSION);
    const exp = created.json as { id: string };
    const txns = Array.from({ length: 4 }, () => txn({ amount: 20 }, SANDBOX_PARTIAL_CARD));
    expect((await client.submit(txns)).status).toBe(200);
    const ids = txns.map((t) => t['id'] as string);
    await settled(m.login, ids);
    const results = await resultsOf(client, exp.id);
    expect(results.reduce((s, r) => s + r.transactions, 0)).toBe(4);
    for (const r of results) {
      // The sandbox approves half: 10.00 of each 20.00 is what was recovered (and is refundable).
      expect(r.recovered_count).toBe(r.transactions);
      expect(r.recovered_amount).toBeCloseTo(r.transactions * 10, 2);
    }
  });

  it('results leave out transactions the review rejected (never in flight)', { timeout: 90_000 }, async () => {
    const { m, client, created } = await halfHeldOut('rejected', 'adaptive', POLICY_VERSION);
    const exp = created.json as { id: string };
    const rejected = txn({
      payment_method: { id: UNKNOWN_TOKEN, is_tokenized: true, credit_card: { account: '400000' } },
    });
    const approved = Array.from({ length: 3 }, () => txn());
    const txns = [rejected, ...approved];
    expect((await client.submit(txns)).status).toBe(200);
    await settled(
      m.login,
      txns.map((t) => t['id'] as string),
    );
    const db = await testDb();
    const [row] = await db.query(`SELECT review_status, status FROM transactions WHERE merchant_txn_id = $1`, [
      rejected['id'],
    ]);
    expect(row).toEqual({ review_status: 'rejected', status: 'Failed' });
    const results = await resultsOf(client, exp.id);
    expect(results.reduce((s, r) => s + r.transactions, 0)).toBe(3);
    for (const r of results) {
      expect(r.in_flight).toBe(0);
      expect(r.recovered_count).toBe(r.transactions);
    }
  });
});
