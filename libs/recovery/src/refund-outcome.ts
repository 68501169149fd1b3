import { RefundEntity, RefundsRepository, TransactionEntity } from '@retain/db';
import { EventName, RefundStatus, TransactionStatus } from '@retain/domain';
import type { EntityManager } from 'typeorm';
import { announceTransaction } from './transaction-events';

/** The processor's answer to a refund (the port's RefundResult, without depending on libs/processor). */
export interface RefundAnswer {
  outcome: 'completed' | 'failed';
  processorRefundId: string | null;
  message: string;
  /** Completed, but the processor may still fail it: watched for REFUND_RECHECK_WINDOW_MS (the port's). */
  mayStillFail?: boolean;
}

/**
 * How long a completed refund the processor may still fail (Stripe: `succeeded` then `failed`) is read
 * again by the refund batcher, and how often at most (real time, like the processor's own clock).
 * Stripe documents no bound on when a card refund may fail; 30 days covers a card issuer returning it
 * (an expired or closed card) with a daily batch: at most 30 reads per refund, then it is final here.
 */
export const REFUND_RECHECK_WINDOW_MS = 30 * 24 * 3_600_000;
export const REFUND_RECHECK_INTERVAL_MS = 12 * 3_600_000;

/**
 * A refund the processor accepted without a result yet (Adyen's `received` on an account whose
 * notifications Retain verifies): it stays Processing with the processor's id, and the refund batcher
 * no longer sends it (RefundsRepository: `processor_refund_id` set on a Processing refund = awaiting
 * the processor's notification). False when the refund is no longer Processing (its notification came
 * first, or another run recorded it).
 */
export async function recordRefundPending(
  m: EntityManager,
  refundId: string,
  processorRefundId: string,
): Promise<boolean> {
  const refund = await m
    .getRepository(RefundEntity)
    .findOne({ where: { id: refundId }, lock: { mode: 'pessimistic_write' } });
  if (!refund || refund.status !== RefundStatus.Processing) return false;
  if (refund.processorRefundId !== processorRefundId) {
    refund.processorRefundId = processorRefundId;
    await m.save(refund);
  }
  return true;
}

/**
 * A refund recorded Completed that the processor reports failed after all (Adyen REFUND_FAILED or
 * REFUNDED_REVERSED, or a REFUND success=false for a refund taken as completed on `received`): Failed,
 * with the message, under the refund's and its transaction's row locks. Null when it is not Completed.
 * The caller settles the transaction (settleRefundedTransaction) and announces `refund failed`.
 */
export async function reverseCompletedRefund(
  m: EntityManager,
  refundId: string,
  message: string,
): Promise<{ refund: RefundEntity; txn: TransactionEntity; now: Date } | null> {
  const refund = await m
    .getRepository(RefundEntity)
    .findOne({ where: { id: refundId }, lock: { mode: 'pessimistic_write' } });
  if (!refund || refund.status !== RefundStatus.Completed) return null;
  const txn = await m
    .getRepository(TransactionEntity)
    .findOneOrFail({ where: { id: refund.transactionId }, lock: { mode: 'pessimistic_write' } });
  const now = new Date();
  Object.assign(refund, { status: RefundStatus.Failed, timestamp: now, failureMessage: message });
  await m.save(refund);
  return { refund, txn, now };
}

/**
 * Writes a processor's answer on its refund row, under the refund's and then its transaction's row
 * locks: Completed or Failed, when, the processor's id and the failure message. Null when the refund
 * is no longer Processing (another run recorded it). applyRefundAnswer moves the transaction on and
 * announces.
 */
export async function recordRefundAnswer(
  m: EntityManager,
  refundId: string,
  answer: RefundAnswer,
): Promise<{ refund: RefundEntity; txn: TransactionEntity; completed: boolean; now: Date } | null> {
  const refund = await m
    .getRepository(RefundEntity)
    .findOne({ where: { id: refundId }, lock: { mode: 'pessimistic_write' } });
  if (!refund || refund.status !== RefundStatus.Processing) return null;
  const txn = await m
    .getRepository(TransactionEntity)
    .findOneOrFail({ where: { id: refund.transactionId }, lock: { mode: 'pessimistic_write' } });
  const now = new Date();
  const completed = answer.outcome === 'completed';
  Object.assign(refund, {
    status: completed ? RefundStatus.Completed : RefundStatus.Failed,
    timestamp: now,
    processorRefundId: answer.processorRefundId,
    failureMessage: completed ? null : answer.message,
  });
  await m.save(refund);
  if (completed && answer.mayStillFail && answer.processorRefundId) {
    // Read again by the refund batcher (RefundBatchService.recheckCompleted) until the window ends.
    await RefundsRepository.watchForRecheck(m, refund.id, REFUND_RECHECK_INTERVAL_MS, REFUND_RECHECK_WINDOW_MS);
  }
  return { refund, txn, completed, now };
}

/**
 * The status a new refund of `txn` returns the transaction to if it fails (decisions §8: "back to its
 * previous status"): the status before any refund request. A transaction already Refund Requested takes
 * the oldest Processing refund's (the one whose request moved it there), never Refund Requested itself:
 * settleRefundedTransaction restores it once nothing is in flight. Shared by the refunds API and the
 * retry worker's refund of a second capture.
 */
export async function statusBeforeRefunds(m: EntityManager, txn: TransactionEntity): Promise<string> {
  if (txn.status !== TransactionStatus.RefundRequested) return unrefunded(txn, txn.status);
  const first = await m.getRepository(RefundEntity).findOne({
    // A stop's own refund row holds the retry status it was requested in, never a status to return to.
    where: { transactionId: txn.id, kind: 'refund', status: RefundStatus.Processing },
    order: { requestedAt: 'ASC' },
  });
  return unrefunded(txn, first?.previousStatus ?? TransactionStatus.Captured);
}

/** Statuses that say money was refunded: never one to return to once nothing is (refunds reversed). */
const REFUNDED_STATUSES: readonly string[] = [
  TransactionStatus.PartiallyRefunded,
  TransactionStatus.Refunded,
  TransactionStatus.RefundRequested,
];

/**
 * The status to return to when nothing is refunded: `status`, unless it says money was refunded (a
 * refund requested while an earlier one had completed, both since reversed); then the captured status
 * itself, Settled once the capture settled, else Captured.
 */
function unrefunded(txn: TransactionEntity, status: string): string {
  if (!REFUNDED_STATUSES.includes(status)) return status;
  return txn.settledAt ? TransactionStatus.Settled : TransactionStatus.Captured;
}

/**
 * A transaction's status once a refund's answer is recorded (recordRefundAnswer): Refund Requested
 * while another refund is in flight, Refunded when completed refunds reach what was captured, Partially
 * Refunded below it, else the status before the refund (applyRefundAnswer, and a completed refund the
 * processor reverses).
 */
export async function settleRefundedTransaction(
  m: EntityManager,
  txn: TransactionEntity,
  refund: RefundEntity,
): Promise<void> {
  const [agg]: { completed: string; processing: number }[] = await m.query(
    `SELECT COALESCE(sum(amount_minor) FILTER (WHERE status = 'Completed'), 0)::text AS completed,
            count(*) FILTER (WHERE status = 'Processing')::int AS processing
       FROM refunds WHERE transaction_id = $1 AND kind = 'refund'`,
    [txn.id],
  );
  const captured = BigInt(txn.capturedAmountMinor ?? '0');
  const completed = BigInt(agg!.completed);
  let status: string;
  if (agg!.processing > 0) status = TransactionStatus.RefundRequested;
  else if (completed >= captured && captured > 0n) status = TransactionStatus.Refunded;
  else if (completed > 0n) status = TransactionStatus.PartiallyRefunded;
  else status = unrefunded(txn, refund.previousStatus ?? TransactionStatus.Captured);
  if (status !== txn.status) {
    Object.assign(txn, { status, statusChangedAt: new Date() });
    await m.save(txn);
  }
}

/**
 * A processor's answer to a refund, applied in the caller's database transaction: Completed or Failed
 * (recordRefundAnswer), the transaction settled (settleRefundedTransaction) and its `refund completed` /
 * `refund failed` push announced (outbox ids to publish after commit); or, accepted without a result
 * (`pending`), kept Processing for the processor's notification (recordRefundPending). Null when the
 * refund is no longer Processing. Shared by the refund batcher, the retry worker's refund of a late
 * capture and the processor notifications.
 */
export async function applyRefundAnswer(
  m: EntityManager,
  refundId: string,
  answer: RefundAnswer | { outcome: 'pending'; processorRefundId: string; message: string },
): Promise<{ outcome: 'completed' | 'failed' | 'awaiting'; txn: TransactionEntity | null; outbox: string[] } | null> {
  if (answer.outcome === 'pending') {
    return (await recordRefundPending(m, refundId, answer.processorRefundId))
      ? { outcome: 'awaiting', txn: null, outbox: [] }
      : null;
  }
  const recorded = await recordRefundAnswer(m, refundId, answer);
  if (!recorded) return null;
  const { refund, txn, completed, now } = recorded;
  await settleRefundedTransaction(m, txn, refund);
  const outbox = await announceTransaction(m, txn, completed ? EventName.RefundCompleted : EventName.RefundFailed, now);
  return { outcome: completed ? 'completed' : 'failed', txn, outbox };
}
