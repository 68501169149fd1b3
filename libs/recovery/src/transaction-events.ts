import { RefundEntity, transactionView, type TransactionEntity } from '@retain/db';
import type { EventName } from '@retain/domain';
import { announce } from '@retain/queues';
import type { EntityManager } from 'typeorm';

/**
 * Announces pushes whose content is the Transaction as it stands in this database transaction,
 * with its refunds (`retry failed`, `refund completed`, `refund failed`: decisions §7, §8):
 * `payload_id` = the transaction's vid, `transaction_id` = the merchant's id. `count` sends that
 * many (one per refund closed at once). Returns outbox ids to publish after commit.
 */
export async function announceTransaction(
  m: EntityManager,
  txn: TransactionEntity,
  eventName: EventName,
  occurredAt: Date,
  count = 1,
): Promise<string[]> {
  if (count <= 0) return [];
  const refunds = await m
    .getRepository(RefundEntity)
    .find({ where: { transactionId: txn.id }, order: { requestedAt: 'ASC' } });
  const content = transactionView(txn, refunds);
  return announce(
    m,
    Array.from({ length: count }, () => ({
      merchantId: txn.merchantId,
      eventName,
      payloadId: txn.vid,
      merchantTransactionId: txn.merchantTxnId,
      transactionRowId: txn.id,
      content,
      occurredAt,
    })),
  );
}
