import type { MigrationInterface, QueryRunner } from 'typeorm';
import { COUNTERS as BASE_COUNTERS, attemptRows, refundRows, txnRows, upsert } from './1797400000100-AnalyticsRollup';
import { RECOVERED } from './1797950000000-PartialAuthorizations';

const ALL_COUNTERS = [...BASE_COUNTERS, 'network_fees_avoided'] as const;

/** The signed contributions of one statement, appended: no row is shared, so no lock is waited for. */
export function append(rows: string, counters: readonly string[]): string {
  const sums = counters.map((c) => `sum(${c})::bigint AS ${c}`).join(', ');
  const nonZero = counters.map((c) => `sum(${c}) <> 0`).join(' OR ');
  return `
    INSERT INTO analytics_rollup_pending (merchant_id, day, currency, dim, key, ${counters.join(', ')})
    SELECT merchant_id, day, currency, dim, key, ${sums}
      FROM (${rows}) AS c
     WHERE key IS NOT NULL
     GROUP BY merchant_id, day, currency, dim, key
    HAVING ${nonZero};`;
}

/** What each table contributes to the rollup, as the earlier migrations last defined it. */
export function rollupTables(): Record<string, { rows: (src: string, s: string) => string; counters: string[] }> {
  const txnExtra = (s: string): string => `
         ${s} * coalesce(t.naive_network_fees_minor - t.network_fees_minor, 0) AS network_fees_avoided,`;
  return {
    transactions: {
      rows: (src: string, s: string) => txnRows(src, s, txnExtra(s)),
      counters: ['failed_count', 'failed_amount', 'stopped_count', 'network_fees_avoided'],
    },
    attempts: {
      rows: (src: string, s: string) => attemptRows(src, s, RECOVERED),
      counters: ['attempts', 'recovered_count', 'recovered_amount'],
    },
    refunds: { rows: refundRows, counters: ['refunded_count', 'refunded_amount'] },
  };
}

/** The trigger functions' bodies, as the earlier migrations last defined them, on a given writer. */
export function bodies(
  write: (rows: string, counters: readonly string[]) => string,
): Record<string, Record<string, string>> {
  const out: Record<string, Record<string, string>> = {};
  for (const [table, { rows, counters }] of Object.entries(rollupTables())) {
    out[table] = {
      ins: write(rows('new_rows', '1'), counters),
      upd: write(`${rows('new_rows', '1')} UNION ALL ${rows('old_rows', '-1')}`, counters),
      del: write(rows('old_rows', '-1'), counters),
    };
  }
  return out;
}

/**
 * The analytics rollup's triggers used to upsert into analytics_rollup inside the writing
 * transaction: every recorded attempt of a merchant's cohort day updated the same few rows, so
 * concurrent attempts queued on those row locks until each one committed (issue 14: the retry
 * worker waited there most of its time). The triggers now append their signed contributions to
 * analytics_rollup_pending (insert only, nothing shared); `analytics_rollup_fold(n)` moves up to n
 * pending rows into analytics_rollup in one statement (run by the retry tick), and reads add up both
 * tables, so a read sees every committed write at once, folded or not.
 * The adaptive policy's slot counts (policy_slot_stats, one row per slot per merchant plus one
 * across all merchants) had the same hot rows and get the same shape: policy_slot_pending and
 * `policy_slot_fold(n)`.
 */
export class PendingCounters1798200000000 implements MigrationInterface {
  name = 'PendingCounters1798200000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE analytics_rollup_pending (
        id bigserial PRIMARY KEY,
        merchant_id uuid NOT NULL,
        day date NOT NULL,
        currency char(3) NOT NULL,
        dim varchar(16) NOT NULL,
        key varchar(64) NOT NULL,
        ${ALL_COUNTERS.map((c) => `${c} bigint NOT NULL DEFAULT 0`).join(',\n        ')}
      )`);
    await q.query(`CREATE INDEX analytics_rollup_pending_merchant ON analytics_rollup_pending (merchant_id, day)`);
    const sums = ALL_COUNTERS.map((c) => `sum(${c})::bigint AS ${c}`).join(', ');
    // SKIP LOCKED: two folds at once take different rows; ORDER BY in the upsert: no deadlock between them.
    await q.query(`
      CREATE FUNCTION analytics_rollup_fold(lim int) RETURNS int LANGUAGE plpgsql AS $fn$
      DECLARE n int;
      BEGIN
        WITH moved AS (
          DELETE FROM analytics_rollup_pending
           WHERE id IN (SELECT id FROM analytics_rollup_pending ORDER BY id LIMIT lim FOR UPDATE SKIP LOCKED)
          RETURNING *
        ), grouped AS (
          SELECT merchant_id, day, currency, dim, key, ${sums}, count(*) AS rows_moved
            FROM moved GROUP BY merchant_id, day, currency, dim, key
        ), folded AS (
          INSERT INTO analytics_rollup AS r (merchant_id, day, currency, dim, key, ${ALL_COUNTERS.join(', ')})
          SELECT merchant_id, day, currency, dim, key, ${ALL_COUNTERS.join(', ')}
            FROM grouped g ORDER BY merchant_id, day, currency, dim, key
          ON CONFLICT (merchant_id, day, currency, dim, key) DO UPDATE SET
            ${ALL_COUNTERS.map((c) => `${c} = r.${c} + EXCLUDED.${c}`).join(',\n            ')}
        )
        -- A data-modifying WITH runs to completion whether or not it is read.
        SELECT coalesce(sum(rows_moved), 0)::int INTO n FROM grouped;
        RETURN n;
      END $fn$`);
    await this.functions(q, bodies(append));
    // What the old triggers wrote is already in analytics_rollup; nothing to move.
    await q.query(`
      CREATE TABLE policy_slot_pending (
        id bigserial PRIMARY KEY,
        scope varchar(64) NOT NULL,
        decline_class varchar(16) NOT NULL,
        day_after_failure smallint NOT NULL,
        local_hour smallint NOT NULL,
        attempts integer NOT NULL,
        approvals integer NOT NULL
      )`);
    await q.query(`CREATE INDEX policy_slot_pending_scope ON policy_slot_pending (scope, decline_class)`);
    await q.query(`
      CREATE FUNCTION policy_slot_fold(lim int) RETURNS int LANGUAGE plpgsql AS $fn$
      DECLARE n int;
      BEGIN
        WITH moved AS (
          DELETE FROM policy_slot_pending
           WHERE id IN (SELECT id FROM policy_slot_pending ORDER BY id LIMIT lim FOR UPDATE SKIP LOCKED)
          RETURNING *
        ), grouped AS (
          SELECT scope, decline_class, day_after_failure, local_hour, sum(attempts)::int AS attempts,
                 sum(approvals)::int AS approvals, count(*) AS rows_moved
            FROM moved GROUP BY scope, decline_class, day_after_failure, local_hour
        ), folded AS (
          INSERT INTO policy_slot_stats AS s (scope, decline_class, day_after_failure, local_hour, attempts, approvals)
          SELECT scope, decline_class, day_after_failure, local_hour, attempts, approvals
            FROM grouped ORDER BY scope, decline_class, day_after_failure, local_hour
          ON CONFLICT (scope, decline_class, day_after_failure, local_hour) DO UPDATE
            SET attempts = s.attempts + EXCLUDED.attempts, approvals = s.approvals + EXCLUDED.approvals,
                updated_at = now()
        )
        SELECT coalesce(sum(rows_moved), 0)::int INTO n FROM grouped;
        RETURN n;
      END $fn$`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`SELECT policy_slot_fold(2147483647)`);
    await q.query(`DROP FUNCTION policy_slot_fold(int)`);
    await q.query(`DROP TABLE policy_slot_pending`);
    await q.query(`SELECT analytics_rollup_fold(2147483647)`);
    await this.functions(q, bodies(upsert));
    await q.query(`DROP FUNCTION analytics_rollup_fold(int)`);
    await q.query(`DROP TABLE analytics_rollup_pending`);
  }

  private async functions(q: QueryRunner, all: Record<string, Record<string, string>>): Promise<void> {
    for (const [table, ops] of Object.entries(all)) {
      for (const [op, body] of Object.entries(ops)) {
        await q.query(`
          CREATE OR REPLACE FUNCTION analytics_${table}_${op}() RETURNS trigger LANGUAGE plpgsql AS $fn$
          BEGIN
            ${body}
            RETURN NULL;
          END $fn$`);
      }
    }
  }
}
