import { describe, expect, it } from 'vitest';
import type { CardAttempt } from './network-limits';
import { excessFeeAt, excessFees, naiveScheduleFees } from './network-fees';

const DAY = 86_400_000;
const FAILED = new Date('2026-11-02T09:00:00Z');
const declines = (n: number, code = '05', everyDays = 1, mac: string | null = null): CardAttempt[] =>
  Array.from({ length: n }, (_, i) => ({
    at: new Date(FAILED.getTime() + (i + 1) * everyDays * DAY),
    amountMinor: 1999n,
    outcome: 'declined',
    responseCode: code,
    merchantAdviceCode: mac,
  }));

describe('network fees of excess reattempts', () => {
  it('fee rates by network and date (Visa 0.10, 0.25 interregional from 25 Apr 2026; Mastercard 0.50)', () => {
    expect(excessFeeAt('visa', new Date('2026-05-01'))).toBe(10);
    expect(excessFeeAt('visa', new Date('2026-05-01'), true)).toBe(25);
    expect(excessFeeAt('visa', new Date('2026-04-01'), true)).toBe(10);
    expect(excessFeeAt('mastercard', new Date('2026-05-01'))).toBe(50);
    expect(excessFeeAt('amex', new Date('2026-05-01'))).toBe(0);
  });

  it('attempts within the limits cost nothing; the 21st Visa decline in 30 days is excess', () => {
    const original = { at: FAILED, responseCode: '05' };
    expect(excessFees('visa', original, declines(20))).toEqual({ excess: 0, feeMinor: 0 });
    expect(excessFees('visa', original, declines(25))).toEqual({ excess: 5, feeMinor: 50 });
  });

  it('every reattempt after a Visa category-1 original or a Mastercard MAC 03 is excess', () => {
    expect(excessFees('visa', { at: FAILED, responseCode: '14' }, declines(3, '14'))).toEqual({
      excess: 3,
      feeMinor: 30,
    });
    expect(
      excessFees('mastercard', { at: FAILED, responseCode: '51', merchantAdviceCode: '03' }, declines(2, '51')),
    ).toEqual({ excess: 2, feeMinor: 100 });
  });

  it('the naive daily schedule: 30 Visa attempts pay for the last 10; one recovered on day 4 pays nothing', () => {
    const original = { at: FAILED, responseCode: '51' };
    expect(
      naiveScheduleFees({ network: 'visa', amountMinor: 1999n, original, attempts: [], recoveredAt: null }),
    ).toEqual({ attempts: 30, excess: 10, feeMinor: 100 });
    expect(
      naiveScheduleFees({
        network: 'visa',
        amountMinor: 1999n,
        original,
        attempts: declines(2, '51', 1.5),
        recoveredAt: new Date(FAILED.getTime() + 3.5 * DAY),
      }),
    ).toEqual({ attempts: 4, excess: 0, feeMinor: 0 });
  });

  it('the naive schedule reads the real declines: after a real 14 every naive attempt is excess', () => {
    const attempts: CardAttempt[] = [{ ...declines(1, '14', 2)[0]! }];
    const r = naiveScheduleFees({
      network: 'visa',
      amountMinor: 1999n,
      original: { at: FAILED, responseCode: '51' },
      attempts,
      recoveredAt: null,
    });
    // Day 1 answered 51, day 2 answered 14 (both allowed when made); days 3-30 follow a 14: excess.
    expect(r).toEqual({ attempts: 30, excess: 28, feeMinor: 280 });
  });
});
