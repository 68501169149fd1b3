import { describe, expect, it } from 'vitest';
import { classifyDecline } from './decline-classifier';
import { checkNetworkLimits, type CardAttempt } from './network-limits';
import { visaDeclineCategory } from './network-rules.config';

const DAY = 86_400_000;
const at = (iso: string): Date => new Date(iso);

// network-rules.md, "Dated changes": each code is judged by the rules in force when it arrived.
describe('Visa categories as dated data', () => {
  it('5C and 9G are category 2 from 11 Apr 2025, generic (category 4) before', () => {
    for (const code of ['5C', '9G']) {
      expect(visaDeclineCategory(code, at('2025-04-10T23:59:59Z'))).toBe(4);
      expect(visaDeclineCategory(code, at('2025-04-11T00:00:00Z'))).toBe(2);
    }
  });

  it('83 is category 2 from 25 Oct 2026, generic (category 4) before', () => {
    expect(visaDeclineCategory('83', at('2026-10-24T23:59:59Z'))).toBe(4);
    expect(visaDeclineCategory('83', at('2026-10-25T00:00:00Z'))).toBe(2);
  });

  it('57 arrived as 05 from Oct 2025 until 25 Oct 2026: a generic soft decline then, category 1 after', () => {
    const before = classifyDecline({ network: 'visa', responseCode: '57' }, at('2026-10-24T12:00:00Z'));
    expect(before.visaCategory).toBe(4);
    expect(before.retryable).toBe(true);
    expect(before.description).toBe('Soft Failure');
    expect(before.waitClass).toBe('generic');

    const after = classifyDecline({ network: 'visa', responseCode: '57' }, at('2026-10-25T00:00:00Z'));
    expect(after.visaCategory).toBe(1);
    expect(after.retryable).toBe(false);
    expect(after.description).toBe('Hard Failure');
    expect(after.cardBlock).toBe('permanent');
  });

  it('57 was category 1 before issuers mapped it to 05 (before Oct 2025)', () => {
    expect(visaDeclineCategory('57', at('2025-09-30T23:59:59Z'))).toBe(1);
    expect(classifyDecline({ network: 'visa', responseCode: '57' }, at('2025-09-30T12:00:00Z')).retryable).toBe(false);
  });

  it('the date only moves Visa: a Mastercard 57 is a hard decline on both sides', () => {
    for (const d of ['2026-10-24T12:00:00Z', '2026-10-26T12:00:00Z'])
      expect(classifyDecline({ network: 'mastercard', responseCode: '57' }, at(d)).retryable).toBe(false);
  });

  it('a card blocked by a 57 after the change stays blocked; one declined 57 before it does not', () => {
    const decline = (iso: string): CardAttempt => ({
      at: at(iso),
      amountMinor: 1000n,
      outcome: 'declined',
      responseCode: '57',
    });
    const old = checkNetworkLimits('visa', [decline('2026-10-20T09:00:00Z')], at('2026-10-27T09:00:00Z'), 1000n);
    expect(old.allowed).toBe(true);
    const recent = checkNetworkLimits('visa', [decline('2026-10-26T09:00:00Z')], at('2026-10-27T09:00:00Z'), 1000n);
    expect(recent).toMatchObject({ allowed: false, permanently: true });
  });
});

// network-rules.md, "American Express, Discover and others": Retain's own rule.
describe('American Express, Discover and other networks', () => {
  const declines = (n: number, from: number): CardAttempt[] =>
    Array.from({ length: n }, (_, i) => ({
      at: new Date(from + i * DAY),
      amountMinor: 1000n,
      outcome: 'declined' as const,
      responseCode: '05',
    }));
  const start = Date.parse('2026-11-01T10:00:00Z');

  for (const network of ['amex', 'discover', 'jcb']) {
    it(`${network}: at most 20 declined attempts per card per merchant in 30 days`, () => {
      expect(checkNetworkLimits(network, declines(19, start), new Date(start + 19 * DAY), 1000n).allowed).toBe(true);
      const full = checkNetworkLimits(network, declines(20, start), new Date(start + 20 * DAY), 1000n);
      expect(full).toMatchObject({ allowed: false, permanently: false });
      // The oldest decline leaves the 30-day window.
      if (!full.allowed && !full.permanently) expect(full.notBefore.getTime()).toBe(start + 30 * DAY);
    });

    it(`${network}: an approval does not restart the count (the rule counts declined attempts in 30 days)`, () => {
      const history: CardAttempt[] = [
        ...declines(20, start),
        { at: new Date(start + 20 * DAY), amountMinor: 1000n, outcome: 'approved' },
      ];
      expect(checkNetworkLimits(network, history, new Date(start + 21 * DAY), 1000n).allowed).toBe(false);
      expect(checkNetworkLimits(network, history, new Date(start + 30 * DAY), 1000n).allowed).toBe(true);
    });

    it(`${network}: none after a hard decline`, () => {
      const hard: CardAttempt[] = [
        { at: new Date(start), amountMinor: 1000n, outcome: 'declined', responseCode: '14' },
      ];
      expect(checkNetworkLimits(network, hard, new Date(start + 40 * DAY), 1000n)).toMatchObject({
        allowed: false,
        permanently: true,
      });
    });
  }
});
