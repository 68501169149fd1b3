import type { MigrationInterface, QueryRunner } from 'typeorm';
import { txnRows, upsert } from './1797400000100-AnalyticsRollup';

const COUNTERS = ['failed_count', 'failed_amount', 'stopped_count', 'network_fees_avoided'];

/**
 * Network fees (issue 12, network-rules.md): each attempt records the excess-reattempt fee it
 * risks (USD minor units, its network's rate on its day); a transaction whose recovery ended
 * records what its own attempts paid in such fees (0: they are guarded) and what a naive daily
 * schedule would have paid (libs/domain network-fees.ts). The analytics rollup adds up the
 * difference, the fees avoided, per cohort day and dimension like every other counter.
 */
export class NetworkFees1797970000000 implements MigrationInterface {
  name = 'NetworkFees1797970000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE attempts ADD COLUMN network_fee_risked_minor int`);
    await q.query(
      `ALTER TABLE transactions ADD COLUMN network_fees_minor int, ADD COLUMN naive_network_fees_minor int`,
    );
    await q.query(`ALTER TABLE analytics_rollup ADD COLUMN network_fees_avoided bigint NOT NULL DEFAULT 0`);
    const extra = (s: string): string => `
         ${s} * coalesce(t.naive_network_fees_minor - t.network_fees_minor, 0) AS network_fees_avoided,`;
    const rows = (src: string, s: string): string => txnRows(src, s, extra(s));
    const fn = (op: string, body: string): string => `
      CREATE OR REPLACE FUNCTION analytics_transactions_${op}() RETURNS trigger LANGUAGE plpgsql AS $fn$
      BEGIN
        ${body}
        RETURN NULL;
      END $fn$`;
    await q.query(fn('ins', upsert(rows('new_rows', '1'), COUNTERS)));
    await q.query(fn('upd', upsert(`${rows('new_rows', '1')} UNION ALL ${rows('old_rows', '-1')}`, COUNTERS)));
    await q.query(fn('del', upsert(rows('old_rows', '-1'), COUNTERS)));
  }

  async down(q: QueryRunner): Promise<void> {
    const counters = COUNTERS.slice(0, 3);
    const fn = (op: string, body: string): string => `
      CREATE OR REPLACE FUNCTION analytics_transactions_${op}() RETURNS trigger LANGUAGE plpgsql AS $fn$
      BEGIN
        ${body}
        RETURN NULL;
      END $fn$`;
    await q.query(fn('ins', upsert(txnRows('new_rows', '1'), counters)));
    await q.query(fn('upd', upsert(`${txnRows('new_rows', '1')} UNION ALL ${txnRows('old_rows', '-1')}`, counters)));
    await q.query(fn('del', upsert(txnRows('old_rows', '-1'), counters)));
    await q.query(`ALTER TABLE analytics_rollup DROP COLUMN network_fees_avoided`);
    await q.query(`ALTER TABLE transactions DROP COLUMN network_fees_minor, DROP COLUMN naive_network_fees_minor`);
    await q.query(`ALTER TABLE attempts DROP COLUMN network_fee_risked_minor`);
  }
}
