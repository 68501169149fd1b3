import type { ArmMomentsRow, ExperimentRow } from '@retain/db';
import {
  HOLDOUT_ARM,
  currencyExponent,
  differenceInterval,
  fromMinorUnits,
  meanInterval,
  rateDifferenceInterval,
  wilsonInterval,
  type Moments,
} from '@retain/domain';

const round = (x: number, digits = 4): number => Number(x.toFixed(digits));

/**
 * An experiment as the API and the CLI show it: its definition and, per arm and currency, the
 * recovered amount and count, attempts, days to recover, with 95% intervals of the recovery rate
 * (Wilson) and of the recovered amount per transaction (normal), and the difference from the
 * holdout (same currency) with its interval. Rates count every assigned transaction, those still
 * in flight included (`in_flight` says how many): the figures can only grow while it runs.
 */
export function experimentView(row: ExperimentRow, moments: readonly ArmMomentsRow[]): Record<string, unknown> {
  const amountMoments = (r: ArmMomentsRow): Moments => ({
    n: r.transactions,
    sum: fromMinorUnits(r.recovered_amount, r.currency),
    sumSquares: Number(r.recovered_amount_squares) / 10 ** (2 * currencyExponent(r.currency)),
  });
  /**
   * The moments an amount interval is computed from: the arm's, plus one more transaction recovered
   * at the arm's mean failed amount and one more not recovered (Agresti and Caffo's adjustment of a
   * difference of proportions, carried over to amounts). Without them an arm that recovered none or
   * all of a few transactions of one amount has no variance, and the normal approximation answered a
   * zero-width interval (10.00 to 10.00 per transaction from 4 of 4). Negligible at large counts.
   */
  const intervalMoments = (r: ArmMomentsRow): Moments => {
    const m = amountMoments(r);
    const pseudo = r.transactions > 0 ? fromMinorUnits(r.failed_amount, r.currency) / r.transactions : 0;
    return { n: m.n + 2, sum: m.sum + pseudo, sumSquares: m.sumSquares + pseudo * pseudo };
  };
  /** Difference of recovered amount per transaction (a − b): observed, in the adjusted moments' interval. */
  const amountDifference = (a: ArmMomentsRow, b: ArmMomentsRow) => {
    const observed = differenceInterval(amountMoments(a), amountMoments(b));
    const spread = differenceInterval(intervalMoments(a), intervalMoments(b));
    if (!observed || !spread) return null;
    const difference = observed.difference;
    return { difference, low: Math.min(spread.low, difference), high: Math.max(spread.high, difference) };
  };
  const results = moments.map((r) => {
    const holdout = moments.find((h) => h.arm === HOLDOUT_ARM && h.currency === r.currency);
    const rate = wilsonInterval(r.recovered_count, r.transactions);
    const mean = r.transactions > 0 ? amountMoments(r).sum / r.transactions : 0;
    const adjusted = intervalMoments(r);
    const spread = meanInterval(adjusted.n, adjusted.sum, adjusted.sumSquares);
    // The observed mean, in an interval that always holds it.
    const perTxn =
      r.transactions > 0
        ? { mean, low: Math.min(spread.low, mean), high: Math.max(spread.high, mean) }
        : { mean: 0, low: 0, high: 0 };
    const vsHoldout =
      holdout && r.arm !== HOLDOUT_ARM
        ? {
            recovery_rate: interval(
              rateDifferenceInterval(r.recovered_count, r.transactions, holdout.recovered_count, holdout.transactions),
            ),
            recovered_per_transaction: interval(amountDifference(r, holdout), 2),
          }
        : null;
    return {
      arm: r.arm,
      policy_version: r.policy_version,
      currency: r.currency,
      transactions: r.transactions,
      in_flight: r.in_flight,
      failed_amount: fromMinorUnits(r.failed_amount, r.currency),
      recovered_count: r.recovered_count,
      recovered_amount: fromMinorUnits(r.recovered_amount, r.currency),
      recovery_rate: { value: round(rate.rate), low: round(rate.low), high: round(rate.high) },
      recovered_per_transaction: {
        value: round(perTxn.mean, 2),
        low: round(perTxn.low, 2),
        high: round(perTxn.high, 2),
      },
      attempts: r.attempts,
      attempts_per_recovery: r.recovered_count ? round(r.attempts / r.recovered_count, 2) : null,
      median_days_to_recover: r.median_days_to_recover === null ? null : round(Number(r.median_days_to_recover), 3),
      vs_holdout: vsHoldout,
    };
  });
  return {
    id: row.id,
    name: row.name,
    status: row.status,
    holdout_share: row.holdout_share,
    holdout_policy: row.holdout_policy,
    variants: row.variants,
    created_at: new Date(row.created_at).toISOString(),
    stopped_at: row.stopped_at ? new Date(row.stopped_at).toISOString() : null,
    results,
  };
}

function interval(
  d: { difference: number; low: number; high: number } | null,
  digits = 4,
): { difference: number; low: number; high: number } | null {
  return d ? { difference: round(d.difference, digits), low: round(d.low, digits), high: round(d.high, digits) } : null;
}
