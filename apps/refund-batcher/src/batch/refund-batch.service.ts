import { Inject, Injectable, Logger, type OnModuleDestroy } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import { REFUNDED_CAPTURE_SQL, RefundsRepository, TransactionEntity } from '@retain/db';
import { InterruptedByShutdown, RETAIN_CONFIG, RetainMetrics } from '@retain/platform';
import {
  ProcessorUnavailableError,
  TRANSACTION_PROCESSORS,
  processorOfCapture,
  type RefundResult,
  type TransactionProcessors,
} from '@retain/processor';
import { EventName } from '@retain/domain';
import {
  REFUND_RECHECK_INTERVAL_MS,
  UNRESOLVED_ATTEMPT_STATES,
  announceTransaction,
  applyRefundAnswer,
  closeStopIfSettled,
  reverseCompletedRefund,
  settleRefundedTransaction,
  stopToRefund,
} from '@retain/recovery';
import { OutboxRelay } from '@retain/queues';
import { DataSource } from 'typeorm';

/** Refunds claimed per round trip; a batch loops until nothing is left. */
const CHUNK = 50;

export interface BatchSummary {
  sent: number;
  completed: number;
  failed: number;
  stopsClosed: number;
  /** Refunds the processor did not answer: left Processing, sent again with the same key next batch. */
  deferred: number;
  /**
   * Refunds the processor accepted without a result (Adyen `received`, account with hmac_key): left
   * Processing, never sent again; their notification settles them (retry worker).
   */
  awaiting: number;
  /**
   * Completed refunds read again at the processor (those that may still fail: Stripe's), and those
   * found failed after all: Failed, `refund failed` pushed, the transaction back to its status.
   */
  rechecked: number;
  failedLater: number;
}

interface Claimed {
  refundId: string;
  refundVid: string;
  amountMinor: string;
  currency: string;
  processorTransactionId: string;
  merchantId: string;
  divisionNumber: string | null;
  /** The attempt that made the capture: its processor account (id null: the app's processor). */
  capturedBy: { id: string | null } | null;
}

/**
 * The refund batch (decisions §8). Refunds are marked sent_at before the processor call and sent
 * with their vid as idempotency key, so a batch killed half-way resumes without refunding twice:
 * a refund already sent gets the processor's stored answer back. Each result is recorded under row
 * locks with its `refund completed` / `refund failed` push in the same database transaction.
 * Each refund goes to the processor account that made its capture (recorded on the attempt; the
 * merchant's accounts may have changed since), else its transaction's current one. A refund the
 * processor did not answer (ProcessorUnavailableError: timeout, 5xx, 429) stays Processing and is
 * sent again, with the same key, by the next batch.
 */
@Injectable()
export class RefundBatchService implements OnModuleDestroy {
  private readonly logger = new Logger(RefundBatchService.name);
  /**
   * Set by the first shutdown hook (before the workers close and wait for their jobs): a batch of
   * thousands of refunds would outlive the shutdown limit and the pod's grace period.
   */
  private stopping = false;

  constructor(
    private readonly db: DataSource,
    private readonly relay: OutboxRelay,
    private readonly metrics: RetainMetrics,
    @Inject(RETAIN_CONFIG) private readonly config: RetainConfig,
    @Inject(TRANSACTION_PROCESSORS) private readonly processors: TransactionProcessors,
  ) {}

  onModuleDestroy(): void {
    this.stopping = true;
  }

  /**
   * At shutdown, between two refunds: the one in flight is recorded, the rest of the batch is handed
   * back (the job runner puts the job back without using an attempt, and the next pod continues it).
   */
  private stopIfShuttingDown(summary: BatchSummary): void {
    if (!this.stopping) return;
    this.logger.log(summary, 'refund batch interrupted by shutdown: the rest continues on another pod');
    throw new InterruptedByShutdown('refund batch interrupted by shutdown');
  }

  async runBatch(): Promise<BatchSummary> {
    const summary: BatchSummary = {
      sent: 0,
      completed: 0,
      failed: 0,
      stopsClosed: 0,
      deferred: 0,
      awaiting: 0,
      rechecked: 0,
      failedLater: 0,
    };
    summary.stopsClosed = await this.settleStops();
    // Refunds left for the next batch: not claimed again by this one.
    const deferred: string[] = [];
    for (;;) {
      const claimed = await this.claim(deferred);
      if (claimed.length === 0) break;
      for (const c of claimed) {
        // Only where work is left: a batch with nothing to send ends as usual. The rest of the chunk,
        // marked sent_at but not sent, is claimed again a second later by the batch's continuation.
        this.stopIfShuttingDown(summary);
        let result: RefundResult;
        try {
          const processor = await processorOfCapture(this.processors, c.capturedBy, c.merchantId, c.divisionNumber);
          result = await processor.refund({
            idempotencyKey: c.refundVid,
            processorTransactionId: c.processorTransactionId,
            amountMinor: BigInt(c.amountMinor),
            currency: c.currency,
          });
        } catch (err) {
          // No answer (or no processor to ask: a broken account config): the refund may or may not be
          // made. Same key next batch, never a new one; the refunds after it are sent meanwhile (it is
          // the oldest, so a batch that stopped here would never send them).
          deferred.push(c.refundId);
          summary.deferred++;
          if (err instanceof ProcessorUnavailableError)
            this.logger.warn(
              { refund: c.refundVid, err: err.message },
              'processor did not answer a refund: retried next batch',
            );
          else
            this.logger.error(
              { refund: c.refundVid, err: (err as Error).message },
              'a refund could not be sent: retried next batch, operator action may be needed',
            );
          continue;
        }
        summary.sent++;
        if (this.config.testPauseAfterProcessorMs > 0) {
          await new Promise((resolve) => setTimeout(resolve, this.config.testPauseAfterProcessorMs));
        }
        const recorded = await this.record(c.refundId, result);
        if (recorded === 'completed') summary.completed++;
        if (recorded === 'failed') summary.failed++;
        if (recorded === 'awaiting') summary.awaiting++;
      }
    }
    await this.recheckCompleted(summary);
    if (
      summary.sent > 0 ||
      summary.stopsClosed > 0 ||
      summary.deferred > 0 ||
      summary.awaiting > 0 ||
      summary.rechecked > 0
    ) {
      this.logger.log(summary, 'refund batch done');
    }
    await this.watchAwaiting();
    return summary;
  }

  /**
   * Completed refunds the processor may still fail (its answer said `mayStillFail`: Stripe's card refunds
   * can move from `succeeded` to `failed`) are read again (`refundStatus`, Stripe `GET /v1/refunds/:id`)
   * at most every REFUND_RECHECK_INTERVAL_MS for REFUND_RECHECK_WINDOW_MS after they completed: one read
   * per due refund per batch, bounded. A refund now failed is recorded Failed, its transaction returns
   * to its status before the refund (or Partially Refunded) and `refund failed` is pushed, as an Adyen
   * REFUND_FAILED notification does; one not answered is read again next batch.
   */
  private async recheckCompleted(summary: BatchSummary): Promise<void> {
    // Read once per batch: an unanswered read is due again a minute on, and read again here it would
    // keep the batch from ever ending while a processor hangs (the next batch's refunds waiting behind it).
    const read: string[] = [];
    for (;;) {
      const due = await RefundsRepository.dueForRecheck(this.db, CHUNK, read);
      if (due.length === 0) return;
      for (const r of due) {
        this.stopIfShuttingDown(summary);
        read.push(r.id);
        const again = new Date(Date.now() + REFUND_RECHECK_INTERVAL_MS);
        let answer: RefundResult;
        try {
          const processor = await processorOfCapture(
            this.processors,
            r.captured_by,
            r.merchant_id,
            r.division_number || null,
          );
          if (!processor.refundStatus || !r.processor_refund_id) {
            await RefundsRepository.setRecheck(this.db, r.id, null);
            continue;
          }
          answer = await processor.refundStatus(r.processor_refund_id);
        } catch (err) {
          // Not answered: read again by the next batch (moved a minute on).
          this.logger.warn(
            { refund: r.vid, err: (err as Error).message },
            'a completed refund could not be read again',
          );
          await RefundsRepository.setRecheck(this.db, r.id, new Date(Date.now() + 60_000));
          continue;
        }
        summary.rechecked++;
        if (answer.outcome !== 'failed') {
          await RefundsRepository.setRecheck(this.db, r.id, again);
          continue;
        }
        const message = answer.message;
        const outbox = await this.db.transaction(async (m) => {
          const reversed = await reverseCompletedRefund(m, r.id, message);
          await RefundsRepository.setRecheck(m, r.id, null);
          if (!reversed) return null;
          await settleRefundedTransaction(m, reversed.txn, reversed.refund);
          return announceTransaction(m, reversed.txn, EventName.RefundFailed, reversed.now);
        });
        if (outbox === null) continue;
        summary.failedLater++;
        this.logger.error(
          { refund: r.vid, merchant: r.merchant_id, reason: message },
          'a refund recorded completed failed at the processor: the money was not returned',
        );
        await this.publish(outbox);
      }
    }
  }

  /**
   * The operator alert for refunds the processor accepted without a result (Adyen `received`) whose
   * notification has not come after REFUND_NOTIFICATION_ALERT_AFTER: nothing else would ever settle
   * them (Adyen has no refund lookup), so the money's state is unknown until an operator checks the
   * processor (gauge `retain_refunds_awaiting_notification`, one error log per refund).
   */
  private async watchAwaiting(): Promise<void> {
    const { count, newlyAlerted } = await RefundsRepository.overdueAwaitingNotification(
      this.db,
      this.config.refundNotificationAlertMs / this.config.retryTimeScale,
    );
    this.metrics.refundsAwaitingNotification.set(count);
    for (const r of newlyAlerted)
      this.logger.error(
        { refund: r.vid, merchant: r.merchant_id, sentAt: r.sent_at },
        "refund accepted by the processor without a result, and its notification has not come after REFUND_NOTIFICATION_ALERT_AFTER: it stays Processing, check it with the processor (its webhook configuration, the refund's pspReference)",
      );
  }

  /**
   * Safety net for stops whose in-flight attempt has ended (normally the retry worker settles them
   * when it records the attempt): money captured -> the stop becomes a refund of this batch; still
   * `Stop Requested` with no attempt pending or unknown -> closed `Stopped`, the refund Completed
   * with nothing charged. Any other state is left alone: a stop is never closed over a capture, nor
   * over an attempt whose outcome is unknown (the retry worker's reconciliation settles those).
   */
  private async settleStops(): Promise<number> {
    const ids = await RefundsRepository.openStopsWithoutUnresolvedAttempts(this.db, UNRESOLVED_ATTEMPT_STATES);
    let closed = 0;
    for (const transaction_id of ids) {
      const outbox = await this.db.transaction(async (m) => {
        const txn = await m
          .getRepository(TransactionEntity)
          .findOne({ where: { id: transaction_id }, lock: { mode: 'pessimistic_write' } });
        if (!txn) return [];
        // A stop with nothing left to refund ends Failed at once: its `refund failed` push.
        if (BigInt(txn.capturedAmountMinor ?? '0') > 0n) return stopToRefund(m, txn, new Date());
        const outbox = await closeStopIfSettled(m, txn);
        if (outbox === null) return [];
        closed++;
        return outbox;
      });
      await this.publish(outbox);
    }
    return closed;
  }

  private async claim(skip: string[]): Promise<Claimed[]> {
    return this.db.transaction(async (m) => {
      const rows: {
        id: string;
        vid: string;
        amount_minor: string;
        currency: string;
        processor_transaction_id: string | null;
        merchant_id: string;
        division_number: string | null;
        captured_by: { id: string | null } | null;
      }[] = await m.query(
        `SELECT r.id, r.vid, r.amount_minor, r.currency, t.merchant_id, t.division_number, ${REFUNDED_CAPTURE_SQL}
           FROM refunds r JOIN transactions t ON t.id = r.transaction_id
           LEFT JOIN attempts ra ON ra.id = r.attempt_id
          WHERE r.status = 'Processing' AND r.kind = 'refund'
            -- A Processing refund with the processor's id awaits the processor's notification: the
            -- processor has it, sending it again would only fetch the same answer.
            AND r.processor_refund_id IS NULL
            AND (r.sent_at IS NULL OR r.sent_at < now() - interval '1 second')
            AND NOT (r.id = ANY($2::uuid[]))
          ORDER BY r.created_at LIMIT $1 FOR UPDATE OF r SKIP LOCKED`,
        [CHUNK, skip],
      );
      if (rows.length === 0) return [];
      await m.query(`UPDATE refunds SET sent_at = COALESCE(sent_at, now()) WHERE id = ANY($1::uuid[])`, [
        rows.map((r) => r.id),
      ]);
      return rows.map((r) => ({
        refundId: r.id,
        refundVid: r.vid,
        amountMinor: r.amount_minor,
        currency: r.currency,
        processorTransactionId: r.processor_transaction_id ?? '',
        merchantId: r.merchant_id,
        divisionNumber: r.division_number || null,
        capturedBy: r.captured_by,
      }));
    });
  }

  private async record(
    refundId: string,
    result: RefundResult,
  ): Promise<'completed' | 'failed' | 'awaiting' | 'skipped'> {
    const applied = await this.db.transaction((m) => applyRefundAnswer(m, refundId, result));
    if (!applied) return 'skipped';
    await this.publish(applied.outbox);
    return applied.outcome;
  }

  private async publish(ids: string[]): Promise<void> {
    await this.relay.publish(ids).catch((err: unknown) => {
      this.logger.warn({ err: (err as Error).message }, 'outbox publish deferred to the sweeper');
    });
  }
}
