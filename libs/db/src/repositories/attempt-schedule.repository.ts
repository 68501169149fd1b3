import { excessFeeAt, newRetainTransactionId, newVid } from '@retain/domain';
import type { EntityManager } from 'typeorm';

interface DueRow {
  id: string;
  next_attempt_at: Date;
  card_network: string | null;
}

/** The tick's claim of up to $1 due transactions (exported for bench/scale's EXPLAIN). */
export const CLAIM_DUE_SQL = `SELECT t.id, t.next_attempt_at, t.card_network
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
    // The attempt rows are built in SQL from the locked transactions (their schedule, plan, amount and
    // card as they stand), before the schedule is cleared; only what JavaScript makes crosses over:
    // the ids (decisions.md formats) and the excess-reattempt fee the attempt risks (network-rules.md:
    // its network's rate on its day). The rows are also named by key (= ANY), so that the plan is
    // primary-key lookups whatever the statistics say, as in every grouped statement.
    const inserted: { id: string }[] = await m.query(
      `INSERT INTO attempts (vid, retain_transaction_id, transaction_id, merchant_id, retry_number, state,
         scheduled_for, amount_minor, currency, card_hmac, card_network, plan, network_fee_risked_minor, forced_deposit)
       SELECT x.vid, x.rtid, t.id, t.merchant_id, t.attempt_count + 1, 'pending', t.next_attempt_at,
              t.amount_minor, t.currency, t.card_hmac, t.card_network, t.next_attempt_plan, x.fee, t.forced_deposit_planned
         FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int[]) AS x(id, vid, rtid, fee)
         JOIN transactions t ON t.id = x.id
        WHERE t.id = ANY($1::uuid[])
       RETURNING id`,
      [
        due.map((t) => t.id),
        due.map(() => newVid()),
        due.map(() => newRetainTransactionId()),
        due.map((t) => excessFeeAt(t.card_network, new Date(t.next_attempt_at))),
      ],
    );
    await m.query(CLEAR_CLAIMED_SQL, [due.map((t) => t.id)]);
    return inserted.map((a) => a.id);
  }
}
