import type { DataSource } from 'typeorm';

/**
 * The processor account of the attempt that made transaction `t`'s capture, as a select-list item
 * `captured_by`: `{id}` (id null: the app's processor), or null when no attempt made it. Refunds and
 * settlement checks go to that account (migration ProcessorAccountVersions).
 */
export const CAPTURING_ACCOUNT_SQL = `(SELECT json_build_object('id', a.processor_account_id) FROM attempts a
   WHERE a.transaction_id = t.id AND a.processor_transaction_id = t.processor_transaction_id
   LIMIT 1)`;
export const CAPTURED_BY_SQL = `${CAPTURING_ACCOUNT_SQL} AS captured_by`;

/**
 * When transaction `t` captured, as a select-list item `captured_at`: the capturing attempt's
 * processed_at (the same moment the capture wrote status_changed_at), so a failed refund that puts the
 * transaction back to Captured (a new status_changed_at) does not move it; status_changed_at only when no
 * attempt made the capture.
 */
const CAPTURED_AT_SQL = `COALESCE((SELECT a.processed_at FROM attempts a
   WHERE a.transaction_id = t.id AND a.processor_transaction_id = t.processor_transaction_id
     AND a.processed_at IS NOT NULL
   ORDER BY a.processed_at LIMIT 1), t.status_changed_at) AS captured_at`;

/**
 * For refund `r` of transaction `t` (joined to its attempt `ra` on r.attempt_id): the charge it
 * returns, as select-list items `processor_transaction_id` and `captured_by`. A late capture's
 * refund names its attempt (its charge, its account); any other refund returns the transaction's capture.
 */
export const REFUNDED_CAPTURE_SQL = `CASE WHEN r.attempt_id IS NULL THEN t.processor_transaction_id
           ELSE ra.processor_transaction_id END AS processor_transaction_id,
         CASE WHEN r.attempt_id IS NULL THEN ${CAPTURING_ACCOUNT_SQL}
           ELSE json_build_object('id', ra.processor_account_id) END AS captured_by`;

export interface AwaitingSettlementRow {
  id: string;
  merchant_id: string;
  division_number: string | null;
  processor_transaction_id: string;
  /** When the transaction captured (its capturing attempt's processed_at), not a later return to Captured. */
  captured_at: Date;
  submitted_ts: Date;
  /** The attempt that made the capture: its processor account (id null: the app's processor). */
  captured_by: { id: string | null } | null;
}

/** Captured transactions waiting for their processor's settlement, and the move to Settled. */
export class SettlementRepository {
  /** The database's clock: a pass starts then (takeForCheck takes rows checked before it). */
  static async clock(db: Pick<DataSource, 'query'>): Promise<Date> {
    const [row]: { now: Date }[] = await db.query(`SELECT now() AS now`);
    return row!.now;
  }

  /**
   * The `limit` least recently checked Captured transactions last checked before `before` (never
   * checked, or not yet in this pass), marked checked now so the pass and the next take others. Two
   * ranges of the partial index transactions_awaiting_settlement (never checked, then checked before
   * `before`), so the pass's last batch does not walk the captures it checked or put back.
   */
  static async takeForCheck(
    db: Pick<DataSource, 'query'>,
    limit: number,
    before: Date,
  ): Promise<AwaitingSettlementRow[]> {
    const [rows]: [AwaitingSettlementRow[], number] = await db.query(
      `WITH fresh AS (
         SELECT id FROM transactions
          WHERE status = 'Captured' AND processor_transaction_id IS NOT NULL AND settlement_checked_at IS NULL
          ORDER BY settlement_checked_at NULLS FIRST, status_changed_at LIMIT $1
          FOR UPDATE SKIP LOCKED
       ), seen AS (
         SELECT id FROM transactions
          WHERE status = 'Captured' AND processor_transaction_id IS NOT NULL AND settlement_checked_at < $2
          ORDER BY settlement_checked_at NULLS FIRST, status_changed_at LIMIT $1 - (SELECT count(*) FROM fresh)
          FOR UPDATE SKIP LOCKED
       )
       UPDATE transactions t SET settlement_checked_at = now()
         FROM (SELECT id FROM fresh UNION ALL SELECT id FROM seen) due
        WHERE t.id = due.id
        RETURNING t.id, t.merchant_id, t.division_number, t.processor_transaction_id,
                  ${CAPTURED_AT_SQL}, t.submitted_ts, ${CAPTURED_BY_SQL}`,
      [limit, before],
    );
    return rows;
  }

  /**
   * Captures whose processor does not report settlement (the adapter has no `settlementOf`): checked
   * again in a day, after every capture due before (an adapter that learns it, after a deploy, then
   * finds them), so they take no place in the passes meanwhile.
   */
  static async putBack(db: Pick<DataSource, 'query'>, ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    await db.query(
      `UPDATE transactions SET settlement_checked_at = now() + interval '1 day'
        WHERE id = ANY($1::uuid[]) AND status = 'Captured'`,
      [ids],
    );
  }

  /**
   * Moves these transactions from Captured to Settled. Guarded by the status: one a refund request
   * moved on meanwhile is left as it is. Returns how many moved.
   */
  static async markSettled(db: Pick<DataSource, 'query'>, ids: readonly string[]): Promise<number> {
    if (ids.length === 0) return 0;
    const [, moved]: [unknown[], number] = await db.query(
      `UPDATE transactions SET status = 'Settled', settled_at = now(), status_changed_at = now(), updated_at = now()
        WHERE id = ANY($1::uuid[]) AND status = 'Captured'`,
      [ids],
    );
    return moved;
  }
}
