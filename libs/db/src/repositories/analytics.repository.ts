import type { DataSource } from 'typeorm';

/** One rollup group as read: counters summed over the days of one period (or of the whole range). */
export interface AnalyticsRow {
  currency: string;
  /** First day (YYYY-MM-DD) of the period; null in the range totals. */
  period: string | null;
  dim: string;
  key: string;
  failed_count: number;
  failed_amount: string;
  attempts: number;
  recovered_count: number;
  recovered_amount: string;
  refunded_count: number;
  refunded_amount: string;
  stopped_count: number;
  /** Card-network fees a naive daily schedule would have paid minus ours, USD minor units (text). */
  network_fees_avoided: string;
}

const COLUMNS = `merchant_id, day, currency, dim, key, failed_count, failed_amount, attempts, recovered_count,
  recovered_amount, refunded_count, refunded_amount, stopped_count, network_fees_avoided`;

/**
 * The rollup as reads see it: the folded rows plus the contributions still pending (migration
 * 1798200000000: writers append, the retry tick folds), so every committed write counts at once.
 */
export const ROLLUP = `SELECT ${COLUMNS} FROM analytics_rollup UNION ALL SELECT ${COLUMNS} FROM analytics_rollup_pending`;

/**
 * Reads of the analytics rollup (analytics_rollup, kept by the triggers of migration
 * 1797400000100): one merchant, cohort days from..to (inclusive, UTC). Amounts stay strings
 * (bigint minor units).
 */
export class AnalyticsRepository {
  constructor(private readonly db: DataSource) {}

  /** Moves up to `limit` pending contributions into the rollup; returns how many it moved. */
  static async fold(db: Pick<DataSource, 'query'>, limit = 50_000): Promise<number> {
    const [{ n }] = (await db.query(`SELECT analytics_rollup_fold($1) AS n`, [limit])) as { n: number }[];
    return n;
  }

  /**
   * Totals of every dimension and key over the range, plus the `all` dimension per period
   * (`bucket`: day, or ISO week starting Monday), in one round trip.
   */
  async read(merchantId: string, from: string, to: string, bucket: 'day' | 'week'): Promise<AnalyticsRow[]> {
    const rows: AnalyticsRow[] = await this.db.query(
      `SELECT currency, CASE WHEN GROUPING(period) = 0 THEN to_char(period, 'YYYY-MM-DD') END AS period,
              dim, key,
              sum(failed_count)::int AS failed_count, sum(failed_amount)::text AS failed_amount,
              sum(attempts)::int AS attempts, sum(recovered_count)::int AS recovered_count,
              sum(recovered_amount)::text AS recovered_amount, sum(refunded_count)::int AS refunded_count,
              sum(refunded_amount)::text AS refunded_amount, sum(stopped_count)::int AS stopped_count,
              sum(network_fees_avoided)::text AS network_fees_avoided
         FROM (SELECT r.*, CASE WHEN $4 = 'week' THEN date_trunc('week', r.day)::date ELSE r.day END AS period
                 FROM (${ROLLUP}) r
                WHERE r.merchant_id = $1 AND r.day BETWEEN $2::date AND $3::date) x
        GROUP BY GROUPING SETS ((currency, dim, key), (currency, dim, key, period))
       HAVING GROUPING(period) = 1 OR dim = 'all'
        ORDER BY currency, period NULLS FIRST, dim, key`,
      [merchantId, from, to, bucket],
    );
    return rows;
  }

  /** Network fees avoided (USD minor units, text) per currency over cohort days from..to. */
  async feesAvoided(merchantId: string, from: string, to: string): Promise<{ currency: string; minor: string }[]> {
    return this.db.query(
      `SELECT currency, sum(network_fees_avoided)::text AS minor FROM (${ROLLUP}) r
        WHERE merchant_id = $1 AND day BETWEEN $2::date AND $3::date AND dim = 'all'
        GROUP BY currency ORDER BY currency`,
      [merchantId, from, to],
    );
  }
}
