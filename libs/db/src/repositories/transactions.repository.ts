import type { DataSource, EntityManager } from 'typeorm';
import { AttemptEntity, RefundEntity, TransactionEntity } from '../entities';
import { attemptView, transactionView, type TransactionView } from './transaction-view';

export interface TransactionListFilters {
  limit: number;
  startingAfter?: string;
  endingBefore?: string;
  statuses?: string[];
  subscriptionId?: string;
  accountId?: string;
  submittedSince?: Date;
  submittedUntil?: Date;
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
 * Reads of submitted transactions and their attempts. Every method takes the merchant id: a
 * row of another merchant is indistinguishable from a missing one.
 */
export class TransactionsRepository {
  constructor(private readonly db: DataSource | EntityManager) {}

  findByMerchantTxnId(merchantId: string, merchantTxnId: string): Promise<TransactionEntity | null> {
    return this.db.getRepository(TransactionEntity).findOne({ where: { merchantId, merchantTxnId } });
  }

  async refundsOf(merchantId: string, transactionIds: string[]): Promise<Map<string, RefundEntity[]>> {
    const map = new Map<string, RefundEntity[]>();
    if (transactionIds.length === 0) return map;
    const rows = await this.db
      .getRepository(RefundEntity)
      .createQueryBuilder('r')
      .where('r.merchant_id = :merchantId AND r.transaction_id = ANY(:ids)', { merchantId, ids: transactionIds })
      .orderBy('r.requested_at', 'ASC')
      .addOrderBy('r.vid', 'ASC')
      .getMany();
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

  async view(merchantId: string, t: TransactionEntity): Promise<TransactionView> {
    const refunds = await this.refundsOf(merchantId, [t.id]);
    return transactionView(t, refunds.get(t.id) ?? []);
  }

  /**
   * GET /retain/transactions/{id}: a merchant transaction id or a retain_transaction_id.
   * With related: the submitted transaction then every finished attempt. Null when unknown.
   */
  async fetch(merchantId: string, id: string, related: boolean): Promise<TransactionView[] | null> {
    const t = await this.findByMerchantTxnId(merchantId, id);
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
    const parent = await this.db.getRepository(TransactionEntity).findOneOrFail({
      where: { merchantId, id: attempt.transactionId },
    });
    if (!related) return [attemptView(parent, attempt)];
    const attempts = await this.attemptsOf(merchantId, parent.id);
    return [await this.view(merchantId, parent), ...attempts.map((a) => attemptView(parent, a))];
  }

  /** Cursor paging, newest submitted_ts first, ties by vid (decisions §5). */
  async list(merchantId: string, f: TransactionListFilters): Promise<TransactionPage> {
    const backwards = f.endingBefore !== undefined;
    const qb = this.db
      .getRepository(TransactionEntity)
      .createQueryBuilder('t')
      .where('t.merchant_id = :merchantId', { merchantId });
    if (f.statuses?.length) qb.andWhere('t.status = ANY(:statuses)', { statuses: f.statuses });
    if (f.subscriptionId !== undefined) qb.andWhere('t.subscription_id = :sid', { sid: f.subscriptionId });
    if (f.accountId !== undefined) qb.andWhere('t.account_id = :aid', { aid: f.accountId });
    if (f.submittedSince) qb.andWhere('t.submitted_ts >= :ss', { ss: f.submittedSince });
    if (f.submittedUntil) qb.andWhere('t.submitted_ts <= :su', { su: f.submittedUntil });
    if (f.updatedSince) qb.andWhere('t.status_changed_at >= :us', { us: f.updatedSince });
    const cursorId = f.startingAfter ?? f.endingBefore;
    if (cursorId !== undefined) {
      const cursor = await this.findByMerchantTxnId(merchantId, cursorId);
      if (!cursor) return { data: [], hasMore: false, backwards, unknownCursor: true };
      qb.andWhere(backwards ? '(t.submitted_ts, t.vid) > (:cts, :cvid)' : '(t.submitted_ts, t.vid) < (:cts, :cvid)', {
        cts: cursor.submittedTs,
        cvid: cursor.vid,
      });
    }
    const dir = backwards ? 'ASC' : 'DESC';
    qb.orderBy('t.submitted_ts', dir)
      .addOrderBy('t.vid', dir)
      .take(f.limit + 1);
    const rows = await qb.getMany();
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
