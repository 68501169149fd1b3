import type { ExperimentVariant } from '@retain/domain';
import type { DataSource, EntityManager } from 'typeorm';

type Sql = Pick<EntityManager, 'query'> | Pick<DataSource, 'query'>;

export interface ExperimentRow {
  id: string;
  merchant_id: string;
  name: string;
  holdout_share: number;
  holdout_policy: string;
  variants: ExperimentVariant[];
  status: 'running' | 'stopped';
  created_at: Date;
  stopped_at: Date | null;
}

/** Moments of one arm and currency, from which results and intervals are computed. */
export interface ArmMomentsRow {
  arm: string;
  policy_version: string | null;
  currency: string;
  transactions: number;
  in_flight: number;
  recovered_count: number;
  /** Sums in minor units, as text (bigint / numeric). */
  recovered_amount: string;
  recovered_amount_squares: string;
  failed_amount: string;
  attempts: number;
  median_days_to_recover: number | null;
}

const COLUMNS = `id, merchant_id, name, holdout_share::float8 AS holdout_share, holdout_policy, variants, status,
  created_at, stopped_at`;

/** Policy experiments (migration 1797900000000): definitions, and the per-arm moments of their results. */
export class ExperimentsRepository {
  /** Creates a running experiment; null when the merchant already runs one (the partial unique index). */
  static async create(
    m: Sql,
    row: Omit<ExperimentRow, 'status' | 'created_at' | 'stopped_at'>,
  ): Promise<ExperimentRow | null> {
    const rows: ExperimentRow[] = await m.query(
      `INSERT INTO policy_experiments (id, merchant_id, name, holdout_share, holdout_policy, variants)
       VALUES ($1, $2, $3, $4, $5, $6::jsonb)
       ON CONFLICT (merchant_id) WHERE status = 'running' DO NOTHING
       RETURNING ${COLUMNS}`,
      [row.id, row.merchant_id, row.name, row.holdout_share, row.holdout_policy, JSON.stringify(row.variants)],
    );
    return rows[0] ?? null;
  }

  /** The id of the merchant with this login (the CLI names merchants by login), or null. */
  static async merchantIdByLogin(m: Sql, login: string): Promise<string | null> {
    const [row]: { id: string }[] = await m.query(`SELECT id FROM merchants WHERE login = $1`, [login]);
    return row?.id ?? null;
  }

  static async running(m: Sql, merchantId: string): Promise<ExperimentRow | null> {
    const [row]: ExperimentRow[] = await m.query(
      `SELECT ${COLUMNS} FROM policy_experiments WHERE merchant_id = $1 AND status = 'running'`,
      [merchantId],
    );
    return row ?? null;
  }

  static async get(m: Sql, merchantId: string, id: string): Promise<ExperimentRow | null> {
    const [row]: ExperimentRow[] = await m.query(
      `SELECT ${COLUMNS} FROM policy_experiments WHERE merchant_id = $1 AND id = $2`,
      [merchantId, id],
    );
    return row ?? null;
  }

  /**
   * A page of the merchant's experiments, newest first, after the experiment `startingAfter`: `limit`
   * rows, and whether more follow. Null when the merchant has no experiment `startingAfter` (a bad
   * cursor, not an empty page that would read as the list's end).
   */
  static async list(
    m: Sql,
    merchantId: string,
    page: { limit: number; startingAfter: string | null },
  ): Promise<{ data: ExperimentRow[]; hasMore: boolean } | null> {
    const rows: ExperimentRow[] = await m.query(
      `SELECT ${COLUMNS} FROM policy_experiments
        WHERE merchant_id = $1
          AND ($2::text IS NULL
               OR (created_at, id) < (SELECT c.created_at, c.id FROM policy_experiments c
                                       WHERE c.merchant_id = $1 AND c.id = $2))
        ORDER BY created_at DESC, id DESC
        LIMIT $3`,
      [merchantId, page.startingAfter, page.limit + 1],
    );
    if (rows.length === 0 && page.startingAfter !== null) {
      if (!(await ExperimentsRepository.get(m, merchantId, page.startingAfter))) return null;
    }
    return { data: rows.slice(0, page.limit), hasMore: rows.length > page.limit };
  }

  /** Stops a running experiment: new transactions get the default policy again; assigned ones keep their arm. */
  static async stop(m: Sql, merchantId: string, id: string): Promise<ExperimentRow | null> {
    const [rows]: [ExperimentRow[], number] = await m.query(
      `UPDATE policy_experiments SET status = 'stopped', stopped_at = now()
        WHERE merchant_id = $1 AND id = $2 AND status = 'running' RETURNING ${COLUMNS}`,
      [merchantId, id],
    );
    return rows[0] ?? (await ExperimentsRepository.get(m, merchantId, id));
  }

  /** The variant settings of a transaction's arm (planning reads them; holdout and no experiment: null). */
  static async armOf(m: Sql, merchantId: string, experimentId: string, arm: string): Promise<ExperimentVariant | null> {
    const [row]: { variant: ExperimentVariant | null }[] = await m.query(
      `SELECT (SELECT v FROM jsonb_array_elements(variants) v WHERE v->>'name' = $3) AS variant
         FROM policy_experiments WHERE merchant_id = $1 AND id = $2`,
      [merchantId, experimentId, arm],
    );
    return row?.variant ?? null;
  }

  /**
   * Per arm and currency: assigned transactions, those still being recovered, recovered count and
   * amount (first captured attempt in capture time, what it captured: a partial authorization counts
   * its captured part; a late capture of an earlier attempt, found after a later one captured, is a
   * second capture refunded at once, not the recovery; nor is a late capture after Cancelled or Stopped,
   * refunded at once, unless that refund failed; sum and sum of squares for the intervals), attempts made, and the median days from the
   * failure to the recovery. Transactions the post-submission review rejected are left out: no arm
   * ever plans them (they stay `Failed`, so they would count as in flight for ever).
   */
  static async moments(m: Sql, merchantId: string, experimentId: string): Promise<ArmMomentsRow[]> {
    return m.query(
      `SELECT t.experiment_arm AS arm, min(t.policy_version) AS policy_version, t.currency,
              count(*)::int AS transactions,
              count(*) FILTER (WHERE t.status IN ('Failed', 'In Retry', 'Stop Requested'))::int AS in_flight,
              count(cap.amount_minor)::int AS recovered_count,
              coalesce(sum(cap.amount_minor), 0)::text AS recovered_amount,
              coalesce(sum(cap.amount_minor::numeric * cap.amount_minor), 0)::text AS recovered_amount_squares,
              sum(t.amount_minor)::text AS failed_amount,
              coalesce(sum(att.n), 0)::int AS attempts,
              percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM cap.at - t.failed_at) / 86400)
                FILTER (WHERE cap.at IS NOT NULL) AS median_days_to_recover
         FROM transactions t
         LEFT JOIN LATERAL (
           SELECT coalesce(a.partial_amount_minor, a.amount_minor) AS amount_minor,
                  coalesce(a.processed_at, a.scheduled_for) AS at FROM attempts a
            WHERE a.transaction_id = t.id AND a.state = 'captured'
              -- A capture the service refunded at once (a late capture after Cancelled or Stopped, or a
              -- second one: its refund names the attempt) recovered nothing, unless that refund failed.
              AND NOT EXISTS (SELECT 1 FROM refunds r
                               WHERE r.transaction_id = t.id AND r.attempt_id = a.id AND r.status <> 'Failed')
            ORDER BY coalesce(a.processed_at, a.scheduled_for), a.id LIMIT 1) cap ON true
         LEFT JOIN LATERAL (
           SELECT count(*) AS n FROM attempts a WHERE a.transaction_id = t.id AND a.state <> 'pending') att ON true
        WHERE t.merchant_id = $1 AND t.experiment_id = $2 AND t.review_status <> 'rejected'
        GROUP BY t.experiment_arm, t.currency
        ORDER BY t.currency, t.experiment_arm`,
      [merchantId, experimentId],
    );
  }
}
