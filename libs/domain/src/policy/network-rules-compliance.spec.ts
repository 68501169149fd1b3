import { describe, expect, it } from 'vitest';
import { classifyDecline } from './decline-classifier';
import { checkNetworkLimits, originalDeclineBindsCard, type CardAttempt } from './network-limits';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const T0 = new Date('2026-03-02T09:00:00Z');
const at = (ms: number): Date => new Date(T0.getTime() + ms);
const declines = (n: number, from = 0): CardAttempt[] =>
  Array.from({ length: n }, (_, i) => ({
    at: at(from + i * HOUR),
    amountMinor: 1000n,
    outcome: 'declined' as const,
    responseCode: '05',
  }));

// network-rules.md: "processors ... reset the count on an approval". A forced deposit (service-spec
// `forced_deposit`) is captured without asking the issuer: no approval, so no reset.
describe('a forced deposit is no issuer approval', () => {
  it('does not reset the Visa count of declined reattempts on the card', () => {
    const approval: CardAttempt = { at: at(20 * HOUR), amountMinor: 1000n, outcome: 'approved', responseCode: '00' };
    // An issuer's approval after 20 declines: the count restarts.
    expect(checkNetworkLimits('visa', [...declines(20), approval], at(DAY), 1000n).allowed).toBe(true);
    // A forced deposit's capture after them: the 20 declines still count.
    const forced: CardAttempt = { ...approval, forcedDeposit: true };
    const check = checkNetworkLimits('visa', [...declines(20), forced], at(DAY), 1000n);
    expect(check).toMatchObject({ allowed: false, permanently: false });
    // It is not a decline either: 19 declines and a forced deposit leave room for one more.
    expect(checkNetworkLimits('visa', [...declines(19), forced], at(DAY), 1000n).allowed).toBe(true);
  });
});

// network-rules.md: 1A and 70 (customer authentication needed) stop; American Express, Discover and
// others: "none after a hard decline".
describe('1A / 70 on American Express, Discover and others', () => {
  it.each(['amex', 'discover', 'other'])('%s: blocks the card for good, like a hard decline', (network) => {
    for (const code of ['1A', '70']) {
      const c = classifyDecline({ network, responseCode: code }, T0);
      expect(c, `${network} ${code}`).toMatchObject({ retryable: false, cardBlock: 'permanent', group: 'auth' });
      const h: CardAttempt[] = [
        { at: T0, amountMinor: 1000n, outcome: 'declined', responseCode: code, cardDataVersion: 'a' },
      ];
      // Another transaction on the same card, even with a new expiry date, even weeks later.
      for (const version of ['a', 'b'])
        expect(checkNetworkLimits({ network, cardDataVersion: version }, h, at(40 * DAY), 1000n)).toMatchObject({
          allowed: false,
          permanently: true,
        });
      // The merchant's original decline with it binds the card too.
      expect(originalDeclineBindsCard({ network, responseCode: code }, T0)).toBe(true);
    }
  });
  it('Visa: category 3 (not with the same card data), as before', () => {
    expect(classifyDecline({ network: 'visa', responseCode: '1A' }, T0).cardBlock).toBe('new-card-data');
    expect(classifyDecline({ network: 'visa', responseCode: '70' }, T0).cardBlock).toBe('new-card-data');
  });
});

// network-rules.md: 57 is category 1 from 25 Oct 2026 (issuers' 57 arrived as 05 before then). A
// decline is judged by the rules in force when the issuer declined (the attempt's charge), not when
// its outcome was recorded (a lookup of an unknown outcome, hours or days later).
describe('a dated Visa rule applies at the decline’s own time', () => {
  const declinedAt = new Date('2026-10-24T23:00:00Z');
  const recordedAt = new Date('2026-10-25T03:00:00Z');
  it('a 57 declined before 25 Oct 2026 and recorded after it is no category-1 block', () => {
    const h: CardAttempt[] = [
      { at: recordedAt, decidedAt: declinedAt, amountMinor: 1000n, outcome: 'declined', responseCode: '57' },
    ];
    expect(checkNetworkLimits('visa', h, new Date('2026-10-26T00:00:00Z'), 1000n).allowed).toBe(true);
    // Declined after the change: category 1, never again.
    const after: CardAttempt[] = [{ ...h[0]!, decidedAt: recordedAt }];
    expect(checkNetworkLimits('visa', after, new Date('2026-10-26T00:00:00Z'), 1000n)).toMatchObject({
      allowed: false,
      permanently: true,
    });
  });
});
