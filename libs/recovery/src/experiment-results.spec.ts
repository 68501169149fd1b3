import type { ArmMomentsRow, ExperimentRow } from '@retain/db';
import { HOLDOUT_ARM } from '@retain/domain';
import { describe, expect, it } from 'vitest';
import { experimentView } from './experiment-results';

const experiment: ExperimentRow = {
  id: 'exp_test',
  merchant_id: 'm',
  name: 'test',
  holdout_share: 0.5,
  holdout_policy: 'adaptive-2026-11',
  variants: [{ name: 'v', policy_version: 'adaptive-2026-11', weight: 1, learning: true, config: {} }],
  status: 'running',
  created_at: new Date('2026-11-01T00:00:00Z'),
  stopped_at: null,
};

/** One arm's moments: `recovered` of `n` transactions recovered, each for `each` minor units. */
const arm = (name: string, recovered: number, n: number, each = 1000, currency = 'USD'): ArmMomentsRow => ({
  arm: name,
  policy_version: 'adaptive-2026-11',
  currency,
  transactions: n,
  in_flight: 0,
  recovered_count: recovered,
  recovered_amount: String(recovered * each),
  recovered_amount_squares: String(recovered * each * each),
  failed_amount: String(n * each),
  attempts: n,
  median_days_to_recover: null,
});

const vsHoldout = (variant: ArmMomentsRow, holdout: ArmMomentsRow) => {
  const r = experimentView(experiment, [holdout, variant]).results as any[];
  return r.find((x) => x.arm === variant.arm).vs_holdout.recovery_rate as {
    difference: number;
    low: number;
    high: number;
  };
};

describe('experiment results: difference of recovery rates from the holdout', () => {
  it('is never a zero-width interval when an arm recovered none or all (small n)', () => {
    // 4 of 4 against 0 of 4: the normal approximation saw no variance in either arm and answered
    // [1, 1], "certainly 100 points better" from 8 transactions.
    const d = vsHoldout(arm('v', 4, 4), arm(HOLDOUT_ARM, 0, 4));
    expect(d.difference).toBe(1);
    expect(d.high).toBe(1);
    expect(d.low).toBeLessThan(0.5);
    expect(d.low).toBeGreaterThan(0);
    // 0 of 3 against 0 of 3: no difference seen, but not "certainly none".
    const none = vsHoldout(arm('v', 0, 3), arm(HOLDOUT_ARM, 0, 3));
    expect(none.difference).toBe(0);
    expect(none.low).toBeLessThan(-0.3);
    expect(none.high).toBeGreaterThan(0.3);
    // 3 of 3 against 2 of 3: the variant's arm has no variance; the interval still reaches below 0.
    const some = vsHoldout(arm('v', 3, 3), arm(HOLDOUT_ARM, 2, 3));
    expect(some.low).toBeLessThan(0);
    expect(some.high).toBeLessThanOrEqual(1);
  });

  it("matches Newcombe's hybrid score interval (Statistics in Medicine 1998, method 10)", () => {
    // Newcombe's worked examples: 56/70 − 48/80: 0.0524 to 0.3339; 9/10 − 3/10: 0.1705 to 0.8090;
    // 10/10 − 0/20: 0.6791 to 1.
    const a = vsHoldout(arm('v', 56, 70), arm(HOLDOUT_ARM, 48, 80));
    expect(a.difference).toBeCloseTo(0.2, 4);
    expect(a.low).toBeCloseTo(0.0524, 3);
    expect(a.high).toBeCloseTo(0.3339, 3);
    const b = vsHoldout(arm('v', 9, 10), arm(HOLDOUT_ARM, 3, 10));
    expect(b.low).toBeCloseTo(0.1705, 3);
    expect(b.high).toBeCloseTo(0.809, 3);
    const c = vsHoldout(arm('v', 10, 10), arm(HOLDOUT_ARM, 0, 20));
    expect(c.low).toBeCloseTo(0.6791, 3);
    expect(c.high).toBe(1);
  });

  it('compares each currency with the holdout of the same currency', () => {
    const r = experimentView(experiment, [
      arm(HOLDOUT_ARM, 0, 10, 1000, 'EUR'),
      arm('v', 10, 10, 1000, 'EUR'),
      arm(HOLDOUT_ARM, 10, 10, 1000, 'USD'),
      arm('v', 0, 10, 1000, 'USD'),
    ]).results as any[];
    const eur = r.find((x) => x.arm === 'v' && x.currency === 'EUR').vs_holdout.recovery_rate;
    const usd = r.find((x) => x.arm === 'v' && x.currency === 'USD').vs_holdout.recovery_rate;
    expect(eur.difference).toBe(1);
    expect(usd.difference).toBe(-1);
    expect(usd.low).toBe(-1);
  });
});

describe('experiment results: recovered amount per transaction', () => {
  const view = (variant: ArmMomentsRow, holdout: ArmMomentsRow) => {
    const r = experimentView(experiment, [holdout, variant]).results as any[];
    return r.find((x) => x.arm === variant.arm);
  };

  it('is never a zero-width interval when an arm recovered none or all of a few equal amounts', () => {
    // 4 of 4 recovered at 10.00 against 0 of 4: the normal approximation answered 10.00 to 10.00
    // for the arm and a difference of exactly 10.00 (a certain 10.00 per transaction from 8).
    const v = view(arm('v', 4, 4), arm(HOLDOUT_ARM, 0, 4));
    expect(v.recovered_per_transaction.value).toBe(10);
    expect(v.recovered_per_transaction.low).toBeLessThan(8);
    expect(v.recovered_per_transaction.high).toBeGreaterThanOrEqual(10);
    const d = v.vs_holdout.recovered_per_transaction;
    expect(d.difference).toBe(10);
    expect(d.low).toBeGreaterThan(0);
    expect(d.low).toBeLessThan(5);
    expect(d.high).toBeGreaterThanOrEqual(10);
    // 0 of 3 against 0 of 3: no difference seen, not "certainly none".
    const none = view(arm('v', 0, 3), arm(HOLDOUT_ARM, 0, 3)).vs_holdout.recovered_per_transaction;
    expect(none.difference).toBe(0);
    expect(none.low).toBeLessThan(-2);
    expect(none.high).toBeGreaterThan(2);
  });

  it('agrees with the normal approximation at large counts', () => {
    // 700 of 1000 against 600 of 1000 at 10.00: difference 1.00, Welch half width 1.96 × 0.2121 = 0.4158
    // (shown in cents).
    const d = view(arm('v', 700, 1000), arm(HOLDOUT_ARM, 600, 1000)).vs_holdout.recovered_per_transaction;
    expect(d.difference).toBe(1);
    expect(d.low).toBeCloseTo(1 - 0.4158, 1);
    expect(d.high).toBeCloseTo(1 + 0.4158, 1);
  });
});
