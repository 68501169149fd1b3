import { describe, expect, it } from 'vitest';
import { classifyDecline } from './decline-classifier';
import { checkNetworkLimits, originalDeclineBindsCard, type CardAttempt } from './network-limits';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const T0 = new Date('2026-03-02T09:00:00Z');
const at = (ms: number): Date => new Date(T0.getTime() + ms);

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
