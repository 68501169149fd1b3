import type { DataSource, EntityManager } from 'typeorm';
import { AttemptEntity } from '../entities';
import {
  REFUND_VIEW_COLUMNS,
  TRANSACTION_VIEW_COLUMNS,
  attemptView,
  transactionView,
  type RefundViewRow,
  type TransactionView,
  type TransactionViewRow,
} from './transaction-view';

export interface TransactionListFilters {
  limit: number;
  startingAfter?: string;
  endingBefore?: string;
  statuses?: string[];
  subscriptionId?: string;
  accountId?: string;
  submittedSince?: Date;
  /** Submitted at or before (a date-time bound). */
  submittedUntil?: Date;
  /** Submitted strictly before (a date-only bound: the next day's midnight). */
  submittedBefore?: Date;
  updatedSince?: Date;
}

export interface TransactionPage {
  data: TransactionView[];
  /** True when more rows exist past the end of `data` in the paging direction. */
  hasMore: boolean;
  /** Whether the page was read backwards (ending_before). */
  backwards: boolean;
  /** The cursor named a transaction the merchant does not have. */
  unknownCursor?: boolean;
}

/**
 * Planner settings of the list's page query (issue 14), set for that one statement of its snapshot
 * transaction and reset after it: every list shape has an index that yields its page in order, so the
 * page never needs a sort of the merchant's rows, nor a bitmap or sequential scan of them. With
 * statistics never gathered (a new database, a table not analyzed since it grew) the planner believed
 * the merchant had a handful of rows and sorted a bitmap scan of all of them for the unfiltered list.
 * A sort stays possible (at a penalty) above the few rows a several-status list merges. Only around
 * the page query: the page's refunds and rows are small sorts and lookups that need none of this.
 * Exported for the plan test.
 */
export const LIST_PLAN_SETTINGS =
  'SET LOCAL enable_sort = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_seqscan = off';
const LIST_PLAN_RESET = 'RESET enable_sort; RESET enable_bitmapscan; RESET enable_seqscan';

/**
 * The rows of a page, by primary key alone: the page query chose these ids among the merchant's rows,
 * in the same snapshot. With `merchant_id = $1` here too, a planner without statistics walked the
 * merchant's list index for them (twice the page's Postgres time). Exported for the plan test.
 */
export const PAGE_ROWS_SQL = `SELECT ${TRANSACTION_VIEW_COLUMNS} FROM transactions t WHERE t.id = ANY($1::uuid[])`;

/**
 * Reads of submitted transactions and their attempts. Every method takes the merchant id: a
 * row of another merchant is indistinguishable from a missing one.
 */
export class TransactionsRepository {
  constructor(private readonly db: DataSource | EntityManager) {}

  /** A transaction as its views read it, by the merchant's id for it or by its own id. */
  private async viewRow(
    merchantId: string,
    by: 'merchant_txn_id' | 'id',
    value: string,
  ): Promise<TransactionViewRow | null> {
    const [row = null]: (TransactionViewRow | null)[] = await this.db.query(
      `SELECT ${TRANSACTION_VIEW_COLUMNS} FROM transactions t WHERE t.merchant_id = $1 AND t.${by} = $2`,
      [merchantId, value],
    );
    return row;
  }

  /** The refunds of these transactions as their views read them, oldest first, by transaction. */
  async refundsOf(merchantId: string, transactionIds: string[]): Promise<Map<string, RefundViewRow[]>> {
    const map = new Map<string, RefundViewRow[]>();
    if (transactionIds.length === 0) return map;
    const rows: (RefundViewRow & { transactionId: string })[] = await this.db.query(
      `SELECT ${REFUND_VIEW_COLUMNS} FROM refunds r
        WHERE r.merchant_id = $1 AND r.transaction_id = ANY($2::uuid[]) ORDER BY r.requested_at, r.vid`,
      [merchantId, transactionIds],
    );
    for (const r of rows) map.set(r.transactionId, [...(map.get(r.transactionId) ?? []), r]);
    return map;
  }

  /** Finished attempts of a transaction in retry_number order (in-flight ones have no result yet). */
  attemptsOf(merchantId: string, transactionId: string): Promise<AttemptEntity[]> {
    return this.db
      .getRepository(AttemptEntity)
      .createQueryBuilder('a')
      .where("a.merchant_id = :merchantId AND a.transaction_id = :transactionId AND a.state <> 'pending'", {
        merchantId,
        transactionId,
      })
      .orderBy('a.retry_number', 'ASC')
      .getMany();
  }

  async view(merchantId: string, t: TransactionViewRow): Promise<TransactionView> {
    const refunds = await this.refundsOf(merchantId, [t.id]);
    return transactionView(t, refunds.get(t.id) ?? []);
  }

  /**
   * GET /retain/transactions/{id}: a merchant transaction id or a retain_transaction_id.
   * With related: the submitted transaction then every finished attempt. Null when unknown.
   */
  async fetch(merchantId: string, id: string, related: boolean): Promise<TransactionView[] | null> {
    // The transaction, its refunds and its attempts from ONE snapshot: read one by one, an attempt
    // recorded between the reads showed `Captured` beside its transaction's state from before
    // (`Stop Requested` where the same commit had made it `Refund Requested`; seen in a CI run).
    if ('manager' in this.db)
      return this.db.transaction('REPEATABLE READ', (m) =>
        new TransactionsRepository(m).fetch(merchantId, id, related),
      );
    const t = await this.viewRow(merchantId, 'merchant_txn_id', id);
    if (t) {
      const first = await this.view(merchantId, t);
      if (!related) return [first];
      const attempts = await this.attemptsOf(merchantId, t.id);
      return [first, ...attempts.map((a) => attemptView(t, a))];
    }
    const attempt = await this.db.getRepository(AttemptEntity).findOne({
      where: { merchantId, retainTransactionId: id },
    });
    if (!attempt || attempt.state === 'pending') return null;
    const parent = await this.viewRow(merchantId, 'id', attempt.transactionId);
    if (!parent) throw new Error(`attempt ${attempt.id} without its transaction`);
    if (!related) return [attemptView(parent, attempt)];
    const attempts = await this.attemptsOf(merchantId, parent.id);
    return [await this.view(merchantId, parent), ...attempts.map((a) => attemptView(parent, a))];
  }

  /** Cursor paging, newest submitted_ts first, ties by vid (decisions §5). */
  async list(merchantId: string, f: TransactionListFilters): Promise<TransactionPage> {
    // The page's rows and their refunds from one snapshot (as `fetch`).
    if ('manager' in this.db)
      return this.db.transaction('REPEATABLE READ', (m) => new TransactionsRepository(m).list(merchantId, f));
    const backwards = f.endingBefore !== undefined;
    const cursorId = f.startingAfter ?? f.endingBefore;
    let cursor: { submittedTs: Date; vid: string } | null = null;
    if (cursorId !== undefined) {
      [cursor = null] = await this.db.query(
        `SELECT submitted_ts AS "submittedTs", vid FROM transactions WHERE merchant_id = $1 AND merchant_txn_id = $2`,
        [merchantId, cursorId],
      );
      if (!cursor) return { data: [], hasMore: false, backwards, unknownCursor: true };
    }
    const { sql, params } = listQuery(merchantId, f, cursor);
    // Here inside the snapshot transaction (list on a DataSource opens it): SET LOCAL holds until RESET.
    await this.db.query(LIST_PLAN_SETTINGS);
    const ids: { id: string }[] = await this.db.query(sql, params);
    await this.db.query(LIST_PLAN_RESET);
    const loaded: TransactionViewRow[] = ids.length ? await this.db.query(PAGE_ROWS_SQL, [ids.map((r) => r.id)]) : [];
    const byId = new Map(loaded.map((t) => [t.id, t]));
    const rows = ids.map((r) => byId.get(r.id)!).filter(Boolean);
    const hasMore = rows.length > f.limit;
    const page = rows.slice(0, f.limit);
    if (backwards) page.reverse();
    const refunds = await this.refundsOf(
      merchantId,
      page.map((r) => r.id),
    );
    return { data: page.map((t) => transactionView(t, refunds.get(t.id) ?? [])), hasMore, backwards };
  }
}

/**
 * The ids of one page of the list, in order, as one SQL statement whose plan does not depend on the
 * status mix (issue 14): without a status filter, the (merchant, submitted_ts, vid) index in order;
 * with one status, the (merchant, status, submitted_ts, vid) index in order; with several, one such
 * ordered, limited index range per status, merged (UNION ALL), so the newest rows of a rare status
 * are never searched for under millions of rows of another. Exported for the plan test.
 */
export function listQuery(
  merchantId: string,
  f: TransactionListFilters,
  cursor: { submittedTs: Date; vid: string } | null,
): { sql: string; params: unknown[] } {
  const backwards = f.endingBefore !== undefined;
  const dir = backwards ? 'ASC' : 'DESC';
  const params: unknown[] = [merchantId];
  const p = (v: unknown): string => {
    params.push(v);
    return `$${params.length}`;
  };
  const where: string[] = [];
  if (f.subscriptionId !== undefined) where.push(`subscription_id = ${p(f.subscriptionId)}`);
  if (f.accountId !== undefined) where.push(`account_id = ${p(f.accountId)}`);
  if (f.submittedSince) where.push(`submitted_ts >= ${p(f.submittedSince)}`);
  if (f.submittedUntil) where.push(`submitted_ts <= ${p(f.submittedUntil)}`);
  if (f.submittedBefore) where.push(`submitted_ts < ${p(f.submittedBefore)}`);
  if (f.updatedSince) where.push(`status_changed_at >= ${p(f.updatedSince)}`);
  if (cursor)
    where.push(
      `(submitted_ts, vid) ${backwards ? '>' : '<'} (${p(cursor.submittedTs)}::timestamptz, ${p(cursor.vid)}::varchar)`,
    );
  const limit = p(f.limit + 1);
  const rest = where.map((w) => ` AND ${w}`).join('');
  const order = `ORDER BY submitted_ts ${dir}, vid ${dir}`;
  const statuses = [...new Set(f.statuses ?? [])];
  if (statuses.length === 0)
    return { sql: `SELECT id FROM transactions WHERE merchant_id = $1${rest} ${order} LIMIT ${limit}`, params };
  const branch = (status: string): string =>
    `(SELECT id, submitted_ts, vid FROM transactions WHERE merchant_id = $1 AND status = ${p(status)}${rest} ${order} LIMIT ${limit})`;
  const branches = statuses.map(branch);
  if (branches.length === 1) return { sql: `SELECT id FROM ${branches[0]} AS b ${order}`, params };
  return { sql: `SELECT id FROM (${branches.join(' UNION ALL ')}) AS b ${order} LIMIT ${limit}`, params };
}
