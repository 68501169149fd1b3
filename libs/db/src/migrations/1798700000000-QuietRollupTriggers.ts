import type { MigrationInterface, QueryRunner } from 'typeorm';
import { append, bodies, rollupTables } from './1798200000000-PendingCounters';

/** Columns the rollup reads of a transaction row (txnRows and its dimensions, network fees). */
const TXN_COLUMNS = [
  'merchant_id',
  'submitted_ts',
  'currency',
  'review_status',
  'amount_minor',
  'status',
  'auth_code',
  'auth_code_description',
  'card_network',
  'card_bin',
  `payment_method->'billing_address'->>'country'`,
  'naive_network_fees_minor',
  'network_fees_minor',
];
/** Columns the rollup reads of an attempt row (its transaction's columns do not change with it). */
const ATTEMPT_COLUMNS = [
  'transaction_id',
  'state',
  'amount_minor',
  'partial_amount_minor',
  'processed_at',
  'retry_number',
];

export const differ = (columns: string[]): string =>
  `(${columns.map((c) => `OLD.${c}`).join(', ')}) IS DISTINCT FROM (${columns.map((c) => `NEW.${c}`).join(', ')})`;

export const UPDATE_TRIGGERS: { table: 'transactions' | 'attempts'; columns: string[] }[] = [
  { table: 'transactions', columns: TXN_COLUMNS },
  { table: 'attempts', columns: ATTEMPT_COLUMNS },
];

/**
 * The rollup's UPDATE triggers on transactions and attempts were statement triggers with transition
 * tables: Postgres captured every updated row, old and new, for every UPDATE, even when nothing the
 * rollup counts had changed (the retry tick's schedule updates of 500 transactions, every record's
 * bookkeeping): about half of a tick (issue 14). They become row triggers whose WHEN clause names
 * the columns the rollup reads, so an UPDATE that changes none of them costs nothing. The attempts'
 * INSERT trigger returns at once when every new attempt is pending (they count nothing).
 */
export class QuietRollupTriggers1798700000000 implements MigrationInterface {
  name = 'QuietRollupTriggers1798700000000';

  async up(q: QueryRunner): Promise<void> {
    const tables = rollupTables();
    for (const { table, columns } of UPDATE_TRIGGERS) {
      const { rows, counters } = tables[table]!;
      await q.query(`DROP TRIGGER analytics_${table}_upd ON ${table}`);
      await q.query(`
        CREATE FUNCTION analytics_${table}_upd_row() RETURNS trigger LANGUAGE plpgsql AS $fn$
        BEGIN
          ${append(`${rows('(SELECT (NEW).*)', '1')} UNION ALL ${rows('(SELECT (OLD).*)', '-1')}`, counters)}
          RETURN NULL;
        END $fn$`);
      await q.query(`CREATE TRIGGER analytics_${table}_upd_row AFTER UPDATE ON ${table} FOR EACH ROW
        WHEN (${differ(columns)}) EXECUTE FUNCTION analytics_${table}_upd_row()`);
    }
    await q.query(`
      CREATE OR REPLACE FUNCTION analytics_attempts_ins() RETURNS trigger LANGUAGE plpgsql AS $fn$
      BEGIN
        IF NOT EXISTS (SELECT 1 FROM new_rows WHERE state <> 'pending') THEN RETURN NULL; END IF;
        ${bodies(append)['attempts']!['ins']}
        RETURN NULL;
      END $fn$`);
  }

  async down(q: QueryRunner): Promise<void> {
    for (const { table } of UPDATE_TRIGGERS) {
      await q.query(`DROP TRIGGER analytics_${table}_upd_row ON ${table}`);
      await q.query(`DROP FUNCTION analytics_${table}_upd_row()`);
      await q.query(`CREATE TRIGGER analytics_${table}_upd AFTER UPDATE ON ${table}
        REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION analytics_${table}_upd()`);
    }
    await q.query(`
      CREATE OR REPLACE FUNCTION analytics_attempts_ins() RETURNS trigger LANGUAGE plpgsql AS $fn$
      BEGIN
        ${bodies(append)['attempts']!['ins']}
        RETURN NULL;
      END $fn$`);
  }
}
