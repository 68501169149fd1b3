import type { MigrationInterface, QueryRunner } from 'typeorm';

const AMOUNTS = ['failed_amount', 'recovered_amount', 'refunded_amount', 'network_fees_avoided'];
const TABLES = ['analytics_rollup', 'analytics_rollup_pending'];

/**
 * The rollup's amounts were bigint: amounts the API accepts (up to 2^53 - 1 minor units each, 1000
 * per call) summed past 2^63 for one merchant, day and currency after a few calls, and the fold,
 * shared by every merchant, then failed on every tick ("bigint out of range"; the security audit of
 * the sixteenth session). A statement over more than about 1000 such rows failed the same way in
 * its trigger. Amount counters are now numeric in analytics_rollup and its pending table, and every
 * rollup function (the triggers' appends and `analytics_rollup_fold`) sums them as numeric: the
 * casts `::bigint AS <amount>` of the deployed definitions become `::numeric`, whatever migration
 * wrote them. Counts stay bigint (each row counts 1). Reads already cast the sums to text.
 * Rewrites both tables (small: one row per merchant, day, currency and key).
 */
export class NumericRollupAmounts1800450000000 implements MigrationInterface {
  name = 'NumericRollupAmounts1800450000000';

  async up(q: QueryRunner): Promise<void> {
    await this.columns(q, 'numeric');
    await this.functions(q, 'bigint', 'numeric');
  }

  async down(q: QueryRunner): Promise<void> {
    await this.functions(q, 'numeric', 'bigint');
    await this.columns(q, 'bigint');
  }

  private async columns(q: QueryRunner, type: string): Promise<void> {
    for (const table of TABLES) {
      await q.query(`ALTER TABLE ${table} ${AMOUNTS.map((c) => `ALTER COLUMN ${c} TYPE ${type}`).join(', ')}`);
    }
  }

  /** Re-creates every analytics_* function with its amount sums cast to `to` instead of `from`. */
  private async functions(q: QueryRunner, from: string, to: string): Promise<void> {
    const defs: { name: string; def: string }[] = await q.query(
      `SELECT p.proname AS name, pg_get_functiondef(p.oid) AS def
         FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = current_schema() AND p.prokind = 'f' AND p.proname LIKE 'analytics\\_%'`,
    );
    const cast = new RegExp(`::${from} AS (${AMOUNTS.join('|')})\\b`, 'g');
    let changed = 0;
    for (const { def } of defs) {
      const next = def.replace(cast, `::${to} AS $1`);
      if (next === def) continue;
      await q.query(next);
      changed++;
    }
    if (changed === 0) throw new Error('no analytics rollup function sums an amount: nothing to change');
  }
}
