import type { MigrationInterface, QueryRunner } from 'typeorm';
import { attemptRows, upsert, type Counter } from './1797400000100-AnalyticsRollup';

const COUNTERS: Counter[] = ['attempts', 'recovered_count', 'recovered_amount'];
export const RECOVERED = 'coalesce(a.partial_amount_minor, a.amount_minor)';

/**
 * Partial authorizations (decisions §15): an attempt the issuer approved for less than its amount
 * keeps what it asked in `amount_minor` and what was captured in `partial_amount_minor`; the
 * transaction's captured amount (what is refundable) is the latter. The analytics rollup counts
 * the captured amount as recovered: its attempt trigger functions are replaced to read it (no row
 * has a partial capture yet, so the rollup's contents do not change).
 */
export class PartialAuthorizations1797950000000 implements MigrationInterface {
  name = 'PartialAuthorizations1797950000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE attempts ADD COLUMN partial_amount_minor bigint CHECK (partial_amount_minor > 0)`);
    await this.functions(q, RECOVERED);
  }

  async down(q: QueryRunner): Promise<void> {
    await this.functions(q, 'a.amount_minor');
    await q.query(`ALTER TABLE attempts DROP COLUMN partial_amount_minor`);
  }

  private async functions(q: QueryRunner, recovered: string): Promise<void> {
    const rows = (src: string, s: string): string => attemptRows(src, s, recovered);
    const fn = (op: string, body: string): string => `
      CREATE OR REPLACE FUNCTION analytics_attempts_${op}() RETURNS trigger LANGUAGE plpgsql AS $fn$
      BEGIN
        ${body}
        RETURN NULL;
      END $fn$`;
    await q.query(fn('ins', upsert(rows('new_rows', '1'), COUNTERS)));
    await q.query(fn('upd', upsert(`${rows('new_rows', '1')} UNION ALL ${rows('old_rows', '-1')}`, COUNTERS)));
    await q.query(fn('del', upsert(rows('old_rows', '-1'), COUNTERS)));
  }
}
