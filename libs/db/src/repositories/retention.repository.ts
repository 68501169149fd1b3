import type { DataSource } from 'typeorm';
import { SESSION_ABSOLUTE_HOURS, SESSION_IDLE_MINUTES } from './portal-sessions.repository';

type Sql = Pick<DataSource, 'query'>;

/** The kinds of record retention removes or erases (the metric's `kind` label). */
export const RETENTION_KINDS = [
  'outbox',
  'webhook_messages',
  'sandbox_ledger',
  'card_data',
  'payment_method_card_data',
  'refund_idempotency_keys',
  'processor_notifications',
  'portal_sessions',
] as const;
export type RetentionKind = (typeof RETENTION_KINDS)[number];

/**
 * Statuses after which a transaction's recovery has ended (nothing more is charged). Captured and
 * the refund statuses may still be refunded, which never needs the card: a refund names the
 * processor's transaction id. The erasure still waits the refund window (CARD_DATA_ERASE_AFTER)
 * after the last status change, so disputes and support can see the row as it was.
 */
const ENDED = `('Captured', 'Settled', 'Refunded', 'Partially Refunded', 'Cancelled', 'Stopped', 'Void')`;

/**
 * An attempt (alias `a`) that may still be charged or looked up with its request: pending, unknown,
 * or watched for a late capture. One settled as not charged (`error`) is watched only while it was
 * processed after `$3` (the reconciliation's window): its `lookup_after` is never cleared.
 */
const STILL_LOOKED_UP = `(a.state IN ('pending', 'unknown')
  OR (a.lookup_after IS NOT NULL AND (a.state <> 'error' OR a.processed_at > $3)))`;

/**
 * Where a stored copy of a transaction's view holds its credit card: an attempt's copy of the payment
 * method it charged (`{payment_method, is_network_token, eci_indicator}`), and a push body (`{header,
 * content}`: a Transaction or a retry attempt, each with its payment_method).
 */
const ATTEMPT_CARD = ['payment_method', 'credit_card'];
const PUSH_CARD = ['content', 'payment_method', 'credit_card'];
const jsonPath = (keys: string[]): string => `'{${keys.join(',')}}'`;

/**
 * `doc` (jsonb) with its card at `path` as the reads show it after the erasure (paymentMethodView):
 * `account_hash` null, no `account_update_jwe`; the masked number, expiry and `account_updated` kept.
 * A document without a card at `path` comes back unchanged.
 */
const erasedCard = (doc: string, path: string[]): string =>
  `CASE WHEN jsonb_typeof(${doc} #> ${jsonPath(path)}) = 'object'
        THEN jsonb_set(${doc}, ${jsonPath(path)},
                       (${doc} #> ${jsonPath(path)}) - 'account_update_jwe' || '{"account_hash": null}'::jsonb)
        ELSE ${doc} END`;

/** `doc` holds, at `path`, a card's hash or an updater's JWE. */
const holdsCard = (doc: string, path: string[]): string =>
  `((${doc} #> ${jsonPath(path)}) ? 'account_update_jwe'
    OR jsonb_typeof(${doc} #> ${jsonPath([...path, 'account_hash'])}) <> 'null')`;

/**
 * Rows still holding card data: a sealed number, a JWE, a cryptogram, an updater's JWE, or only the
 * card's hash (a card sent as a token, or masked with its account_hash). Word for word the predicates
 * of the partial indexes the erasure walks (migration HashOnlyCardErasure1800300000000:
 * transactions_card_held, payment_methods_card_held), so that the planner uses them: change both at once.
 * Erased rows are stamped card_erased_at and never taken again.
 */
const TRANSACTIONS_CARD_HELD = `card_erased_at IS NULL
  AND (card_enc IS NOT NULL OR card_jwe IS NOT NULL OR cryptogram IS NOT NULL OR account_update_jwe IS NOT NULL
       OR account_hash IS NOT NULL)`;
const PAYMENT_METHODS_CARD_HELD = `card_erased_at IS NULL
  AND (card_enc IS NOT NULL OR cryptogram_enc IS NOT NULL OR account_update_jwe IS NOT NULL OR account_hash IS NOT NULL)`;

const count = (result: unknown): number => (Array.isArray(result) && typeof result[1] === 'number' ? result[1] : 0);

/**
 * Retention, one batch per call (each its own short statement, rows taken with SKIP LOCKED so a
 * batch never waits for the hot path and two sweepers never take the same rows). Every call
 * returns how many rows it removed or erased; the caller repeats while a whole batch was done.
 * What is never touched: transactions, attempts and refunds (the reads, the network rules' card
 * history and every refund need them), outbox rows not yet completed, webhook messages still
 * pending, ledger operations an unresolved attempt or an open refund may still look up.
 */
export class RetentionRepository {
  /** Outbox rows whose job completed before `before`. */
  static async outbox(db: Sql, before: Date, batch: number): Promise<number> {
    return count(
      await db.query(
        `DELETE FROM outbox WHERE id IN (
           SELECT id FROM outbox WHERE completed_at IS NOT NULL AND completed_at < $1
            ORDER BY completed_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
        [before, batch],
      ),
    );
  }

  /**
   * Processor notifications acted on before `before`. One not acted on yet stays (its job settles it).
   * A notification the processor delivers again after its row is gone is acted on again, which
   * changes nothing: the attempt or refund it names is settled already.
   */
  static async processorNotifications(db: Sql, before: Date, batch: number): Promise<number> {
    return count(
      await db.query(
        `DELETE FROM processor_notifications WHERE id IN (
           SELECT id FROM processor_notifications WHERE processed_at IS NOT NULL AND processed_at < $1
            ORDER BY processed_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
        [before, batch],
      ),
    );
  }

  /**
   * Portal sessions expired (decisions §14: 12 h after login, 30 min after the last request), by the
   * database clock as PortalSessionsRepository.resume reads them: the same rows it refuses. A live
   * session's touch holds its row, which is skipped (it is not expired). The table holds only the
   * sessions of the last 12 h and one interval, so a batch scans it (no index on last_seen_at: it is
   * rewritten every 30 s of each session's use).
   */
  static async portalSessions(db: Sql, batch: number): Promise<number> {
    return count(
      await db.query(
        `DELETE FROM portal_sessions WHERE token_hash IN (
           SELECT token_hash FROM portal_sessions
            WHERE created_at <= now() - make_interval(hours => $1)
               OR last_seen_at <= now() - make_interval(mins => $2)
            LIMIT $3 FOR UPDATE SKIP LOCKED)`,
        [SESSION_ABSOLUTE_HOURS, SESSION_IDLE_MINUTES, batch],
      ),
    );
  }

  /**
   * Webhook messages delivered, or ended `gone` (410) or `no_endpoint`, before `before`, with their
   * delivery logs (cascade).
   */
  static async webhookMessages(db: Sql, before: Date, batch: number): Promise<number> {
    // Dead messages are not deleted: decisions §9 keeps them "as dead" to be replayed.
    const delivered = count(
      await db.query(
        `DELETE FROM webhook_messages WHERE id IN (
           SELECT id FROM webhook_messages WHERE status = 'delivered' AND delivered_at < $1
            ORDER BY delivered_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
        [before, batch],
      ),
    );
    const ended = count(
      await db.query(
        `DELETE FROM webhook_messages WHERE id IN (
           SELECT id FROM webhook_messages WHERE status IN ('gone', 'no_endpoint') AND updated_at < $1
            ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
        [before, batch],
      ),
    );
    return delivered + ended;
  }

  /**
   * The sandbox processor's ledger: operations older than `before`, except a charge whose attempt
   * is still pending, unknown or watched for a late capture, a refund still Processing (their
   * lookups and same-key replays read the ledger), and the sandbox account updater's renewals (kind
   * `update`, keys `sbu_…`: the sandbox approves 4000000000000341 with a renewed expiry only while its
   * record is there; one per card and expiry issued, no card number in it).
   */
  static async sandboxLedger(db: Sql, before: Date, batch: number, watchedSince: Date): Promise<number> {
    return count(
      await db.query(
        `DELETE FROM sandbox_operations WHERE idempotency_key IN (
           SELECT o.idempotency_key FROM sandbox_operations o
            WHERE o.created_at < $1 AND o.kind <> 'update'
              AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.vid = o.idempotency_key AND ${STILL_LOOKED_UP})
              AND NOT EXISTS (SELECT 1 FROM refunds r WHERE r.vid = o.idempotency_key AND r.status = 'Processing')
            ORDER BY o.created_at LIMIT $2 FOR UPDATE OF o SKIP LOCKED)`,
        [before, batch, watchedSince],
      ),
    );
  }

  /** Idempotency keys of refund calls claimed before `before` (their answers are replayed until then). */
  static async refundIdempotencyKeys(db: Sql, before: Date, batch: number): Promise<number> {
    return count(
      await db.query(
        `DELETE FROM refund_idempotency_keys WHERE (merchant_id, key) IN (
           SELECT merchant_id, key FROM refund_idempotency_keys WHERE created_at < $1
            ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
        [before, batch],
      ),
    );
  }

  /**
   * Card data of transactions whose recovery ended (or whose review rejected them) before
   * `before`: the sealed card number, the intake's JWE, the cryptogram, the account updater's JWE and
   * the card's unkeyed SHA-1 (`account_hash`: with the BIN and last four kept it would give the number
   * back) are removed from the transaction; its attempts' copies of the payment method and the bodies of
   * all its push messages (any status: a dead one is replayed with its stored body) then show the card
   * as the reads of the erased transaction do (erasedCard). An attempt settled as not charged (state `error`) holds them only while the
   * reconciliation still watches it for a late capture (`watchedSince`); its `lookup_after` is never
   * cleared. Kept: the fingerprint (card_hmac: the network rules count attempts per card),
   * BIN, last four, network and expiry (the reads show them masked). Never erased while an
   * attempt may still be charged or looked up with its request, a refund is Processing (a stop's
   * refunds included), or a next attempt is planned. A stop still open is `Stop Requested`, which is
   * not ended; `stop_requested_at` stays on a row whose stop ended (Stopped, or refunded after a
   * capture), so it does not hold the card data.
   */
  static async transactionCardData(db: Sql, before: Date, batch: number, watchedSince: Date): Promise<number> {
    const rows: { n: number }[] = await db.query(
      `WITH erased AS (
         UPDATE transactions t SET card_enc = NULL, card_key_id = NULL, card_jwe = NULL, cryptogram = NULL,
                account_update_jwe = NULL, account_hash = NULL, card_erased_at = now()
          WHERE t.id IN (
            SELECT x.id FROM transactions x
             WHERE ${TRANSACTIONS_CARD_HELD}
               AND x.status_changed_at < $1
               AND (x.status IN ${ENDED} OR x.review_status = 'rejected')
               AND x.next_attempt_at IS NULL
               AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.transaction_id = x.id AND ${STILL_LOOKED_UP})
               AND NOT EXISTS (SELECT 1 FROM refunds r WHERE r.transaction_id = x.id AND r.status = 'Processing')
             ORDER BY x.status_changed_at LIMIT $2 FOR UPDATE OF x SKIP LOCKED)
         RETURNING t.id),
       views AS (
         -- The attempts' copies of the payment method (chargedPaymentMethodFields), as the reads show them.
         UPDATE attempts a SET payment_method_view = ${erasedCard('a.payment_method_view', ATTEMPT_CARD)}
          WHERE a.transaction_id IN (SELECT id FROM erased)
            AND ${holdsCard('a.payment_method_view', ATTEMPT_CARD)}),
       pushes AS (
         -- Its push messages, whatever their status (a dead one is replayed with its stored body):
         -- the Transaction they carry (transaction_id: webhook_messages_transaction), as the reads show it.
         UPDATE webhook_messages w SET body = ${erasedCard('w.body', PUSH_CARD)}
          WHERE w.transaction_id IN (SELECT id FROM erased)
            AND ${holdsCard('w.body', PUSH_CARD)})
       SELECT count(*)::int AS n FROM erased`,
      [before, batch, watchedSince],
    );
    return rows[0]?.n ?? 0;
  }

  /**
   * Card data of a customer's payment methods last seen before `before`, once no transaction of
   * that customer (account) still holds card data: none can fall back to them any more. One ended
   * before `before` (closed, blocked for good) goes whatever the customer's other transactions do:
   * nothing charges an ended payment method. A new
   * submission with the payment method stores its card data again.
   */
  static async paymentMethodCardData(db: Sql, before: Date, batch: number): Promise<number> {
    return count(
      await db.query(
        `UPDATE payment_methods p SET card_enc = NULL, card_key_id = NULL, cryptogram_enc = NULL,
                cryptogram_key_id = NULL, account_update_jwe = NULL, account_hash = NULL, card_erased_at = now()
          WHERE p.id IN (
            SELECT x.id FROM payment_methods x
             WHERE ${PAYMENT_METHODS_CARD_HELD}
               AND x.last_seen_at < $1
               AND ((x.ended_at IS NOT NULL AND x.ended_at < $1)
                    OR NOT EXISTS (SELECT 1 FROM transactions t
                                    WHERE t.merchant_id = x.merchant_id AND t.account_id = x.account_id
                                      AND t.status NOT IN ${ENDED} AND t.review_status <> 'rejected'))
             ORDER BY x.last_seen_at LIMIT $2 FOR UPDATE OF x SKIP LOCKED)`,
        [before, batch],
      ),
    );
  }
}
