import { networkFeeFields } from './network-fees';
import { RefundEntity, RefundsRepository, TransactionEntity } from '@retain/db';
import { EventName, RefundStatus, TransactionStatus } from '@retain/domain';
import type { EntityManager } from 'typeorm';
import { settleRefundedTransaction, statusBeforeRefunds } from './refund-outcome';
import { UNRESOLVED_ATTEMPT_STATES, transition } from './state-machine';
import { announceTransaction } from './transaction-events';

/** Attempts of the transaction that may still have charged the card (pending or unknown). */
export async function unresolvedAttempts(m: EntityManager, transactionId: string): Promise<number> {
  const [{ n }]: { n: number }[] = await m.query(
    `SELECT count(*)::int AS n FROM attempts WHERE transaction_id = $1 AND state = ANY($2::text[])`,
    [transactionId, UNRESOLVED_ATTEMPT_STATES],
  );
  return n;
}

/**
 * Closes the stop when nothing can have been charged any more: no attempt pending or unknown.
 * Returns the outbox ids, or null when the stop must wait (the reconciliation or the in-flight
 * attempt settles it later). The caller holds the transaction's row lock.
 */
export async function closeStopIfSettled(m: EntityManager, txn: TransactionEntity): Promise<string[] | null> {
  if (txn.status !== TransactionStatus.StopRequested) return null;
  if ((await unresolvedAttempts(m, txn.id)) > 0) return null;
  return closeStop(m, txn);
}

/**
 * Ends a stop request (decisions §8) once no attempt is in flight: the transaction is Stopped, its
 * stop refunds close Completed with nothing charged, and one `refund completed` push per refund
 * carries the Stopped transaction. Shared by the refunds API (no attempt in flight), the retry
 * worker (the in-flight attempt declined) and the refund batcher. The caller holds the row lock.
 * Returns outbox ids to publish after commit.
 */
export async function closeStop(m: EntityManager, txn: TransactionEntity): Promise<string[]> {
  const now = new Date();
  // Refused (throws) while an attempt of the transaction may still have charged.
  const { to, announces } = transition(txn.status, 'stopClosed', {
    unresolvedAttempts: await unresolvedAttempts(m, txn.id),
  });
  Object.assign(txn, { status: to, nextAttemptAt: null, statusChangedAt: now, ...(await networkFeeFields(m, txn)) });
  await m.save(txn);
  const open = await m.getRepository(RefundEntity).find({
    where: { transactionId: txn.id, kind: 'stop', status: RefundStatus.Processing },
  });
  for (const r of open) Object.assign(r, { status: RefundStatus.Completed, timestamp: now });
  if (open.length) await m.save(open);
  return announceTransaction(m, txn, announces!, now, open.length);
}

/**
 * The other end of a stop: the in-flight attempt captured, so the stop's refunds (kind 'stop',
 * Processing) become normal refunds of the next batch, each for what was requested but together at
 * most what was captured less what was refunded already, and the transaction goes to Refund Requested
 * (decisions §8). A stop with nothing left to refund (the batch's safety net, on a transaction refunded
 * since) ends Failed at once with its `refund failed` push, like any failed refund; when no refund is left
 * in flight the transaction settles as after one (settleRefundedTransaction), never Refund Requested for
 * nothing. Used by the retry worker when it records the capture and by the refund batcher's safety net.
 * The caller holds the row lock. Returns outbox ids to publish after commit.
 */
export async function stopToRefund(m: EntityManager, txn: TransactionEntity, now: Date): Promise<string[]> {
  const repo = m.getRepository(RefundEntity);
  const stops = await repo.find({
    where: { transactionId: txn.id, kind: 'stop', status: RefundStatus.Processing },
    order: { requestedAt: 'ASC' },
  });
  if (stops.length === 0) return [];
  // What is left to refund: the capture less the refunds already made or on their way (the batch's
  // safety net may convert a stop on a transaction refunded since).
  // At most what is left of the transaction's own charge (a second capture is refunded on its own).
  let left = await RefundsRepository.refundableMinor(m, txn);
  if (left < 0n) left = 0n;
  // The status a failed refund returns to: Captured when the stop's own attempt captured; on the safety
  // net's transaction, captured earlier, the one before its refunds (Settled stays Settled).
  const previousStatus =
    txn.status === TransactionStatus.StopRequested ? TransactionStatus.Captured : await statusBeforeRefunds(m, txn);
  const nothingLeft: RefundEntity[] = [];
  for (const r of stops) {
    const amount = BigInt(r.amountMinor) < left ? BigInt(r.amountMinor) : left;
    left -= amount;
    Object.assign(r, {
      kind: 'refund',
      amountMinor: amount.toString(),
      previousStatus,
      ...(amount === 0n
        ? { status: RefundStatus.Failed, timestamp: now, failureMessage: 'nothing left to refund' }
        : {}),
    });
    if (amount === 0n) nothingLeft.push(r);
  }
  await repo.save(stops);
  if (nothingLeft.length === stops.length) {
    // Nothing to send: the transaction settles from the refunds it has (another one may be in flight).
    await settleRefundedTransaction(m, txn, nothingLeft[0]!);
  } else {
    const fields = {
      status: transition(txn.status, 'stopCaptured', { unresolvedAttempts: 0 }).to,
      statusChangedAt: now,
    };
    Object.assign(txn, fields);
    await m.getRepository(TransactionEntity).update(txn.id, fields);
  }
  // One `refund failed` per refund of nothing (decisions §8: one push per refund).
  return announceTransaction(m, txn, EventName.RefundFailed, now, nothingLeft.length);
}
