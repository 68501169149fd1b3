import { beforeAll, describe, expect, it } from 'vitest';
import type { QueryRunner } from 'typeorm';
import { nodes, type PlanNode } from '../test/plans';
import { useScratchMerchant } from '../test/scratch-merchant';
import { storedMatchingQuery } from './repositories/submissions.repository';
import {
  LIST_PLAN_SETTINGS,
  PAGE_ROWS_SQL,
  listQuery,
  type TransactionListFilters,
} from './repositories/transactions.repository';

// Issue 14: the plans of the list and of the duplicate check stay index range scans whatever the
// status mix, with statistics fresh or never gathered: 60,000 rows of one merchant, almost all
// `Failed`, a few `Captured` and `Stopped` spread through them (a status filter used to walk the
// merchant's whole list). A sequential scan of transactions, or a sort of a scan of them, fails.
describe('query plans of the list and the duplicate check (real Postgres)', () => {
  const scratch = useScratchMerchant('plans_');

  beforeAll(async () => {
    await scratch.db.query(
      `INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, review_status, amount_minor,
         currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code, subscription_id, account_id,
         account, subscription, payment_method, card_kind)
       SELECT md5(g::text || 'plan'), $1, $2, 'p' || g,
         CASE WHEN g % 1000 = 0 THEN 'Captured' WHEN g % 997 = 0 THEN 'Stopped' ELSE 'Failed' END, 'passed', 1000, 'USD',
         now() - (g || ' seconds')::interval, now() - (g || ' seconds')::interval, now(), 'd', '51',
         's' || g, 'a' || g, '{}'::jsonb, '{}'::jsonb, '{}'::jsonb, 'pan'
       FROM generate_series(1, 60000) AS g`,
      [scratch.merchantId, scratch.submissionId],
    );
  }, 120_000);

  /** A statement's plan after `settle` has set its settings, in a transaction rolled back (SET LOCAL ends with it). */
  const planUnder = async (
    settle: (runner: QueryRunner) => Promise<unknown>,
    sql: string,
    params: unknown[],
  ): Promise<PlanNode[]> => {
    const runner = scratch.db.createQueryRunner();
    await runner.startTransaction();
    try {
      await settle(runner);
      const [row] = await runner.query(`EXPLAIN (FORMAT JSON) ${sql}`, params);
      const json = (row['QUERY PLAN'] ?? row) as { Plan: PlanNode }[];
      return nodes(json[0]!.Plan);
    } finally {
      await runner.rollbackTransaction();
      await runner.release();
    }
  };
  /** A list query's plan under the settings the list runs it with (TransactionsRepository.list). */
  const plan = (sql: string, params: unknown[]): Promise<PlanNode[]> =>
    planUnder((runner) => runner.query(LIST_PLAN_SETTINGS), sql, params);
  const expectIndexOnly = (list: PlanNode[]) => {
    const seq = list.filter((n) => n['Node Type'] === 'Seq Scan' && n['Relation Name'] === 'transactions');
    expect(seq.length, `a sequential scan of transactions: ${list.map((n) => n['Node Type']).join(' > ')}`).toBe(0);
    // A sort is allowed only above the few rows the limited branches return (several statuses).
    const sortsOfScans = list.filter(
      (n) =>
        n['Node Type'] === 'Sort' &&
        (n.Plans ?? []).some((c) => /Scan/.test(c['Node Type']) && c['Relation Name'] === 'transactions'),
    );
    expect(sortsOfScans.length, `a sort of the merchant rows: ${list.map((n) => n['Node Type']).join(' > ')}`).toBe(0);
  };

  /**
   * The plan of a function's body as it runs: its SQL, its parameters in place of the function's
   * arguments, under the function's own settings (SET LOCAL in a transaction rolled back).
   */
  const functionPlan = async (name: string, params: unknown[]): Promise<PlanNode[]> => {
    const [fn] = await scratch.db.query(
      `SELECT prosrc, proconfig, pg_get_function_identity_arguments(oid) AS args FROM pg_proc WHERE proname = $1`,
      [name],
    );
    // "p_merchant uuid, p_fingerprints character[]": each argument becomes its parameter, typed.
    const args = String(fn.args)
      .split(', ')
      .map((a) => [a.slice(0, a.indexOf(' ')), a.slice(a.indexOf(' ') + 1)] as const);
    let sql = String(fn.prosrc);
    args.forEach(([a, type], i) => (sql = sql.replace(new RegExp(`\\b${a}\\b`, 'g'), `$${i + 1}::${type}`)));
    return planUnder(
      async (runner) => {
        for (const setting of (fn.proconfig ?? []) as string[]) {
          const [k, v] = setting.split('=');
          await runner.query(`SELECT set_config($1, $2, true)`, [k, v]);
        }
      },
      sql,
      params,
    );
  };
  /** Every scan of transactions looks rows up by the key: an index condition on it, no bitmap, no sequential scan. */
  const expectKeyLookups = (list: PlanNode[], key: RegExp) => {
    const scans = list.filter((n) => n['Relation Name'] === 'transactions');
    const shape = list.map((n) => n['Node Type']).join(' > ');
    expect(scans.length, shape).toBeGreaterThan(0);
    for (const n of scans) {
      expect(n['Node Type'], shape).toMatch(/^Index (Only )?Scan$/);
      expect(String(n['Index Cond'] ?? ''), `${shape}: ${JSON.stringify(n)}`).toMatch(key);
    }
  };

  const variants: [string, Partial<TransactionListFilters>][] = [
    ['default', {}],
    ['one status', { statuses: ['Captured'] }],
    ['several statuses', { statuses: ['Captured', 'Stopped', 'Refunded'] }],
    ['status and submitted range', { statuses: ['Captured'], submittedSince: new Date(Date.now() - 86_400_000) }],
    ['subscription', { subscriptionId: 's42' }],
  ];

  for (const fresh of [false, true]) {
    describe(fresh ? 'after ANALYZE' : 'with statistics never gathered', () => {
      beforeAll(async () => {
        if (fresh) await scratch.db.query(`ANALYZE transactions`);
      });
      for (const [name, filters] of variants) {
        // With statistics never gathered the planner believed the merchant had a handful of rows and
        // sorted a bitmap scan of them for the unfiltered list, until the list's own planner settings.
        it(`list: ${name}`, async () => {
          const q = listQuery(scratch.merchantId, { limit: 20, ...filters }, null);
          expectIndexOnly(await plan(q.sql, q.params));
          const cursor = { submittedTs: new Date(Date.now() - 30_000_000), vid: 'm' };
          const paged = listQuery(scratch.merchantId, { limit: 20, startingAfter: 'x', ...filters }, cursor);
          expectIndexOnly(await plan(paged.sql, paged.params));
        });
      }
      it("the page's rows: looked up by primary key", async () => {
        const ids = (
          await scratch.db.query(`SELECT id FROM transactions WHERE merchant_id = $1 LIMIT 101`, [scratch.merchantId])
        ).map((r: { id: string }) => r.id);
        const list = await planUnder(async () => undefined, PAGE_ROWS_SQL, [ids]);
        const shape = list.map((n) => `${n['Node Type']} ${n['Index Name'] ?? n['Relation Name'] ?? ''}`).join(' > ');
        expect(list.filter((n) => n['Node Type'] === 'Seq Scan').length, shape).toBe(0);
        const indexes = list.filter((n) => n['Index Name']).map((n) => n['Index Name']);
        expect(indexes, shape).toEqual(['transactions_pkey']);
      });
      // A POST's 1,000 ids, subscriptions and fingerprints: every scan of transactions is a lookup by
      // that key (its index condition names it), never the merchant's range read and filtered. The
      // plan checked is the one the function runs: its body, under its own settings.
      it('the duplicate check of a POST: lookups by id and by subscription only', async () => {
        const ids = Array.from({ length: 1000 }, (_, i) => `p${i * 7}`);
        const subs = Array.from({ length: 1000 }, (_, i) => `s${i * 3}`);
        const list = await functionPlan('retain_stored_matching', [scratch.merchantId, ids, subs]);
        expectKeyLookups(list, /merchant_txn_id|subscription_id/);
        expect(
          list.filter((n) => /Index Cond/.test(JSON.stringify(n)) && n['Relation Name'] === 'transactions'),
        ).toHaveLength(2);
        // And the service's query answers what the rows say.
        // s1000's transaction is Captured (no longer in recovery); s1001's is Failed.
        const rows = await scratch.db.query(storedMatchingQuery, [
          scratch.merchantId,
          ['p7', 'nope'],
          ['s9', 's1000', 's1001'],
        ]);
        expect(rows.map((r: { merchant_txn_id: string }) => r.merchant_txn_id).sort()).toEqual(['p1001', 'p7', 'p9']);
      });
      it('the card fingerprint check of a POST: index-only lookups by fingerprint only', async () => {
        const fingerprints = Array.from({ length: 1000 }, (_, i) => String(i).padStart(64, 'f'));
        const list = await functionPlan('retain_known_fingerprints', [scratch.merchantId, fingerprints]);
        expectKeyLookups(list, /card_hmac/);
        expect(list.some((n) => n['Node Type'] === 'Index Only Scan')).toBe(true);
      });
    });
  }

  it('pages of one status come back newest first, with the cursor, like the default list filtered', async () => {
    const q = listQuery(scratch.merchantId, { limit: 5, statuses: ['Captured', 'Stopped'] }, null);
    const ids: { id: string }[] = await scratch.db.query(q.sql, q.params);
    const rows: { status: string; submitted_ts: Date }[] = await scratch.db.query(
      `SELECT status, submitted_ts FROM transactions WHERE id = ANY($1::uuid[])`,
      [ids.map((r) => r.id)],
    );
    expect(ids).toHaveLength(6); // limit + 1: tells whether there is more
    expect(rows.every((r) => r.status === 'Captured' || r.status === 'Stopped')).toBe(true);
    const expected: { id: string }[] = await scratch.db.query(
      `SELECT id FROM transactions WHERE merchant_id = $1 AND status IN ('Captured', 'Stopped')
        ORDER BY submitted_ts DESC, vid DESC LIMIT 6`,
      [scratch.merchantId],
    );
    expect(ids).toEqual(expected);
  });
});
