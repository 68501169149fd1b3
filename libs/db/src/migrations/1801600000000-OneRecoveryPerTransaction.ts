import type { MigrationInterface, QueryRunner } from 'typeorm';

/** How the deployed attempt triggers count a recovery: every captured attempt. */
const EVERY_CAPTURE = `(a.state = 'captured')::int AS recovered_count`;

/**
 * A captured attempt of row `a` that is its transaction's first capture (by capture time, then id):
 * a later one is a second capture (a late capture, refunded at once), never a second recovery.
 */
export const FIRST_CAPTURE = (a: string): string =>
  // CASE evaluates in order: the lookup (by attempts_transaction_retry) runs for captured rows only.
  `CASE WHEN ${a}.state <> 'captured' THEN 0
        WHEN EXISTS (SELECT 1 FROM attempts e
          WHERE e.transaction_id = ${a}.transaction_id AND e.state = 'captured'
            AND (e.processed_at, e.id) < (${a}.processed_at, ${a}.id)) THEN 0 ELSE 1 END`;

const FIRST_CAPTURE_COUNT = `(${FIRST_CAPTURE('a')}) AS recovered_count`;

/**
 * The analytics counted every captured attempt as a recovery: a transaction captured twice (a late
 * capture of an attempt settled as not charged, found after another attempt had captured; it is
 * recorded and refunded at once) counted two recovered transactions, so a cohort's recovered_count
 * and recovery_rate went above its failed transactions (1.5 for two transactions), and
 * success_by_attempt and time_to_recover counted it too. A transaction now counts one recovery, at
 * its first capture (capture time, then id); a second capture still adds its money to
 * recovered_amount and its refund to refunded_amount, so net_recovered_amount stays what the merchant
 * keeps. Captured is an attempt's last state and captures are recorded one at a time, so the first
 * capture of a transaction never changes once written: the triggers' +/- contributions of a row
 * stay symmetric. The rollup rows counted so far for second captures are taken back (pending rows,
 * folded by the next tick), writes waiting meanwhile.
 */
export class OneRecoveryPerTransaction1801600000000 implements MigrationInterface {
  name = 'OneRecoveryPerTransaction1801600000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`LOCK TABLE transactions, attempts IN SHARE MODE`);
    await this.functions(q, EVERY_CAPTURE, FIRST_CAPTURE_COUNT);
    await this.secondCaptures(q, -1);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`LOCK TABLE transactions, attempts IN SHARE MODE`);
    await this.functions(q, FIRST_CAPTURE_COUNT, EVERY_CAPTURE);
    await this.secondCaptures(q, 1);
  }

  /** Re-creates the attempt triggers' functions with `from` replaced by `to`. */
  private async functions(q: QueryRunner, from: string, to: string): Promise<void> {
    const defs: { def: string }[] = await q.query(
      `SELECT pg_get_functiondef(p.oid) AS def
         FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = current_schema() AND p.prokind = 'f' AND p.proname LIKE 'analytics\\_attempts\\_%'`,
    );
    let changed = 0;
    for (const { def } of defs) {
      const next = def.split(from).join(to);
      if (next === def) continue;
      await q.query(next);
      changed++;
    }
    if (changed === 0) throw new Error('no analytics attempt trigger counts recoveries: nothing to change');
  }

  /** `sign` × one recovery for every second capture, under each key its attempt was counted. */
  private async secondCaptures(q: QueryRunner, sign: number): Promise<void> {
    await q.query(`
      INSERT INTO analytics_rollup_pending (merchant_id, day, currency, dim, key, recovered_count)
      SELECT t.merchant_id, (t.submitted_ts AT TIME ZONE 'UTC')::date, t.currency, d.dim, d.key,
             (${sign} * count(*))::bigint
        FROM attempts a
        JOIN transactions t ON t.id = a.transaction_id
        CROSS JOIN LATERAL (SELECT t.auth_code, coalesce(t.original_decline_class, t.auth_code_description) AS cls,
                   coalesce(t.original_card_network, t.card_network) AS network,
                   coalesce(t.original_card_bin, t.card_bin) AS bin,
                   coalesce(t.original_country, t.payment_method->'billing_address'->>'country') AS country) k
        CROSS JOIN LATERAL (VALUES
          ('all', ''),
          ('decline_code', coalesce(nullif(k.auth_code, ''), 'unknown')),
          ('decline_class', CASE k.cls WHEN 'Soft Failure' THEN 'soft' WHEN 'Hard Failure' THEN 'hard'
                              ELSE 'unclassified' END),
          ('card_network', coalesce(lower(nullif(k.network, '')), 'unknown')),
          ('bin', coalesce(left(nullif(k.bin, ''), 6), 'unknown')),
          ('country', coalesce(upper(nullif(k.country, '')), 'unknown')),
          ('attempt', a.retry_number::text),
          ('ttr', greatest(0, floor(extract(epoch FROM a.processed_at - t.failed_at) / 3600))::bigint::text)
        ) AS d(dim, key)
       WHERE a.state = 'captured' AND (${FIRST_CAPTURE('a')}) = 0 AND d.key IS NOT NULL
       GROUP BY 1, 2, 3, 4, 5`);
  }
}
