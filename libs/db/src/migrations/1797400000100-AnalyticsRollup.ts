import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The analytics rollup: per merchant, cohort day (UTC day the failed transaction was submitted),
 * currency, dimension and key, the counters the analytics API adds up. Kept by statement-level
 * triggers on transactions, attempts and refunds, in the same database transaction as the write:
 * each statement adds (contribution of the rows after it) - (contribution before it), grouped, so
 * every write path is covered, a replayed write changes nothing, and the rollup always equals the
 * sum over the current rows. Statements that change no counter (a schedule update) write nothing,
 * so they take no rollup lock.
 *
 * Dimensions: all (key ''), decline_code, decline_class (soft/hard/unclassified), card_network,
 * bin (6 digits), country (billing address), attempt (retry number: attempts and successes by
 * attempt number), ttr (whole hours from the original failure to the capture: the time to recover).
 */
export const ROLLUP_DIMENSIONS = [
  'all',
  'decline_code',
  'decline_class',
  'card_network',
  'bin',
  'country',
  'attempt',
  'ttr',
] as const;

/**
 * The breakdown dimensions of a transaction row `t` (every counter is kept under each). `country`:
 * the expression of the billing country (a later migration's grouped rows carry it as a column).
 * `more`: further (dim, key) rows after them (a later migration's attempt dimensions).
 */
export const txnDims = (
  country = `t.payment_method->'billing_address'->>'country'`,
  more: readonly string[] = [],
): string => `CROSS JOIN LATERAL (VALUES
      ('all', ''),
      ('decline_code', coalesce(nullif(t.auth_code, ''), 'unknown')),
      ('decline_class', CASE t.auth_code_description WHEN 'Soft Failure' THEN 'soft'
                          WHEN 'Hard Failure' THEN 'hard' ELSE 'unclassified' END),
      ('card_network', coalesce(lower(nullif(t.card_network, '')), 'unknown')),
      ('bin', coalesce(left(nullif(t.card_bin, ''), 6), 'unknown')),
      ('country', coalesce(upper(nullif(${country}, '')), 'unknown'))${more.map((row) => `,\n      ${row}`).join('')}
    ) AS d(dim, key)`;
const TXN_DIMS = txnDims();

export const COUNTERS = [
  'failed_count',
  'failed_amount',
  'attempts',
  'recovered_count',
  'recovered_amount',
  'refunded_count',
  'refunded_amount',
  'stopped_count',
] as const;
export type Counter = (typeof COUNTERS)[number];

/**
 * One upsert of signed contributions. `rows` is a SELECT producing merchant_id, day, currency, dim,
 * key and a subset of the counters (already signed); the rest are 0.
 */
export function upsert(rows: string, counters: readonly string[]): string {
  const sums = counters.map((c) => `sum(${c})::bigint AS ${c}`).join(', ');
  const nonZero = counters.map((c) => `sum(${c}) <> 0`).join(' OR ');
  return `
    INSERT INTO analytics_rollup AS r (merchant_id, day, currency, dim, key, ${counters.join(', ')})
    SELECT merchant_id, day, currency, dim, key, ${sums}
      FROM (${rows}) AS c
     WHERE key IS NOT NULL
     GROUP BY merchant_id, day, currency, dim, key
    HAVING ${nonZero}
     ORDER BY merchant_id, day, currency, dim, key
    ON CONFLICT (merchant_id, day, currency, dim, key) DO UPDATE SET
      ${counters.map((c) => `${c} = r.${c} + EXCLUDED.${c}`).join(',\n      ')};`;
}

/** Contribution of transaction rows in `src` with sign `s` (`extra`: more counters, a later migration's). */
export const txnRows = (src: string, s: string, extra = ''): string => `
  SELECT t.merchant_id, (t.submitted_ts AT TIME ZONE 'UTC')::date AS day, t.currency, d.dim, d.key,${extra}
         ${s} * (t.review_status <> 'rejected')::int AS failed_count,
         ${s} * CASE WHEN t.review_status <> 'rejected' THEN t.amount_minor ELSE 0 END AS failed_amount,
         ${s} * (t.status = 'Stopped')::int AS stopped_count
    FROM ${src} t ${TXN_DIMS}`;

/**
 * Contribution of attempt rows in `src` with sign `s` (their transaction gives day and dimensions).
 * `recovered`: the captured amount of a captured attempt (a later migration reads partial captures).
 */
export const attemptRows = (src: string, s: string, recovered = 'a.amount_minor'): string => `
  SELECT t.merchant_id, (t.submitted_ts AT TIME ZONE 'UTC')::date AS day, t.currency, d.dim, d.key,
         ${s} * (a.state <> 'pending')::int AS attempts,
         ${s} * (a.state = 'captured')::int AS recovered_count,
         ${s} * CASE WHEN a.state = 'captured' THEN ${recovered} ELSE 0 END AS recovered_amount
    FROM ${src} a JOIN transactions t ON t.id = a.transaction_id
    CROSS JOIN LATERAL (SELECT * FROM (VALUES
      ('all', ''),
      ('decline_code', coalesce(nullif(t.auth_code, ''), 'unknown')),
      ('decline_class', CASE t.auth_code_description WHEN 'Soft Failure' THEN 'soft'
                          WHEN 'Hard Failure' THEN 'hard' ELSE 'unclassified' END),
      ('card_network', coalesce(lower(nullif(t.card_network, '')), 'unknown')),
      ('bin', coalesce(left(nullif(t.card_bin, ''), 6), 'unknown')),
      ('country', coalesce(upper(nullif(t.payment_method->'billing_address'->>'country', '')), 'unknown')),
      ('attempt', a.retry_number::text),
      ('ttr', CASE WHEN a.state = 'captured' AND a.processed_at IS NOT NULL
                THEN greatest(0, floor(extract(epoch FROM a.processed_at - t.failed_at) / 3600))::bigint::text END)
    ) AS v(dim, key)) AS d`;

/** Contribution of refund rows in `src` with sign `s`: completed refunds that gave money back. */
export const refundRows = (src: string, s: string): string => `
  SELECT t.merchant_id, (t.submitted_ts AT TIME ZONE 'UTC')::date AS day, t.currency, d.dim, d.key,
         ${s} * (f.kind = 'refund' AND f.status = 'Completed' AND f.amount_minor > 0)::int AS refunded_count,
         ${s} * CASE WHEN f.kind = 'refund' AND f.status = 'Completed' THEN f.amount_minor ELSE 0 END AS refunded_amount
    FROM ${src} f JOIN transactions t ON t.id = f.transaction_id ${TXN_DIMS}`;

const TABLES = {
  transactions: { rows: txnRows, counters: ['failed_count', 'failed_amount', 'stopped_count'] as Counter[] },
  attempts: { rows: attemptRows, counters: ['attempts', 'recovered_count', 'recovered_amount'] as Counter[] },
  refunds: { rows: refundRows, counters: ['refunded_count', 'refunded_amount'] as Counter[] },
};

export class AnalyticsRollup1797400000100 implements MigrationInterface {
  name = 'AnalyticsRollup1797400000100';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE analytics_rollup (
        merchant_id uuid NOT NULL REFERENCES merchants(id) ON DELETE CASCADE,
        day date NOT NULL,
        currency char(3) NOT NULL,
        dim varchar(16) NOT NULL,
        key varchar(64) NOT NULL,
        ${COUNTERS.map((c) => `${c} bigint NOT NULL DEFAULT 0`).join(',\n        ')},
        PRIMARY KEY (merchant_id, day, currency, dim, key)
      )`);
    for (const [table, { rows, counters }] of Object.entries(TABLES)) {
      const fn = (op: string, body: string): string => `
        CREATE FUNCTION analytics_${table}_${op}() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
          ${body}
          RETURN NULL;
        END $fn$`;
      await q.query(fn('ins', upsert(rows('new_rows', '1'), counters)));
      await q.query(fn('upd', upsert(`${rows('new_rows', '1')} UNION ALL ${rows('old_rows', '-1')}`, counters)));
      await q.query(fn('del', upsert(rows('old_rows', '-1'), counters)));
      await q.query(`CREATE TRIGGER analytics_${table}_ins AFTER INSERT ON ${table}
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION analytics_${table}_ins()`);
      await q.query(`CREATE TRIGGER analytics_${table}_upd AFTER UPDATE ON ${table}
        REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION analytics_${table}_upd()`);
      await q.query(`CREATE TRIGGER analytics_${table}_del AFTER DELETE ON ${table}
        REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION analytics_${table}_del()`);
    }
    // Rows that exist already.
    for (const [table, { rows, counters }] of Object.entries(TABLES)) {
      await q.query(upsert(rows(table, '1'), counters));
    }
  }

  async down(q: QueryRunner): Promise<void> {
    for (const table of Object.keys(TABLES)) {
      for (const op of ['ins', 'upd', 'del']) {
        await q.query(`DROP TRIGGER IF EXISTS analytics_${table}_${op} ON ${table}`);
        await q.query(`DROP FUNCTION IF EXISTS analytics_${table}_${op}()`);
      }
    }
    await q.query(`DROP TABLE IF EXISTS analytics_rollup`);
  }
}
