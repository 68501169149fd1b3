import { Injectable, Logger } from '@nestjs/common';
import { ProcessorNotificationsRepository, type ProcessorNotificationRow } from '@retain/db';
import { EventName } from '@retain/domain';
import { adyenRefusalCodes, type ChargeResult } from '@retain/processor';
import {
  AttemptState,
  announceTransaction,
  applyRefundAnswer,
  reverseCompletedRefund,
  settleRefundedTransaction,
} from '@retain/recovery';
import { NotYet, RetainMetrics } from '@retain/platform';
import { DataSource, type EntityManager } from 'typeorm';
import { AttemptService, type LateRefund } from '../attempts/attempt.service';

/**
 * The attempt's charge is still being recorded (state pending): the job waits (put back without using
 * an attempt) until the attempt is recorded or the sweep makes it unknown, however long that takes.
 */
export class AttemptInFlightError extends NotYet {}

interface Acted {
  outcome: string;
  outbox: string[];
  lateRefund: LateRefund | null;
}

const REFUND_EVENTS = ['REFUND', 'REFUND_FAILED', 'REFUNDED_REVERSED'];

/**
 * Acts on a stored processor notification (Adyen standard webhooks, stored and verified by intake-api),
 * once: the notification row is locked and marked processed in the database transaction that acts on
 * it, so a second delivery (a second row is never stored) or a second run of the job changes nothing.
 * - AUTHORISATION (merchantReference = the attempt's vid): an unknown attempt is recorded approved
 *   (pspReference as the processor's id) or declined (the reason) through AttemptService.record, the
 *   path the reconciliation records a lookup with; an attempt settled as not charged whose charge
 *   Adyen now reports authorised is a late capture (recorded and refunded by that same path).
 * - REFUND (merchantReference = the refund's vid, pspReference = the processor's refund id): a
 *   Processing refund becomes Completed (success) or Failed, the transaction settled and the push
 *   announced as the refund batcher does; REFUND_FAILED / REFUNDED_REVERSED (or REFUND success=false)
 *   after a completion turn the refund Failed with an error log and a `refund failed` push.
 * A reference Retain does not know is logged and left.
 */
@Injectable()
export class ProcessorNotificationService {
  private readonly logger = new Logger(ProcessorNotificationService.name);

  constructor(
    private readonly db: DataSource,
    private readonly attempts: AttemptService,
    private readonly metrics: RetainMetrics,
  ) {}

  async handle(notificationId: string): Promise<string> {
    const acted = await this.db.transaction(async (m): Promise<Acted | null> => {
      const n = await ProcessorNotificationsRepository.lock(m, notificationId);
      if (!n || n.processed_at) return null;
      const done = await this.act(m, n);
      await ProcessorNotificationsRepository.markProcessed(m, n.id, done.outcome);
      return done;
    });
    if (!acted) return 'already processed';
    await this.attempts.publish(acted.outbox);
    if (acted.lateRefund) await this.attempts.sendLateRefund(acted.lateRefund);
    return acted.outcome;
  }

  private async act(m: EntityManager, n: ProcessorNotificationRow): Promise<Acted> {
    if (n.event_code === 'AUTHORISATION') return this.authorisation(m, n);
    if (REFUND_EVENTS.includes(n.event_code)) return this.refund(m, n);
    if (n.event_code === 'CAPTURE_FAILED' && n.success) return this.captureFailed(m, n);
    return { outcome: `ignored: ${n.event_code}`, outbox: [], lateRefund: null };
  }

  private async authorisation(m: EntityManager, n: ProcessorNotificationRow): Promise<Acted> {
    const none = (outcome: string): Acted => ({ outcome, outbox: [], lateRefund: null });
    const attempt = n.merchant_reference
      ? await ProcessorNotificationsRepository.attemptOf(m, n.merchant_id, n.merchant_reference)
      : null;
    if (!attempt) {
      this.logger.warn(
        { event: n.event_code, psp: n.psp_reference, notification: n.id },
        'processor notification for an unknown payment reference: ignored',
      );
      return none('ignored: unknown reference');
    }
    if (attempt.state === AttemptState.Pending) {
      // The charge's own answer (Received, Pending) is not recorded yet: try again once it is.
      throw new AttemptInFlightError(`attempt ${attempt.vid} is still in flight`);
    }
    const result: ChargeResult = n.success
      ? {
          outcome: 'approved',
          responseCode: '00',
          processorTransactionId: n.psp_reference,
          message: 'Authorised (Adyen notification)',
        }
      : {
          outcome: 'declined',
          // The raw network code and the Mastercard advice where the account passes them on
          // (additionalData), else Adyen's refusal reason mapped; 05 otherwise.
          ...adyenRefusalCodes(
            {
              refusalReason: n.reason,
              refusalReasonRaw: n.refusal_reason_raw,
              merchantAdviceCode: n.merchant_advice_code,
              brand: n.payment_method,
            },
            '05',
          ),
          processorTransactionId: n.psp_reference,
          message: `Refused (Adyen notification)${n.reason ? `: ${n.reason}` : ''}`,
        };
    if (attempt.state === AttemptState.Unknown || (attempt.state === AttemptState.Error && n.success)) {
      const recorded = await this.attempts.record(m, attempt.id, result, attempt.state);
      this.logger.log(
        { attempt: attempt.vid, success: n.success, notification: n.id },
        attempt.state === AttemptState.Unknown
          ? 'unknown attempt resolved by the processor notification'
          : 'processor notification of a capture for an attempt settled as not charged',
      );
      return { outcome: `attempt ${result.outcome}`, ...recorded };
    }
    const agrees =
      (attempt.state === AttemptState.Captured && n.success) || (attempt.state !== AttemptState.Captured && !n.success);
    if (!agrees) {
      // Recorded captured, reported refused: the money was not collected, as after a CAPTURE_FAILED
      // (the same operator alert). Reported authorised after a recorded decline: logged to check.
      if (attempt.state === AttemptState.Captured) this.metrics.captureFailures.inc();
      this.logger.error(
        { attempt: attempt.vid, state: attempt.state, success: n.success, notification: n.id },
        'processor notification disagrees with the recorded attempt: check it with the processor',
      );
    }
    return none(`attempt already ${attempt.state}`);
  }

  /**
   * The card scheme rejected the capture of an authorised charge (Adyen CAPTURE_FAILED, e.g. the shopper
   * cancelled the recurring payment through their bank): the money recorded as captured was not
   * collected. Nothing in the contract says what the transaction becomes, and Retain captures at once
   * (captureDelayHours 0), so this is rare: the operator alert (retain_capture_failures_total, one error
   * log naming the attempt) asks for it to be settled with Adyen and the merchant; the records stand.
   */
  private async captureFailed(m: EntityManager, n: ProcessorNotificationRow): Promise<Acted> {
    const attempt = n.merchant_reference
      ? await ProcessorNotificationsRepository.attemptOf(m, n.merchant_id, n.merchant_reference)
      : null;
    this.metrics.captureFailures.inc();
    this.logger.error(
      {
        attempt: attempt?.vid ?? null,
        state: attempt?.state ?? null,
        merchant: n.merchant_id,
        psp: n.original_reference ?? n.psp_reference,
        notification: n.id,
      },
      'Adyen CAPTURE_FAILED: the card scheme rejected the capture of this charge, its money was not collected: settle it with Adyen and the merchant',
    );
    return { outcome: 'capture failed: operator alerted', outbox: [], lateRefund: null };
  }

  private async refund(m: EntityManager, n: ProcessorNotificationRow): Promise<Acted> {
    const none = (outcome: string): Acted => ({ outcome, outbox: [], lateRefund: null });
    const found = await ProcessorNotificationsRepository.refundOf(
      m,
      n.merchant_id,
      n.merchant_reference,
      n.psp_reference,
    );
    if (!found) {
      this.logger.warn(
        { event: n.event_code, psp: n.psp_reference, notification: n.id },
        'processor notification for an unknown refund: ignored',
      );
      return none('ignored: unknown reference');
    }
    const failed = n.event_code !== 'REFUND' || !n.success;
    const reason = `${n.event_code}${n.reason ? `: ${n.reason}` : ''}`;
    if (found.status === 'Processing') {
      const applied = await applyRefundAnswer(m, found.id, {
        outcome: failed ? 'failed' : 'completed',
        processorRefundId: n.psp_reference,
        message: failed ? `Refund failed at the processor (${reason})` : 'Refunded',
      });
      if (!applied) return none('refund already settled');
      if (failed) this.logger.error({ refund: found.vid, event: n.event_code }, 'the processor refused a refund');
      return { outcome: failed ? 'refund failed' : 'refund completed', outbox: applied.outbox, lateRefund: null };
    }
    if (found.status === 'Completed' && failed) {
      const reversed = await reverseCompletedRefund(m, found.id, `Refund failed at the processor (${reason})`);
      if (!reversed) return none('refund already settled');
      await settleRefundedTransaction(m, reversed.txn, reversed.refund);
      this.logger.error(
        { refund: found.vid, event: n.event_code, notification: n.id },
        'a refund recorded completed failed at the processor: the money was not returned',
      );
      const outbox = await announceTransaction(m, reversed.txn, EventName.RefundFailed, reversed.now);
      return { outcome: 'completed refund failed', outbox, lateRefund: null };
    }
    return none(`refund already ${found.status}`);
  }
}
