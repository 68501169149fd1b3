import { In, type DataSource, type EntityManager } from 'typeorm';
import { RefundEntity, TransactionEntity } from '../entities';
import { CAPTURING_ACCOUNT_SQL, REFUNDED_CAPTURE_SQL } from './settlement.repository';
import { ProcessorAccountsRepository } from './processor-accounts.repository';
import { refundView } from './transaction-view';

export interface RefundListFilters {
  limit: number;
  startingAfter?: string;
  endingBefore?: string;
  since?: Date;
  /** Refund timestamp at or before (a date-time bound). */
  until?: Date;
  /** Refund timestamp strictly before (a date-only bound: the next day's midnight). */
  before?: Date;
}

/** A completed refund due to be read again at its processor (RefundsRepository.dueForRecheck). */
export interface RecheckRow {
  id: string;
  vid: string;
  processor_refund_id: string | null;
  recheck_until: Date | null;
  merchant_id: string;
  division_number: string | null;
  processor_transaction_id: string | null;
  captured_by: { id: string | null } | null;
}

/** Processing with the processor's id (Adyen `received`), sent more than $1 ms ago: its notification is overdue. */
const OVERDUE_AWAITING_NOTIFICATION = `status = 'Processing' AND kind = 'refund' AND processor_refund_id IS NOT NULL
  AND sent_at < now() - ($1::double precision * interval '1 millisecond')`;

/** Reads of refunds, always scoped to the merchant. A Refund's `id` is its transaction's merchant id. */
export class RefundsRepository {
  constructor(private readonly db: DataSource) {}

  /**
   * The refund batch's safety net (all merchants): transactions with a stop refund still open and
   * no attempt in one of `unresolvedStates` (pending or unknown: it may still have charged).
   */
  static async openStopsWithoutUnresolvedAttempts(
    db: Pick<DataSource, 'query'>,
    unresolvedStates: readonly string[],
  ): Promise<string[]> {
    const rows: { transaction_id: string }[] = await db.query(
      `SELECT DISTINCT r.transaction_id FROM refunds r JOIN transactions t ON t.id = r.transaction_id
        WHERE r.kind = 'stop' AND r.status = 'Processing'
          AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.transaction_id = t.id AND a.state = ANY($1::text[]))`,
      [unresolvedStates],
    );
    return rows.map((r) => r.transaction_id);
  }

  /** GET /retain/refunds/{id}: the refunds of one transaction; null when the transaction is unknown. */
  async ofTransaction(merchantId: string, merchantTxnId: string): Promise<Record<string, unknown>[] | null> {
    const t = await this.db.getRepository(TransactionEntity).findOne({ where: { merchantId, merchantTxnId } });
    if (!t) return null;
    const rows = await this.db
      .getRepository(RefundEntity)
      .find({ where: { merchantId, transactionId: t.id }, order: { requestedAt: 'ASC', vid: 'ASC' } });
    return rows.map((r) => refundView(r, t.merchantTxnId));
  }

  /** GET /retain/refunds: newest refund `timestamp` first, cursor = refund vid. */
  async list(
    merchantId: string,
    f: RefundListFilters,
  ): Promise<{ data: Record<string, unknown>[]; hasMore: boolean; backwards: boolean; unknownCursor?: boolean }> {
    const backwards = f.endingBefore !== undefined;
    const qb = this.db
      .getRepository(RefundEntity)
      .createQueryBuilder('r')
      .innerJoinAndMapOne('r.txn', TransactionEntity, 't', 't.id = r.transaction_id')
      .where('r.merchant_id = :merchantId', { merchantId });
    if (f.since) qb.andWhere('r.timestamp >= :since', { since: f.since });
    if (f.until) qb.andWhere('r.timestamp <= :until', { until: f.until });
    if (f.before) qb.andWhere('r.timestamp < :before', { before: f.before });
    const cursorVid = f.startingAfter ?? f.endingBefore;
    if (cursorVid !== undefined) {
      const cursor = await this.db.getRepository(RefundEntity).findOne({ where: { merchantId, vid: cursorVid } });
      if (!cursor) return { data: [], hasMore: false, backwards, unknownCursor: true };
      qb.andWhere(backwards ? '(r.timestamp, r.vid) > (:ct, :cv)' : '(r.timestamp, r.vid) < (:ct, :cv)', {
        ct: cursor.timestamp,
        cv: cursor.vid,
      });
    }
    const dir = backwards ? 'ASC' : 'DESC';
    qb.orderBy('r.timestamp', dir)
      .addOrderBy('r.vid', dir)
      .limit(f.limit + 1);
    const rows = (await qb.getMany()) as (RefundEntity & { txn: TransactionEntity })[];
    const hasMore = rows.length > f.limit;
    const page = rows.slice(0, f.limit);
    if (backwards) page.reverse();
    return { data: page.map((r) => refundView(r, r.txn.merchantTxnId)), hasMore, backwards };
  }

  // ---- refund requests (POST /retain/refunds), inside the caller's transaction ----

  /**
   * Locks the merchant's transactions with these ids in merchant_txn_id order (the review's order
   * too, so two calls touching the same transactions cannot deadlock). FOR NO KEY UPDATE: the key
   * never changes here, so inserts that reference the row (attempts, refunds) are not blocked.
   */
  lockTransactions(m: EntityManager, merchantId: string, merchantTxnIds: string[]): Promise<TransactionEntity[]> {
    return m.getRepository(TransactionEntity).find({
      where: { merchantId, merchantTxnId: In(merchantTxnIds) },
      order: { merchantTxnId: 'ASC' },
      lock: { mode: 'for_no_key_update' },
    });
  }

  /** Writes a transaction the caller holds locked (one UPDATE of its changed columns). */
  async saveTransaction(m: EntityManager, txn: TransactionEntity): Promise<void> {
    await m.save(txn);
  }

  /**
   * What can still be refunded of a transaction, in minor units: captured minus refunds not Failed
   * and, when the attempt that made the transaction's capture is known (its processor_transaction_id),
   * at most that charge's amount (a partial authorization's part) minus the refunds sent on it (the
   * merchant's, and a late capture's own refund when that capture is the transaction's). A second
   * capture (an attempt the processor finished late, refunded at once on its own charge) adds to
   * `captured` but is never the merchant's to refund: if its refund failed, it is not refunded again
   * through the transaction's charge, which holds only the first capture.
   */
  static async refundableMinor(
    m: EntityManager,
    txn: { id: string; merchantId: string; capturedAmountMinor: string | null; processorTransactionId: string | null },
  ): Promise<bigint> {
    const [row]: { all_refunded: string; kept: string | null; kept_refunded: string }[] = await m.query(
      `WITH kept AS (
         SELECT a.id, coalesce(a.partial_amount_minor, a.amount_minor) AS amount FROM attempts a
          WHERE a.transaction_id = $1 AND a.state = 'captured' AND a.processor_transaction_id = $3
          ORDER BY a.processed_at NULLS LAST LIMIT 1
       )
       SELECT COALESCE(sum(r.amount_minor), 0)::text AS all_refunded,
              (SELECT amount FROM kept)::text AS kept,
              COALESCE(sum(r.amount_minor) FILTER (
                WHERE r.attempt_id IS NULL OR r.attempt_id = (SELECT id FROM kept)), 0)::text AS kept_refunded
         FROM refunds r
        WHERE r.transaction_id = $1 AND r.merchant_id = $2 AND r.kind = 'refund' AND r.status <> 'Failed'`,
      [txn.id, txn.merchantId, txn.processorTransactionId],
    );
    const all = BigInt(txn.capturedAmountMinor ?? '0') - BigInt(row!.all_refunded);
    if (row!.kept === null) return all;
    const onKept = BigInt(row!.kept) - BigInt(row!.kept_refunded);
    return onKept < all ? onKept : all;
  }

  /**
   * The processor (`processor_accounts.processor`) of the account that made the transaction's capture;
   * null when the app's own PROCESSOR made it or no attempt did.
   */
  static async capturingProcessor(m: Pick<EntityManager, 'query'>, txn: { id: string }): Promise<string | null> {
    // The account settlement checks and refunds go to (CAPTURING_ACCOUNT_SQL), by its processor.
    const [row]: { processor: string }[] = await m.query(
      `SELECT p.processor FROM transactions t
         JOIN processor_accounts p ON p.id = ((${CAPTURING_ACCOUNT_SQL})->>'id')::uuid
        WHERE t.id = $1`,
      [txn.id],
    );
    return row?.processor ?? null;
  }

  /**
   * The processors a transaction still in retry may be captured through: its attempts' accounts (one in
   * flight may capture) and the account its next charges go through (the division's, else the default;
   * none: the app's processor). A stop's amount becomes a refund of such a capture.
   */
  static async chargingProcessors(
    m: Pick<EntityManager, 'query'>,
    txn: { id: string; merchantId: string; divisionNumber: string | null },
  ): Promise<string[]> {
    // The next charges' account as the attempts' prepare picks it (decisions §13).
    const current = await ProcessorAccountsRepository.currentIds(m, [txn]);
    const rows: { processor: string }[] = await m.query(
      `SELECT DISTINCT p.processor FROM processor_accounts p
        WHERE p.id = ANY($2::uuid[])
           OR p.id IN (SELECT a.processor_account_id FROM attempts a WHERE a.transaction_id = $1)`,
      [txn.id, [...current.values()]],
    );
    return rows.map((r) => r.processor);
  }

  /**
   * Completed refunds the processor may still fail whose next read is due (recheck_after, set by
   * recordRefundAnswer), oldest due first, with the capture they refund and the account that made it.
   * Watches left on refunds no longer Completed (reversed by a notification) are dropped first.
   * `skip`: refunds this batch has read already (an unanswered read is due again a minute later; read
   * again in the same batch, a processor that hangs would keep the batch from ever ending).
   */
  static async dueForRecheck(
    m: Pick<EntityManager, 'query'>,
    limit: number,
    skip: readonly string[] = [],
  ): Promise<RecheckRow[]> {
    await m.query(
      `UPDATE refunds SET recheck_after = NULL, recheck_until = NULL
        WHERE recheck_after IS NOT NULL AND status <> 'Completed'`,
    );
    return m.query(
      `SELECT r.id, r.vid, r.processor_refund_id, r.recheck_until, t.merchant_id, t.division_number,
              ${REFUNDED_CAPTURE_SQL}
         FROM refunds r JOIN transactions t ON t.id = r.transaction_id
         LEFT JOIN attempts ra ON ra.id = r.attempt_id
        WHERE r.recheck_after IS NOT NULL AND r.recheck_after <= now() AND r.status = 'Completed'
          AND NOT (r.id = ANY($2::uuid[]))
        ORDER BY r.recheck_after LIMIT $1`,
      [limit, skip],
    );
  }

  /**
   * Starts watching a completed refund the processor may still fail: first read again `afterMs` from
   * now, the last within `windowMs` (RefundBatchService.recheckCompleted; setRecheck moves it on).
   */
  static async watchForRecheck(
    m: Pick<EntityManager, 'query'>,
    refundId: string,
    afterMs: number,
    windowMs: number,
  ): Promise<void> {
    await m.query(
      `UPDATE refunds SET recheck_after = now() + ($2::double precision * interval '1 millisecond'),
              recheck_until = now() + ($3::double precision * interval '1 millisecond')
        WHERE id = $1`,
      [refundId, afterMs, windowMs],
    );
  }

  /** The next read of a watched refund (`next` null, or past its recheck_until: no more reads). */
  static async setRecheck(m: Pick<EntityManager, 'query'>, refundId: string, next: Date | null): Promise<void> {
    await m.query(
      `UPDATE refunds SET recheck_after = CASE WHEN $2::timestamptz < recheck_until THEN $2::timestamptz END,
              recheck_until = CASE WHEN $2::timestamptz < recheck_until THEN recheck_until END
        WHERE id = $1`,
      [refundId, next],
    );
  }

  /**
   * Whether a refund the batch could have sent at `at` has still never been sent: Processing, never
   * claimed (sent_at), not awaiting the processor, unchanged since before `at` (a stop that became a
   * refund later was changed then). A batch run at `at` sends every such refund, so one left means that
   * run never happened (RefundBatchProcessor makes it up).
   */
  static async unsentSince(m: Pick<EntityManager, 'query'>, at: Date): Promise<boolean> {
    const rows: unknown[] = await m.query(
      `SELECT 1 FROM refunds
        WHERE status = 'Processing' AND kind = 'refund' AND sent_at IS NULL AND processor_refund_id IS NULL
          AND updated_at < $1
        LIMIT 1`,
      [at],
    );
    return rows.length > 0;
  }

  /**
   * Refunds the processor accepted without a result (Processing with the processor's id: Adyen
   * `received`) whose notification has not come `olderThanMs` after they were sent: how many (the
   * operator alert's gauge), and those not alerted yet, marked alerted now (one error log each).
   */
  static async overdueAwaitingNotification(
    m: Pick<EntityManager, 'query'>,
    olderThanMs: number,
  ): Promise<{ count: number; newlyAlerted: { vid: string; merchant_id: string; sent_at: Date }[] }> {
    // TypeORM answers an UPDATE ... RETURNING with [rows, affected count].
    const [newlyAlerted]: [{ vid: string; merchant_id: string; sent_at: Date }[]] = await m.query(
      `UPDATE refunds SET alerted_at = now() WHERE ${OVERDUE_AWAITING_NOTIFICATION} AND alerted_at IS NULL
       RETURNING vid, merchant_id, sent_at`,
      [olderThanMs],
    );
    return { count: await RefundsRepository.countOverdueAwaitingNotification(m, olderThanMs), newlyAlerted };
  }

  /** How many refunds await their notification past `olderThanMs` (read-only: the gauge at each scrape). */
  static async countOverdueAwaitingNotification(m: Pick<EntityManager, 'query'>, olderThanMs: number): Promise<number> {
    const [{ n }]: { n: number }[] = await m.query(
      `SELECT count(*)::int AS n FROM refunds WHERE ${OVERDUE_AWAITING_NOTIFICATION}`,
      [olderThanMs],
    );
    return n;
  }

  async insert(
    m: EntityManager,
    refund: Pick<
      RefundEntity,
      | 'vid'
      | 'merchantId'
      | 'transactionId'
      | 'kind'
      | 'amountMinor'
      | 'currency'
      | 'status'
      | 'previousStatus'
      | 'requestedAt'
      | 'timestamp'
    >,
  ): Promise<void> {
    await m.getRepository(RefundEntity).insert(refund);
  }
}
