/**
 * Network fees of excess reattempts (network-rules.md): what an attempt risks, and what a schedule
 * would have paid. Retain's own attempts are guarded by checkNetworkLimits, so their excess count
 * is 0 by construction; the fees AVOIDED are what a naive schedule would have paid on the same
 * transaction: one attempt a day at the failure's time for 30 days (or until the day the
 * transaction was recovered), blind to the network rules, the issuer answering it as it answered
 * the real attempts (the original decline, then each real decline from its time on).
 */
import { classifyDecline, normalizeNetwork, type Network } from './decline-classifier';
import { checkNetworkLimits, type CardAttempt } from './network-limits';
import { ruleSetAt } from './network-rules.config';

const DAY = 86_400_000;
/** The naive schedule's length: daily for 30 days. */
export const NAIVE_SCHEDULE_DAYS = 30;

/** The fee (USD minor units) one excess reattempt on a card of this network costs at `at`. */
export function excessFeeAt(network: Network | string | null | undefined, at: Date, interregional = false): number {
  const fees = ruleSetAt(at).fees;
  switch (normalizeNetwork(network)) {
    case 'visa':
      return interregional ? fees.visaInterregionalMinor : fees.visaDomesticMinor;
    case 'mastercard':
      return fees.mastercardMinor;
    case 'amex':
    case 'discover':
    case 'other':
      // No published excessive-retry program: no fee.
      return 0;
  }
}

export interface OriginalDecline {
  at: Date;
  responseCode: string;
  merchantAdviceCode?: string | null;
}

/**
 * Excess reattempts among `attempts` (time order) and their fees: an attempt after a decline that
 * forbids any retry (the original's or an earlier attempt's: Visa category 1 or 3 with the same
 * data, Mastercard MAC 03/21/01/04, hard codes), or over a count limit, is excess.
 */
export function excessFees(
  network: Network | string | null | undefined,
  /** The merchant's original decline on this card (null: another card of the customer's). */
  original: OriginalDecline | null,
  attempts: readonly CardAttempt[],
  interregional = false,
): { excess: number; feeMinor: number } {
  const originalBlocks =
    original !== null &&
    !classifyDecline(
      { network, responseCode: original.responseCode, merchantAdviceCode: original.merchantAdviceCode },
      original.at,
    ).retryable;
  let excess = 0;
  let feeMinor = 0;
  attempts.forEach((a, i) => {
    const check = checkNetworkLimits(
      { network, cardDataVersion: a.cardDataVersion ?? null },
      attempts.slice(0, i),
      a.at,
      a.amountMinor,
    );
    // The original decline binds a reattempt until the card data changes (as the planner reads it).
    const blockedByOriginal = originalBlocks && (a.cardDataVersion ?? null) === null;
    if (!check.allowed || blockedByOriginal) {
      excess++;
      feeMinor += excessFeeAt(network, a.at, interregional);
    }
  });
  return { excess, feeMinor };
}

/**
 * What the naive daily schedule would have paid on this transaction: attempts at the failure's
 * time on days 1..30, stopping at the first one at or after `recoveredAt`; each declined with the
 * latest real decline known at its time (the original, then the real attempts' declines).
 */
export function naiveScheduleFees(input: {
  network: Network | string | null | undefined;
  amountMinor: bigint;
  original: OriginalDecline;
  /** The real attempts, time order. */
  attempts: readonly CardAttempt[];
  recoveredAt: Date | null;
  interregional?: boolean;
}): { attempts: number; excess: number; feeMinor: number } {
  const naive: CardAttempt[] = [];
  for (let k = 1; k <= NAIVE_SCHEDULE_DAYS; k++) {
    const at = new Date(input.original.at.getTime() + k * DAY);
    const recovered = input.recoveredAt !== null && at.getTime() >= input.recoveredAt.getTime();
    const latest = [...input.attempts]
      .reverse()
      .find((a) => a.at.getTime() <= at.getTime() && a.outcome === 'declined');
    naive.push({
      at,
      amountMinor: input.amountMinor,
      outcome: recovered ? 'approved' : 'declined',
      responseCode: recovered ? '00' : (latest?.responseCode ?? input.original.responseCode),
      merchantAdviceCode: recovered
        ? null
        : latest
          ? (latest.merchantAdviceCode ?? null)
          : (input.original.merchantAdviceCode ?? null),
    });
    if (recovered) break;
  }
  const fees = excessFees(input.network, input.original, naive, input.interregional);
  return { attempts: naive.length, ...fees };
}
