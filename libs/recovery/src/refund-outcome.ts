import { RefundEntity, TransactionEntity } from '@retain/db';
import { RefundStatus } from '@retain/domain';
import type { EntityManager } from 'typeorm';

/** The processor's answer to a refund (the port's RefundResult, without depending on libs/processor). */
export interface RefundAnswer {
  outcome: 'completed' | 'failed';
  processorRefundId: string | null;
  message: string;
}

/**
 * Writes a processor's answer on its refund row, under the refund's and then its transaction's row
 * locks: Completed or Failed, when, the processor's id and the failure message. Null when the refund
 * is no longer Processing (another run recorded it). The caller moves the transaction on and announces.
 * Shared by the refund batcher and the retry worker's refund of a late capture.
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
  return { refund, txn, completed, now };
}
