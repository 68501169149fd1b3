import { describe, expect, it } from 'vitest';
import { checkNetworkLimits, historyAsOf, type CardAttempt } from './network-limits';
import { NETWORK_RULE_SETS, ruleSetAt, type NetworkRuleSet } from './network-rules.config';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const T0 = new Date('2026-03-02T09:00:00Z');
const at = (ms: number): Date => new Date(T0.getTime() + ms);
const attempts = (n: number, stepMs: number, extra: Partial<CardAttempt> = {}, from = 0): CardAttempt[] =>
  Array.from({ length: n }, (_, i) => ({
    at: at(from + i * stepMs),
    amountMinor: 1000n,
    outcome: 'declined' as const,
    responseCode: '05',
    ...extra,
  }));
const temporary = (r: ReturnType<typeof checkNetworkLimits>): Date => {
  if (r.allowed || r.permanently) throw new Error(`expected a temporary refusal, got ${JSON.stringify(r)}`);
  return r.notBefore;
};

describe('dated rule sets', () => {
  it('selects the set in force at the attempt time', () => {
    expect(ruleSetAt(new Date('2024-12-31T23:59:59Z')).visa.maxAttempts).toBe(15);
    expect(ruleSetAt(new Date('2025-01-01T00:00:00Z')).visa.maxAttempts).toBe(20);
    expect(ruleSetAt(new Date('1960-01-01T00:00:00Z')).visa.maxAttempts).toBe(15);
  });
  it('judges an attempt by the rules of its own date: 15 in 30 days in 2024', () => {
    const base = Date.parse('2024-06-03T09:00:00Z');
    const h = attempts(15, HOUR).map((a, i) => ({ ...a, at: new Date(base + i * HOUR) }));
    expect(checkNetworkLimits('visa', h, new Date(base + 15 * HOUR), 1000n).allowed).toBe(false);
    expect(checkNetworkLimits('visa', h.slice(1), new Date(base + 15 * HOUR), 1000n).allowed).toBe(true);
  });
  it('accepts custom rule sets', () => {
    const strict: NetworkRuleSet = {
      ...NETWORK_RULE_SETS[0]!,
      visa: { ...NETWORK_RULE_SETS[0]!.visa, maxAttempts: 2 },
    };
    expect(checkNetworkLimits('visa', attempts(2, HOUR), at(DAY), 1000n, { rules: strict }).allowed).toBe(false);
    expect(checkNetworkLimits('visa', attempts(2, HOUR), at(DAY), 1000n, { rules: [strict] }).allowed).toBe(false);
    expect(checkNetworkLimits('visa', attempts(2, HOUR), at(DAY), 1000n).allowed).toBe(true);
  });
});

describe('Visa', () => {
  it('20 attempts per card in a rolling 30 days: the 21st waits until the oldest leaves the window', () => {
    const h = attempts(20, DAY);
    expect(checkNetworkLimits('visa', h.slice(0, 19), at(19 * DAY), 1000n).allowed).toBe(true);
    const notBefore = temporary(checkNetworkLimits('visa', h, at(20 * DAY), 1000n));
    expect(notBefore.getTime()).toBe(T0.getTime() + 30 * DAY);
    expect(checkNetworkLimits('visa', h, at(30 * DAY - 1), 1000n).allowed).toBe(false);
    expect(checkNetworkLimits('visa', h, at(30 * DAY), 1000n).allowed).toBe(true);
  });
  it('counts declines across amounts, attempts in flight and processor errors (they may have reached the issuer)', () => {
    const h = [...attempts(10, HOUR), ...attempts(10, HOUR, { amountMinor: 5n, outcome: 'pending' }, 10 * HOUR)];
    expect(checkNetworkLimits({ network: 'visa' }, h, at(DAY), 7n).allowed).toBe(false);
    const errors = [...attempts(10, HOUR), ...attempts(10, HOUR, { outcome: 'error', responseCode: null }, 10 * HOUR)];
    expect(checkNetworkLimits({ network: 'visa' }, errors, at(DAY), 7n).allowed).toBe(false);
    const fewer = [...attempts(10, HOUR), ...attempts(9, HOUR, { outcome: 'error', responseCode: null }, 10 * HOUR)];
    expect(checkNetworkLimits({ network: 'visa' }, fewer, at(DAY), 7n).allowed).toBe(true);
  });
  it('approvals do not count, and an approval ends a decline sequence', () => {
    // 20 approvals in a day (e.g. the sandbox card 4111111111111111 reused): the next attempt may go.
    const approvals = attempts(20, HOUR, { outcome: 'approved', responseCode: '00' });
    expect(checkNetworkLimits('visa', approvals, at(DAY), 1000n).allowed).toBe(true);
    // 19 declines, an approval, then 19 declines: each sequence is below 20.
    const approved: CardAttempt = { at: at(19 * HOUR), amountMinor: 1000n, outcome: 'approved', responseCode: '00' };
    const h = [...attempts(19, HOUR), approved, ...attempts(19, HOUR, {}, 20 * HOUR)];
    expect(checkNetworkLimits('visa', h, at(40 * HOUR), 1000n).allowed).toBe(true);
    expect(checkNetworkLimits('visa', [...h, ...attempts(1, 0, {}, 39 * HOUR + 1)], at(40 * HOUR), 1000n).allowed).toBe(
      false,
    );
  });
  // 57 is category 1 only outside Oct 2025 - 25 Oct 2026 (T0 is inside): network-rules-dated.spec.ts.
  it.each(['04', '07', '12', '14', '15', '41', '43', '46', 'R0', 'R1', 'R3'])(
    'never after a category 1 decline (%s), however long ago, whatever approval follows, whatever new expiry date',
    (code) => {
      const h = attempts(1, 0, { responseCode: code, cardDataVersion: 'exp-202901' });
      expect(checkNetworkLimits('visa', h, at(400 * DAY), 1000n)).toMatchObject({ allowed: false, permanently: true });
      const approved: CardAttempt = { at: at(DAY), amountMinor: 1000n, outcome: 'approved', responseCode: '00' };
      expect(checkNetworkLimits('visa', [...h, approved], at(2 * DAY), 1000n).allowed).toBe(false);
      const same = { network: 'visa', cardDataVersion: 'exp-202901' };
      expect(checkNetworkLimits(same, h, at(2 * DAY), 1000n).allowed).toBe(false);
      // network-rules.md: category 1 "none, ever" (only category 3 waits for changed card data).
      const renewed = { network: 'visa', cardDataVersion: 'exp-203001' };
      expect(checkNetworkLimits(renewed, h, at(2 * DAY), 1000n)).toMatchObject({ allowed: false, permanently: true });
    },
  );
  it('category 3: no retry with the same card data; allowed once the data changed', () => {
    const h = attempts(1, 0, { responseCode: '54', cardDataVersion: 'exp-202601' });
    expect(checkNetworkLimits({ network: 'visa' }, h, at(DAY), 1000n)).toMatchObject({ permanently: true });
    expect(checkNetworkLimits({ network: 'visa', cardDataVersion: 'exp-202601' }, h, at(DAY), 1000n).allowed).toBe(
      false,
    );
    expect(checkNetworkLimits({ network: 'visa', cardDataVersion: 'exp-202901' }, h, at(DAY), 1000n).allowed).toBe(
      true,
    );
    // Unknown data of the earlier attempt counts as the same data.
    const unknown = attempts(1, 0, { responseCode: '54' });
    expect(checkNetworkLimits({ network: 'visa', cardDataVersion: 'x' }, unknown, at(DAY), 1000n).allowed).toBe(false);
    // Sent without an expiry (a token: version null): an expiry since is changed data; still none is not.
    const none = attempts(1, 0, { responseCode: '54', cardDataVersion: null });
    expect(checkNetworkLimits({ network: 'visa', cardDataVersion: 'x' }, none, at(DAY), 1000n).allowed).toBe(true);
    expect(checkNetworkLimits({ network: 'visa', cardDataVersion: null }, none, at(DAY), 1000n).allowed).toBe(false);
  });
  it('category 2 and 4 declines only count', () => {
    expect(checkNetworkLimits('visa', attempts(5, HOUR, { responseCode: '51' }), at(DAY), 1000n).allowed).toBe(true);
    expect(checkNetworkLimits('visa', attempts(5, HOUR, { responseCode: '05' }), at(DAY), 1000n).allowed).toBe(true);
  });
  it('ignores attempts after the checked time', () => {
    expect(checkNetworkLimits('visa', attempts(1, 0, { responseCode: '41' }, DAY), at(0), 1000n).allowed).toBe(true);
  });
  it('a check now (historyAsOf) counts what is dated after now as made now: an attempt in flight, a block', () => {
    const now = at(20 * HOUR);
    // Another pod's mark in flight under a clock 5 ms ahead: the 20th attempt of the window.
    const h = [...attempts(19, HOUR), ...attempts(1, 0, { outcome: 'pending', responseCode: null }, 20 * HOUR + 5)];
    expect(checkNetworkLimits('visa', h, now, 1000n).allowed).toBe(true);
    const r = checkNetworkLimits('visa', historyAsOf(h, now), now, 1000n);
    expect(r).toMatchObject({ allowed: false, permanently: false });
    expect(temporary(r).getTime()).toBe(T0.getTime() + 30 * DAY);
    // A merchant's original 41 at its transaction's timestamp, 3 h ahead of our clock: "none, ever".
    const blocked = attempts(1, 0, { responseCode: '41', original: true }, 23 * HOUR);
    expect(checkNetworkLimits('visa', historyAsOf(blocked, now), now, 1000n)).toMatchObject({
      allowed: false,
      permanently: true,
    });
    // Nothing else moves: the entries up to now are the same objects, in order of time.
    expect(historyAsOf([h[19]!, h[0]!], now)).toEqual([h[0], { ...h[19], at: now }]);
  });
});

describe('Mastercard', () => {
  it('10 declined attempts per card in a calendar day (UTC): the 11th waits for the next day', () => {
    // T0 is 09:00 UTC: ten declines from 09:00 to 14:00, all on 2 March.
    const h = attempts(10, 0.5 * HOUR);
    expect(checkNetworkLimits('mastercard', h.slice(0, 9), at(5 * HOUR), 1000n).allowed).toBe(true);
    const midnight = Date.parse('2026-03-03T00:00:00Z');
    expect(temporary(checkNetworkLimits('mastercard', h, at(5 * HOUR), 1000n)).getTime()).toBe(midnight);
    expect(checkNetworkLimits('mastercard', h, new Date(midnight - 1), 1000n).allowed).toBe(false);
    expect(checkNetworkLimits('mastercard', h, new Date(midnight), 1000n).allowed).toBe(true);
  });
  it('calendar days, not rolling 24 h: ten declines late on one day do not hold the next morning', () => {
    const late = attempts(10, 6 * 60_000, {}, 14 * HOUR); // 23:00-23:54 UTC on 2 March
    expect(checkNetworkLimits('mastercard', late, new Date('2026-03-03T00:05:00Z'), 1000n).allowed).toBe(true);
  });
  it('the calendar day is the UTC day whatever the cardholder zone (23:30 in New York is the next UTC day)', () => {
    // 10 declines at 20:00-22:15 New York time on 2 March = 01:00-03:15 UTC on 3 March.
    const ny = attempts(10, 15 * 60_000, {}, 16 * HOUR);
    // 23:30 New York on 2 March is 04:30 UTC on 3 March: the same UTC day, refused.
    expect(checkNetworkLimits('mastercard', ny, new Date('2026-03-03T04:30:00Z'), 1000n).allowed).toBe(false);
    expect(checkNetworkLimits('mastercard', ny, new Date('2026-03-04T00:00:00Z'), 1000n).allowed).toBe(true);
  });
  it('calendar days across a month end (31 Jan to 1 Feb) and a leap day (28-29 Feb 2028)', () => {
    const jan = Array.from({ length: 10 }, (_, i): CardAttempt => ({
      at: new Date(Date.parse('2027-01-31T12:00:00Z') + i * HOUR),
      amountMinor: 1000n,
      outcome: 'declined',
      responseCode: '05',
    }));
    expect(temporary(checkNetworkLimits('mastercard', jan, new Date('2027-01-31T23:00:00Z'), 1000n))).toEqual(
      new Date('2027-02-01T00:00:00Z'),
    );
    const leap = jan.map((h) => ({
      ...h,
      at: new Date(h.at.getTime() + Date.parse('2028-02-29') - Date.parse('2027-01-31')),
    }));
    expect(temporary(checkNetworkLimits('mastercard', leap, new Date('2028-02-29T23:59:00Z'), 1000n))).toEqual(
      new Date('2028-03-01T00:00:00Z'),
    );
  });
  it('approved attempts do not count; processor errors and attempts in flight do', () => {
    const approved = attempts(10, HOUR, { outcome: 'approved', responseCode: '00' });
    expect(checkNetworkLimits('mastercard', approved, at(10 * HOUR), 1000n).allowed).toBe(true);
    const errors = attempts(10, HOUR, { outcome: 'error', responseCode: null });
    expect(checkNetworkLimits('mastercard', errors, at(10 * HOUR), 1000n).allowed).toBe(false);
    const inFlight = [...attempts(6, HOUR), ...attempts(4, 0, { outcome: 'pending', responseCode: null }, 6 * HOUR)];
    expect(checkNetworkLimits('mastercard', inFlight, at(7 * HOUR), 1000n).allowed).toBe(false);
  });
  it("Visa's count restarts at the approval's own time, not when its outcome was recorded", () => {
    // An attempt approved at 09:00 whose outcome stayed unknown until 20:00 (a timeout, then a lookup);
    // meanwhile the merchant's other transactions on the card were declined 20 times. The issuer saw
    // those declines after the approval: they count, so a 21st decline would break the limit.
    const declinedAfter = attempts(20, 0.5 * HOUR, {}, HOUR);
    const approved: CardAttempt = {
      at: at(11 * HOUR),
      decidedAt: T0,
      amountMinor: 1000n,
      outcome: 'approved',
      responseCode: '00',
    };
    expect(checkNetworkLimits('visa', [...declinedAfter, approved], at(12 * HOUR), 1000n).allowed).toBe(false);
    // Declines the issuer saw before the approval are still wiped out by it, whenever they were recorded.
    const before = attempts(20, 0, { decidedAt: at(-HOUR) }, HOUR);
    expect(checkNetworkLimits('visa', [...before, approved], at(12 * HOUR), 1000n).allowed).toBe(true);
  });
  it('attempts in flight count even when an approval was recorded after they started', () => {
    const inFlight = attempts(10, 0, { outcome: 'pending', responseCode: null });
    const approved: CardAttempt = { at: at(HOUR), amountMinor: 1000n, outcome: 'approved', responseCode: '00' };
    expect(checkNetworkLimits('mastercard', [...inFlight, approved], at(2 * HOUR), 1000n).allowed).toBe(false);
  });
  it('Maestro cards follow the Mastercard limits', () => {
    expect(checkNetworkLimits('maestro', attempts(10, HOUR), at(10 * HOUR), 1000n).allowed).toBe(false);
    const mac = attempts(1, 0, { responseCode: '51', merchantAdviceCode: '21' });
    expect(checkNetworkLimits('maestro', mac, at(60 * DAY), 1000n)).toMatchObject({ permanently: true });
  });
  it('35 declines at the same amount in 30 days: the 36th waits until the oldest of them is 30 days old', () => {
    const h = attempts(35, 0.75 * DAY);
    const now = at(35 * 0.75 * DAY);
    expect(checkNetworkLimits('mastercard', h.slice(0, 34), now, 1000n).allowed).toBe(true);
    // Counted over every span of 30 days, so every tumbling window holds at most 35 wherever it starts.
    expect(temporary(checkNetworkLimits('mastercard', h, now, 1000n)).getTime()).toBe(h[0]!.at.getTime() + 30 * DAY);
    expect(checkNetworkLimits('mastercard', h, now, 999n).allowed).toBe(true);
    expect(checkNetworkLimits('mastercard', h, new Date(h[0]!.at.getTime() + 30 * DAY), 1000n).allowed).toBe(true);
  });
  it('never lets a tumbling 30-day window hold 36 same-amount declines, from a history of the last 31 days', () => {
    // Two same-price subscriptions on one card, declined every day for three months: each check
    // sees only what cardHistory returns (the last 31 days), as in the service.
    const made: CardAttempt[] = [];
    for (let day = 0; day < 95; day++) {
      for (const hour of [6, 14, 22]) {
        const t = new Date(Date.parse('2026-01-01T00:00:00Z') + day * DAY + hour * HOUR);
        const history = made.filter((h) => t.getTime() - h.at.getTime() < 31 * DAY);
        const sameDay = made.filter((h) => Math.floor(h.at.getTime() / DAY) === Math.floor(t.getTime() / DAY));
        if (sameDay.length >= 2) continue;
        if (checkNetworkLimits('mastercard', history, t, 1000n).allowed)
          made.push({ at: t, amountMinor: 1000n, outcome: 'declined', responseCode: '51' });
      }
    }
    expect(made.length).toBeGreaterThan(35 * 2);
    // Every window of 30 calendar days, whatever day it starts on (the network's anchor is not ours to see).
    const firstDay = Math.floor(made[0]!.at.getTime() / DAY);
    for (let start = firstDay - 30; start <= firstDay + 95; start++) {
      const inWindow = made.filter((h) => {
        const d = Math.floor(h.at.getTime() / DAY);
        return d >= start && d < start + 30;
      });
      expect(inWindow.length, `window from day ${start}`).toBeLessThanOrEqual(35);
    }
  });
  it('an approval restarts no Mastercard count: the same-amount one and the day one hold every decline in them', () => {
    // network-rules.md states the reset on an approval for Visa only; Mastercard's limits count declines.
    const approved = (ms: number, amountMinor = 1000n): CardAttempt => ({
      at: at(ms),
      amountMinor,
      outcome: 'approved',
    });
    const h = [...attempts(35, 0.75 * DAY), approved(27 * DAY)];
    expect(checkNetworkLimits('mastercard', h, at(28 * DAY), 1000n).allowed).toBe(false);
    const day = [...attempts(10, HOUR), approved(10 * HOUR, 2000n)];
    expect(temporary(checkNetworkLimits('mastercard', day, at(11 * HOUR), 1000n))).toEqual(at(15 * HOUR));
  });
  it('an approval restarts no count of the other networks (20 declines in 30 days)', () => {
    const h = [...attempts(20, HOUR), { at: at(20 * HOUR), amountMinor: 1000n, outcome: 'approved' as const }];
    expect(checkNetworkLimits('amex', h, at(DAY), 1000n).allowed).toBe(false);
    expect(checkNetworkLimits('visa', h, at(DAY), 1000n).allowed).toBe(true);
  });
  it("the merchant's original decline binds the card but is not counted toward the limits", () => {
    const original = (extra: Partial<CardAttempt>): CardAttempt => ({
      at: at(0),
      amountMinor: 1000n,
      outcome: 'declined',
      original: true,
      ...extra,
    });
    // A category 1 original: none, ever; a category 3 original: not with the same data.
    const lost = original({ responseCode: '41', cardDataVersion: 'v1' });
    expect(checkNetworkLimits({ network: 'visa', cardDataVersion: 'v2' }, [lost], at(90 * DAY), 1000n)).toMatchObject({
      allowed: false,
      permanently: true,
    });
    const expired = original({ responseCode: '54', cardDataVersion: 'v1' });
    expect(checkNetworkLimits({ network: 'visa', cardDataVersion: 'v1' }, [expired], at(DAY), 1000n)).toMatchObject({
      permanently: true,
    });
    expect(checkNetworkLimits({ network: 'visa', cardDataVersion: 'v2' }, [expired], at(DAY), 1000n).allowed).toBe(
      true,
    );
    // A MAC 30 original: not before 10 days (decisions §16), whatever the policy planned.
    const later = original({ responseCode: '51', merchantAdviceCode: '30' });
    expect(temporary(checkNetworkLimits('mastercard', [later], at(DAY), 1000n)).getTime()).toBe(at(10 * DAY).getTime());
    // Not counted: 9 of Retain's declines today and the original leave room for a 10th.
    const day = attempts(9, HOUR);
    expect(
      checkNetworkLimits('mastercard', [original({ responseCode: '05' }), ...day], at(10 * HOUR), 1000n).allowed,
    ).toBe(true);
  });
  it('Visa counts customer- and merchant-initiated attempts apart since 25 May 2025, together before', () => {
    const cit = (start: string): CardAttempt[] =>
      Array.from({ length: 20 }, (_, i) => ({
        at: new Date(Date.parse(start) + i * HOUR),
        amountMinor: 1000n,
        outcome: 'declined',
        responseCode: '05',
        initiator: 'customer',
      }));
    const after = cit('2026-03-01T00:00:00Z');
    expect(checkNetworkLimits('visa', after, new Date('2026-03-02T00:00:00Z'), 1000n).allowed).toBe(true);
    expect(
      checkNetworkLimits('visa', after, new Date('2026-03-02T00:00:00Z'), 1000n, { initiator: 'customer' }).allowed,
    ).toBe(false);
    const before = cit('2025-05-01T00:00:00Z');
    expect(checkNetworkLimits('visa', before, new Date('2025-05-02T00:00:00Z'), 1000n).allowed).toBe(false);
  });
  it.each(['03', '21'])('never after MAC %s, however long ago, whatever new expiry date', (mac) => {
    const h = attempts(1, 0, { responseCode: '51', merchantAdviceCode: mac, cardDataVersion: 'a' });
    expect(checkNetworkLimits('mastercard', h, at(365 * DAY), 1000n)).toMatchObject({
      allowed: false,
      permanently: true,
    });
    // network-rules.md: "stop for good ... a hard stop, not a budget".
    expect(checkNetworkLimits({ network: 'mastercard', cardDataVersion: 'b' }, h, at(DAY), 1000n)).toMatchObject({
      allowed: false,
      permanently: true,
    });
  });
  it("a card of no known network is bound by the network its processor named in a decline (a saved payment method's brand)", () => {
    const h = attempts(1, 0, { responseCode: '05', merchantAdviceCode: '21', network: 'mastercard' });
    expect(checkNetworkLimits(null, h, at(DAY), 1000n)).toMatchObject({ allowed: false, permanently: true });
    // Mastercard's 10 a day, not the other networks' 20 in 30 days.
    const day = attempts(10, 60_000, { network: 'mastercard' });
    expect(temporary(checkNetworkLimits(null, day, at(HOUR), 1000n))).toEqual(at(15 * HOUR));
    // A network the card is known by stays its own; an unnamed brand ('other') teaches nothing.
    expect(checkNetworkLimits('visa', h, at(DAY), 1000n).allowed).toBe(true);
    expect(
      checkNetworkLimits(null, attempts(1, 0, { merchantAdviceCode: '21', network: 'other' }), at(DAY), 1000n).allowed,
    ).toBe(true);
  });
  it('other networks: none after a hard decline, whatever new expiry date', () => {
    const h = attempts(1, 0, { responseCode: '41', cardDataVersion: 'a' });
    expect(checkNetworkLimits({ network: 'amex', cardDataVersion: 'b' }, h, at(DAY), 1000n)).toMatchObject({
      allowed: false,
      permanently: true,
    });
  });
  it.each(['01', '04'])('MAC %s: not with the same card data', (mac) => {
    const h = attempts(1, 0, { responseCode: '05', merchantAdviceCode: mac, cardDataVersion: 'a' });
    expect(checkNetworkLimits({ network: 'mastercard', cardDataVersion: 'a' }, h, at(DAY), 1000n).allowed).toBe(false);
    expect(checkNetworkLimits({ network: 'mastercard', cardDataVersion: 'b' }, h, at(DAY), 1000n).allowed).toBe(true);
  });
  it.each([
    ['24', 1],
    ['25', 24],
    ['26', 48],
    ['27', 96],
    ['28', 144],
    ['29', 192],
    ['30', 240],
  ] as const)('MAC %s: not before %i h after the decline', (mac, hours) => {
    const h = attempts(1, 0, { responseCode: '51', merchantAdviceCode: mac });
    expect(temporary(checkNetworkLimits('mastercard', h, at(hours * HOUR - 1), 1000n)).getTime()).toBe(
      T0.getTime() + hours * HOUR,
    );
    expect(checkNetworkLimits('mastercard', h, at(hours * HOUR), 1000n).allowed).toBe(true);
  });
  it('an older, longer MAC delay still holds after a newer decline', () => {
    const h = [...attempts(1, 0, { merchantAdviceCode: '30' }), ...attempts(1, 0, { merchantAdviceCode: '24' }, HOUR)];
    expect(temporary(checkNetworkLimits('mastercard', h, at(5 * DAY), 1000n)).getTime()).toBe(T0.getTime() + 10 * DAY);
  });
  it('Visa counting does not apply to Mastercard and the other way round', () => {
    expect(checkNetworkLimits('mastercard', attempts(25, DAY), at(25 * DAY), 1000n).allowed).toBe(true);
    expect(checkNetworkLimits('visa', attempts(10, HOUR), at(10 * HOUR), 1000n).allowed).toBe(true);
  });
});

describe('other networks and the time scale', () => {
  it("other brands: Retain's rule of 20 declines in 30 days, and hard declines block the card", () => {
    expect(checkNetworkLimits('amex', attempts(19, HOUR), at(2 * DAY), 1000n).allowed).toBe(true);
    expect(checkNetworkLimits('amex', attempts(20, HOUR), at(2 * DAY), 1000n).allowed).toBe(false);
    expect(checkNetworkLimits('amex', attempts(1, 0, { responseCode: '41' }), at(DAY), 1000n).allowed).toBe(false);
    expect(checkNetworkLimits(null, attempts(1, 0, { responseCode: '14' }), at(DAY), 1000n).allowed).toBe(false);
  });
  it('RETRY_TIME_SCALE shrinks every window and delay by the same factor', () => {
    const scale = 1000;
    const h = attempts(20, 1000);
    expect(checkNetworkLimits('visa', h, at(20_000), 1000n, { timeScale: scale }).allowed).toBe(false);
    expect(checkNetworkLimits('visa', h, at((30 * DAY) / scale), 1000n, { timeScale: scale }).allowed).toBe(true);
    const mac = attempts(1, 0, { merchantAdviceCode: '30' });
    expect(temporary(checkNetworkLimits('mastercard', mac, at(1), 1000n, { timeScale: scale })).getTime()).toBe(
      T0.getTime() + (240 * HOUR) / scale,
    );
    expect(() => checkNetworkLimits('visa', [], T0, 1n, { timeScale: 0 })).toThrow(RangeError);
  });
});
