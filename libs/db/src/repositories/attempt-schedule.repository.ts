import { excessFeeAt, newRetainTransactionId, newVid } from '@retain/domain';
import type { EntityManager } from 'typeorm';

interface DueRow {
  id: string;
  merchant_id: string;
  attempt_count: number;
  next_attempt_at: Date;
  amount_minor: string;
  currency: string;
  card_hmac: string | null;
  card_network: string | null;
  next_attempt_plan: unknown;
  forced_deposit_planned: boolean;
}

/** The tick's claim of up to $1 due transactions (exported for bench/scale's EXPLAIN). */
export const CLAIM_DUE_SQL = `SELECT t.id, t.merchant_id, t.attempt_count, t.next_attempt_at, t.amount_minor, t.currency, t.card_hmac,
        t.card_network, t.next_attempt_plan, t.forced_deposit_planned
   FROM transaction_due d JOIN transactions t ON t.id = d.transaction_id
  WHERE d.due_at <= now() AND t.next_attempt_at <= now() AND t.review_status = 'passed'
    AND t.status IN ('Failed', 'In Retry') AND t.stop_requested_at IS NULL
  ORDER BY d.due_at LIMIT $1 FOR UPDATE OF t SKIP LOCKED`;

/**
 * The tick's update of the transactions it claimed (exported for the HOT-update check,
 * hot-schedule-updates.spec): it changes no indexed column.
 */
export const CLEAR_CLAIMED_SQL = `UPDATE transactions SET next_attempt_at = NULL, next_attempt_plan = NULL,
        attempt_count = attempt_count + 1, updated_at = now()
  WHERE id = ANY($1::uuid[])`;

/**
 * The retry schedule: transactions whose next attempt is due (next_attempt_at) turned into pending
 * attempt rows. Spans every merchant by design: it is the scheduler tick's own work, and each
 * attempt row it writes carries its transaction's merchant id from there on.
 */
export class AttemptScheduleRepository {
  /**
   * Claims up to `limit` due transactions (FOR UPDATE SKIP LOCKED: several workers may tick at once
   * without handing out the same transaction twice), writes one pending attempt per transaction and
   * clears next_attempt_at (at most one attempt in flight). Runs in the caller's transaction, which
   * also writes the outbox rows; returns the new attempts' ids. Due transactions are found through
   * `transaction_due` (migration DueTransactions: kept by trigger, so that a schedule update of a
   * transaction writes no index entry); the transaction's own next_attempt_at is checked again
   * under its row lock.
   */
  async claimDue(m: EntityManager, limit: number): Promise<string[]> {
    const due: DueRow[] = await m.query(CLAIM_DUE_SQL, [limit]);
    if (due.length === 0) return [];
    const attempts = due.map((t) => ({
      vid: newVid(),
      rtid: newRetainTransactionId(),
      transaction_id: t.id,
      merchant_id: t.merchant_id,
      retry_number: t.attempt_count + 1,
      scheduled_for: new Date(t.next_attempt_at).toISOString(),
      amount_minor: t.amount_minor,
      currency: t.currency,
      card_hmac: t.card_hmac,
      card_network: t.card_network,
      // Why this attempt is where it is (the policy's explanation), kept on the attempt.
      plan: t.next_attempt_plan ?? null,
      // The excess-reattempt fee it risks (network-rules.md): its network's rate on its day.
      fee: excessFeeAt(t.card_network, new Date(t.next_attempt_at)),
      forced: t.forced_deposit_planned === true,
    }));
    const inserted: { id: string }[] = await m.query(
      `INSERT INTO attempts (vid, retain_transaction_id, transaction_id, merchant_id, retry_number, state,
         scheduled_for, amount_minor, currency, card_hmac, card_network, plan, network_fee_risked_minor, forced_deposit)
       SELECT x.vid, x.rtid, x.transaction_id, x.merchant_id, x.retry_number, 'pending', x.scheduled_for,
              x.amount_minor, x.currency, x.card_hmac, x.card_network, x.plan, x.fee, x.forced
         FROM jsonb_to_recordset($1::jsonb) AS x(vid text, rtid text, transaction_id uuid, merchant_id uuid,
           retry_number int, scheduled_for timestamptz, amount_minor bigint, currency text, card_hmac text,
           card_network text, plan jsonb, fee int, forced boolean)
       RETURNING id`,
      [JSON.stringify(attempts)],
    );
    await m.query(CLEAR_CLAIMED_SQL, [due.map((t) => t.id)]);
    return inserted.map((a) => a.id);
  }
}
