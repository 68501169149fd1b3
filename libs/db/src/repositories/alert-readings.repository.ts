import type { DataSource, EntityManager } from 'typeorm';

type Sql = Pick<EntityManager, 'query'> | Pick<DataSource, 'query'>;

/**
 * What the alert gauges read from Postgres on each scrape (libs/platform RetainMetrics): small reads on
 * partial indexes (outbox_open, refunds_processing), spanning every merchant on purpose.
 */
export class AlertReadingsRepository {
  /** Seconds since the oldest open outbox row was committed without reaching Redis (0 when none). */
  static async oldestUnpublishedOutboxSeconds(db: Sql): Promise<number> {
    const [{ s }]: { s: number }[] = await db.query(
      `SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 AS s FROM outbox
        WHERE completed_at IS NULL AND failed_at IS NULL AND published_at IS NULL`,
    );
    return Math.max(0, s);
  }

  /**
   * Seconds since the oldest refund still Processing without the processor holding it was requested:
   * never sent, or sent and unanswered (deferred to the next batch). 0 when none. A refund the processor
   * accepted without a result (its id kept) awaits a notification instead: countOverdueAwaitingNotification.
   */
  static oldestUnsentRefundSeconds(db: Sql): Promise<number> {
    return AlertReadingsRepository.oldestProcessingRefundSeconds(db, false);
  }

  /**
   * Seconds since the oldest refund the processor holds without a final answer was requested: accepted
   * (its id kept) and still Processing, as a Stripe refund stays `pending` (the batch reads it again each
   * day) or an Adyen one awaits its notification. 0 when none.
   */
  static oldestHeldRefundSeconds(db: Sql): Promise<number> {
    return AlertReadingsRepository.oldestProcessingRefundSeconds(db, true);
  }

  /** Seconds since the oldest refund still Processing that the processor holds (or does not) was requested. */
  private static async oldestProcessingRefundSeconds(db: Sql, held: boolean): Promise<number> {
    const [{ s }]: { s: number }[] = await db.query(
      `SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 AS s FROM refunds
        WHERE status = 'Processing' AND kind = 'refund' AND (processor_refund_id IS NOT NULL) = $1`,
      [held],
    );
    return Math.max(0, s);
  }
}
