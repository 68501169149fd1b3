import { AttemptEntity, type TransactionEntity } from '@retain/db';
import { excessFees, naiveScheduleFees, type CardAttempt } from '@retain/domain';
import type { EntityManager } from 'typeorm';

const OUTCOME: Record<string, CardAttempt['outcome']> = {
  captured: 'approved',
  declined: 'declined',
  error: 'error',
  unknown: 'pending',
  pending: 'pending',
};

/**
 * The fee fields of a transaction whose recovery ends (Captured, Cancelled, Stopped): the excess-reattempt
 * fees its attempts paid (per card: the submitted card under the original decline, each other
 * payment method on its own) and what the naive daily schedule would have paid on the submitted
 * card (libs/domain network-fees.ts). The caller writes them with the final status, in the same
 * statement (the analytics rollup adds up the difference); computing them again gives the same.
 */
export async function networkFeeFields(
  m: EntityManager,
  txn: TransactionEntity,
): Promise<Pick<TransactionEntity, 'networkFeesMinor' | 'naiveNetworkFeesMinor'>> {
  const rows = await m
    .getRepository(AttemptEntity)
    .find({ where: { transactionId: txn.id }, order: { retryNumber: 'ASC' } });
  return networkFeesOf(txn, rows);
}

/** networkFeeFields from the transaction's attempts as loaded by the caller (in retry_number order). */
export function networkFeesOf(
  txn: TransactionEntity,
  rows: readonly AttemptEntity[],
): Pick<TransactionEntity, 'networkFeesMinor' | 'naiveNetworkFeesMinor'> {
  const made = rows.filter((a) => a.state !== 'pending' || a.preparedAt !== null);
  const asCardAttempt = (a: AttemptEntity): CardAttempt => ({
    at: a.processedAt ?? a.preparedAt ?? a.scheduledFor,
    amountMinor: BigInt(a.amountMinor),
    outcome: OUTCOME[a.state] ?? 'pending',
    responseCode: a.responseCode,
    merchantAdviceCode: a.merchantAdviceCode,
    cardDataVersion: a.cardDataVersion,
    // A forced deposit's capture restarts no Visa count; a decline is judged by its charge's date.
    ...(a.forcedDeposit ? { forcedDeposit: true } : {}),
    ...(a.preparedAt ? { decidedAt: a.preparedAt } : {}),
  });
  // The submitted card is the first attempt's (or, without attempts, the transaction's own).
  const submittedCard = made[0]?.cardHmac ?? txn.cardHmac;
  const original = {
    at: new Date(txn.failedAt),
    responseCode: txn.authCode,
    merchantAdviceCode: txn.networkAdviceCode,
  };
  const byCard = new Map<string, AttemptEntity[]>();
  for (const a of made) {
    const key = a.cardHmac ?? submittedCard ?? '';
    byCard.set(key, [...(byCard.get(key) ?? []), a]);
  }
  let paid = 0;
  for (const [card, list] of byCard) {
    const network = list[0]!.cardNetwork ?? txn.cardNetwork;
    paid += excessFees(network, card === (submittedCard ?? '') ? original : null, list.map(asCardAttempt)).feeMinor;
  }
  const submitted = (byCard.get(submittedCard ?? '') ?? []).map(asCardAttempt);
  const recovered = rows.find((a) => a.state === 'captured');
  const naive = naiveScheduleFees({
    network: (byCard.get(submittedCard ?? '') ?? [])[0]?.cardNetwork ?? txn.cardNetwork,
    amountMinor: BigInt(txn.amountMinor),
    original,
    attempts: submitted,
    recoveredAt: recovered ? (recovered.processedAt ?? recovered.scheduledFor) : null,
  });
  return { networkFeesMinor: paid, naiveNetworkFeesMinor: naive.feeMinor };
}
