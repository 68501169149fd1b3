import type { DataSource } from 'typeorm';

/**
 * The processor account of the attempt that made transaction `t`'s capture, as a select-list item
 * `captured_by`: `{id}` (id null: the app's processor), or null when no attempt made it. Refunds and
 * settlement checks go to that account (migration ProcessorAccountVersions).
 */
export const CAPTURED_BY_SQL = `(SELECT json_build_object('id', a.processor_account_id) FROM attempts a
   WHERE a.transaction_id = t.id AND a.processor_transaction_id = t.processor_transaction_id
   LIMIT 1) AS captured_by`;

export interface AwaitingSettlementRow {
  id: string;
  merchant_id: string;
  division_number: string | null;
  processor_transaction_id: string;
  /** When the transaction became Captured. */
  captured_at: Date;
  submitted_ts: Date;
  /** The attempt that made the capture: its processor account (id null: the app's processor). */
  captured_by: { id: string | null } | null;
}

/** Captured transactions waiting for their processor's settlement, and the move to Settled. */
export class SettlementRepository {
  /**
   * The `limit` least recently checked Captured transactions (partial index
   * transactions_awaiting_settlement), marked checked now so the next pass takes others first.
   */
  static async takeForCheck(db: Pick<DataSource, 'query'>, limit: number): Promise<AwaitingSettlementRow[]> {
    const [rows]: [AwaitingSettlementRow[], number] = await db.query(
      `UPDATE transactions t SET settlement_checked_at = now()
         FROM (SELECT id FROM transactions WHERE status = 'Captured' AND processor_transaction_id IS NOT NULL
                ORDER BY settlement_checked_at NULLS FIRST, status_changed_at LIMIT $1
                FOR UPDATE SKIP LOCKED) due
        WHERE t.id = due.id
        RETURNING t.id, t.merchant_id, t.division_number, t.processor_transaction_id,
                  t.status_changed_at AS captured_at, t.submitted_ts, ${CAPTURED_BY_SQL}`,
      [limit],
    );
    return rows;
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
