import { RefundEntity, type TransactionEntity } from '@retain/db';
import { EventName, RefundStatus, TransactionStatus } from '@retain/domain';
import type { EntityManager } from 'typeorm';
import { announceTransaction } from './transaction-events';

/**
 * Ends a stop request (decisions §8) once no attempt is in flight: the transaction is Stopped, its
 * stop refunds close Completed with nothing charged, and one `refund completed` push per refund
 * carries the Stopped transaction. Shared by the refunds API (no attempt in flight), the retry
 * worker (the in-flight attempt declined) and the refund batcher. The caller holds the row lock.
 * Returns outbox ids to publish after commit.
 */
export async function closeStop(m: EntityManager, txn: TransactionEntity): Promise<string[]> {
  const now = new Date();
  Object.assign(txn, { status: TransactionStatus.Stopped, nextAttemptAt: null, statusChangedAt: now });
  await m.save(txn);
  const open = await m.getRepository(RefundEntity).find({
    where: { transactionId: txn.id, kind: 'stop', status: RefundStatus.Processing },
  });
  for (const r of open) Object.assign(r, { status: RefundStatus.Completed, timestamp: now });
  if (open.length) await m.save(open);
  return announceTransaction(m, txn, EventName.RefundCompleted, now, open.length);
}
