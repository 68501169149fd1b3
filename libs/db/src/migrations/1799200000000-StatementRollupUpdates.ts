import type { MigrationInterface, QueryRunner } from 'typeorm';
import { txnDims } from './1797400000100-AnalyticsRollup';
import { RECOVERED } from './1797950000000-PartialAuthorizations';
import { UPDATE_TRIGGERS, differ } from './1798700000000-QuietRollupTriggers';

const ATTEMPT_COUNTERS = ['attempts', 'recovered_count', 'recovered_amount'];
const TXN_COUNTERS = ['failed_count', 'failed_amount', 'stopped_count', 'network_fees_avoided'];
const sums = (counters: string[], alias: string) => counters.map((c) => `sum(${alias}${c})::bigint AS ${c}`).join(', ');
const nonZero = (counters: string[], alias: string) => counters.map((c) => `sum(${alias}${c}) <> 0`).join(' OR ');

/**
 * A statement's rows before (sign -1, old_rows) and after (sign 1, new_rows), projected on what the
 * rollup reads and added up by those values: a row whose counted values did not change cancels out
 * in its group, and groups that sum to zero are dropped before any join or dimension row is made.
 */
const signed = (project: (s: string) => string, group: string, counters: string[]) => `
  SELECT ${group}, ${sums(counters, '')}
    FROM (SELECT ${project('1')} FROM new_rows a UNION ALL SELECT ${project('-1')} FROM old_rows a) AS r
   GROUP BY ${group}
  HAVING ${nonZero(counters, '')}`;

/** The transactions' UPDATE: txnRows' values and counters (with the network fees), grouped first. */
const TXN_GROUP = 'merchant_id, day, currency, auth_code, auth_code_description, card_network, card_bin, country';
const txnUpdate = `
  INSERT INTO analytics_rollup_pending (merchant_id, day, currency, dim, key, ${TXN_COUNTERS.join(', ')})
  SELECT t.merchant_id, t.day, t.currency, d.dim, d.key, ${sums(TXN_COUNTERS, 't.')}
    FROM (${signed(
      (s) => `merchant_id, (submitted_ts AT TIME ZONE 'UTC')::date AS day, currency, auth_code,
        auth_code_description, card_network, card_bin, payment_method->'billing_address'->>'country' AS country,
        ${s} * (review_status <> 'rejected')::int AS failed_count,
        ${s} * CASE WHEN review_status <> 'rejected' THEN amount_minor ELSE 0 END AS failed_amount,
        ${s} * (status = 'Stopped')::int AS stopped_count,
        ${s} * coalesce(naive_network_fees_minor - network_fees_minor, 0) AS network_fees_avoided`,
      TXN_GROUP,
      TXN_COUNTERS,
    )}) t
    ${txnDims('t.country')}
   WHERE d.key IS NOT NULL
   GROUP BY t.merchant_id, t.day, t.currency, d.dim, d.key
  HAVING ${nonZero(TXN_COUNTERS, 't.')};`;

/**
 * The attempts' UPDATE: attemptRows' counters by attempt (transaction, retry number, capture time:
 * the ttr key), grouped first; only the groups left are joined to their transactions and expanded.
 */
const attemptUpdate = `
  INSERT INTO analytics_rollup_pending (merchant_id, day, currency, dim, key, ${ATTEMPT_COUNTERS.join(', ')})
  SELECT t.merchant_id, (t.submitted_ts AT TIME ZONE 'UTC')::date AS day, t.currency, d.dim, d.key,
         ${sums(ATTEMPT_COUNTERS, 'g.')}
    FROM (${signed(
      (s) => `transaction_id, retry_number, CASE WHEN state = 'captured' THEN processed_at END AS captured_at,
        ${s} * (state <> 'pending')::int AS attempts,
        ${s} * (state = 'captured')::int AS recovered_count,
        ${s} * CASE WHEN state = 'captured' THEN ${RECOVERED} ELSE 0 END AS recovered_amount`,
      'transaction_id, retry_number, captured_at',
      ATTEMPT_COUNTERS,
    )}) g
    -- One lookup by key per group, whatever the plan cached from the first call estimated (OFFSET 0
    -- keeps the subquery from being flattened into a join that could scan all transactions).
    CROSS JOIN LATERAL (
      SELECT tx.merchant_id, tx.submitted_ts, tx.currency, tx.auth_code, tx.auth_code_description, tx.card_network,
             tx.card_bin, tx.payment_method->'billing_address'->>'country' AS country, tx.failed_at
        FROM transactions tx WHERE tx.id = g.transaction_id OFFSET 0) t
    ${txnDims('t.country', [
      `('attempt', g.retry_number::text)`,
      `('ttr', CASE WHEN g.captured_at IS NOT NULL
                THEN greatest(0, floor(extract(epoch FROM g.captured_at - t.failed_at) / 3600))::bigint::text END)`,
    ])}
   WHERE d.key IS NOT NULL
   GROUP BY 1, 2, 3, 4, 5
  HAVING ${nonZero(ATTEMPT_COUNTERS, 'g.')};`;

export const UPDATES = { transactions: txnUpdate, attempts: attemptUpdate };

/**
 * The rollup's UPDATE triggers on transactions and attempts become statement triggers again, grouped
 * before they expand (issue 14, attempts that scale).
 *
 * QuietRollupTriggers made them row triggers with a WHEN clause, so a schedule update that changes
 * nothing the rollup counts costs nothing. But every record of an attempt does change counted
 * columns (the attempt's state, the transaction's status), and a grouped record of 256 attempts ran
 * the trigger's query (a join, six or eight dimension rows, GROUP BY, INSERT) 512 times: about
 * 116 µs per attempt row and 37 µs per transaction row, 18% of the Postgres time of an attempt in
 * `bench/attempts`, appending up to 16 pending rows per attempt. Now one query per statement: the
 * old and new rows, signed, are added up by the values the rollup reads (`signed`), so unchanged
 * rows cancel before any join or dimension row is made (a schedule update of 500 rows expands
 * nothing, the original statement triggers' cost), and a record of 256 declines of one day appends
 * a few dozen pending rows. Every counter is a sum, so the contributions are the same numbers.
 */
export class StatementRollupUpdates1799200000000 implements MigrationInterface {
  name = 'StatementRollupUpdates1799200000000';

  async up(q: QueryRunner): Promise<void> {
    for (const { table } of UPDATE_TRIGGERS) {
      await q.query(`DROP TRIGGER analytics_${table}_upd_row ON ${table}`);
      await q.query(`
        CREATE FUNCTION analytics_${table}_upd_grouped() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
          ${UPDATES[table]}
          RETURN NULL;
        END $fn$`);
      await q.query(`CREATE TRIGGER analytics_${table}_upd_grouped AFTER UPDATE ON ${table}
        REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION analytics_${table}_upd_grouped()`);
    }
  }

  async down(q: QueryRunner): Promise<void> {
    for (const { table, columns } of UPDATE_TRIGGERS) {
      await q.query(`DROP TRIGGER analytics_${table}_upd_grouped ON ${table}`);
      await q.query(`DROP FUNCTION analytics_${table}_upd_grouped()`);
      // The row trigger's function (analytics_<table>_upd_row) was left in place by up().
      await q.query(`CREATE TRIGGER analytics_${table}_upd_row AFTER UPDATE ON ${table} FOR EACH ROW
        WHEN (${differ(columns)}) EXECUTE FUNCTION analytics_${table}_upd_row()`);
    }
  }
}
