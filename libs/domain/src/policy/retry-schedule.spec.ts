import { describe, expect, it } from 'vitest';
import { checkNetworkLimits, type CardAttempt } from './network-limits';
import { isBusinessDay, isPayday, lastBusinessDayOfMonth, nextDayAt } from './payday-calendar';
import {
  DEFAULT_RETRY_POLICY,
  firstAttemptAt,
  planNextAttempt,
  type LastOutcome,
  type PlanInput,
} from './retry-schedule';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
// A Monday afternoon, mid-month.
const T0 = new Date('2026-03-09T14:30:00Z');
const base = (over: Partial<PlanInput> = {}): PlanInput => ({
  attemptsMade: 0,
  startedAt: T0,
  now: T0,
  lastDecline: { responseCode: '05' },
  network: 'visa',
  amountMinor: 1000n,
  cardHistory: [],
  ...over,
});

/** Runs a whole schedule in which every attempt is declined with `decline`. */
function runSchedule(decline: LastOutcome, over: Partial<PlanInput> = {}): { times: Date[]; reason: string } {
  const times: Date[] = [];
  const history: CardAttempt[] = [];
  let now = over.now ?? T0;
  for (let n = 0; n < 50; n++) {
    const plan = planNextAttempt(base({ ...over, attemptsMade: n, now, lastDecline: decline, cardHistory: history }));
    if (plan.kind === 'stop') return { times, reason: plan.reason };
    expect(plan.at.getTime()).toBeGreaterThan(now.getTime());
    times.push(plan.at);
    history.push({
      at: plan.at,
      amountMinor: 1000n,
      outcome: decline.technical ? 'error' : 'declined',
      responseCode: decline.responseCode ?? null,
      merchantAdviceCode: decline.merchantAdviceCode ?? null,
    });
    now = plan.at;
  }
  throw new Error('schedule did not end');
}

describe('payday calendar', () => {
  it('knows business days, the last business day and paydays', () => {
    expect(isBusinessDay(new Date('2026-03-07T09:00:00Z'))).toBe(false); // Saturday
    expect(lastBusinessDayOfMonth(new Date('2026-05-10T00:00:00Z'))).toBe(29); // May 31 is a Sunday
    expect(isPayday(new Date('2026-05-29T09:00:00Z'))).toBe(true); // last business day (and a Friday)
    expect(isPayday(new Date('2026-04-01T09:00:00Z'))).toBe(true); // the 1st, a Wednesday
    expect(isPayday(new Date('2026-04-15T09:00:00Z'))).toBe(true); // the 15th, a Wednesday
    expect(isPayday(new Date('2026-04-10T09:00:00Z'))).toBe(true); // a Friday
    expect(isPayday(new Date('2026-04-08T09:00:00Z'))).toBe(false); // a plain Wednesday
    expect(isPayday(new Date('2026-03-15T09:00:00Z'))).toBe(false); // the 15th on a Sunday
  });
  it('finds the next accepted day at an hour, strictly bounded', () => {
    expect(nextDayAt(new Date('2026-03-09T08:00:00Z'), 9, isBusinessDay).toISOString()).toBe(
      '2026-03-09T09:00:00.000Z',
    );
    expect(nextDayAt(new Date('2026-03-09T09:00:01Z'), 9, isBusinessDay).toISOString()).toBe(
      '2026-03-10T09:00:00.000Z',
    );
    expect(nextDayAt(new Date('2026-03-09T10:00:00Z'), 9, () => false).toISOString()).toBe('2026-03-10T09:00:00.000Z');
  });
});

describe('default schedule', () => {
  it.each([
    ['generic', { responseCode: '05' }],
    ['funds', { responseCode: '51' }],
    ['technical', { responseCode: '91' }],
    ['risky', { responseCode: '59' }],
    ['processor errors', { technical: true }],
  ] as const)('%s: bounded budget, strictly increasing, inside the 30-day window, within network limits', (_, d) => {
    for (const network of ['visa', 'mastercard', 'amex']) {
      const { times } = runSchedule(d as LastOutcome, { network });
      expect(times.length).toBeGreaterThan(0);
      expect(times.length).toBeLessThanOrEqual(DEFAULT_RETRY_POLICY.maxAttempts);
      for (let i = 1; i < times.length; i++) expect(times[i]!.getTime()).toBeGreaterThan(times[i - 1]!.getTime());
      expect(times[times.length - 1]!.getTime() - T0.getTime()).toBeLessThanOrEqual(30 * DAY);
    }
  });

  it('generic declines: business-day mornings, denser early, spread over the window', () => {
    const { times } = runSchedule({ responseCode: '05' });
    expect(times.length).toBeGreaterThanOrEqual(6);
    for (const t of times) {
      expect(t.getUTCHours()).toBe(DEFAULT_RETRY_POLICY.attemptHourUtc);
      expect(isBusinessDay(t)).toBe(true);
    }
    const gaps = times.slice(1).map((t, i) => t.getTime() - times[i]!.getTime());
    expect(gaps[0]!).toBeLessThan(gaps[gaps.length - 1]!);
    expect(times[0]!.getTime() - T0.getTime()).toBeLessThanOrEqual(2 * DAY);
    expect(times[times.length - 1]!.getTime() - T0.getTime()).toBeGreaterThan(20 * DAY);
  });

  it('insufficient funds: every attempt on a payday morning', () => {
    const { times } = runSchedule({ responseCode: '51' });
    expect(times.length).toBeGreaterThanOrEqual(5);
    for (const t of times) {
      expect(isPayday(t), t.toISOString()).toBe(true);
      expect(t.getUTCHours()).toBe(DEFAULT_RETRY_POLICY.attemptHourUtc);
    }
  });

  it('first attempt from the original decline: funds wait for payday, technical within the hour, generic soon', () => {
    const wednesday = new Date('2026-03-11T01:00:00Z');
    const first = (responseCode: string) => {
      const p = firstAttemptAt(base({ startedAt: wednesday, now: wednesday, lastDecline: { responseCode } }));
      if (p.kind !== 'retry') throw new Error(p.reason);
      return p.at.toISOString();
    };
    expect(first('51')).toBe('2026-03-13T09:00:00.000Z'); // Friday
    expect(first('91')).toBe('2026-03-11T02:00:00.000Z');
    // Thursday morning, pulled to the payday right after it.
    expect(first('05')).toBe('2026-03-13T09:00:00.000Z');
    // Failed in the night of a payday: the same morning, once the salary has arrived.
    const payday = new Date('2026-04-01T00:30:00Z');
    const p = firstAttemptAt(base({ startedAt: payday, now: payday, lastDecline: { responseCode: '51' } }));
    expect(p.kind === 'retry' && p.at.toISOString()).toBe('2026-04-01T09:00:00.000Z');
  });

  it('technical errors retry within hours, with backoff', () => {
    const { times } = runSchedule({ technical: true });
    expect(times[0]!.getTime() - T0.getTime()).toBe(HOUR);
    expect(times[1]!.getTime() - times[0]!.getTime()).toBe(4 * HOUR);
    expect(times[2]!.getTime() - times[1]!.getTime()).toBe(12 * HOUR);
  });

  it('suspicious declines get 3 widely spaced attempts', () => {
    const { times, reason } = runSchedule({ responseCode: '59' });
    expect(times).toHaveLength(3);
    expect(reason).toMatch(/budget of 3/);
    for (let i = 1; i < times.length; i++)
      expect(times[i]!.getTime() - times[i - 1]!.getTime()).toBeGreaterThanOrEqual(3 * DAY);
  });

  it('stops on hard, data and authentication declines, and on MAC 03/21', () => {
    for (const responseCode of ['41', '14', 'R1', '54', '1A'])
      expect(planNextAttempt(base({ lastDecline: { responseCode } })).kind, responseCode).toBe('stop');
    for (const mac of ['03', '21', '01'])
      expect(
        planNextAttempt(base({ network: 'mastercard', lastDecline: { responseCode: '51', merchantAdviceCode: mac } }))
          .kind,
      ).toBe('stop');
  });

  it('stops when the card is blocked by an earlier transaction', () => {
    const history: CardAttempt[] = [
      { at: new Date(T0.getTime() - DAY), amountMinor: 5n, outcome: 'declined', responseCode: '41' },
    ];
    const p = planNextAttempt(base({ cardHistory: history }));
    expect(p).toMatchObject({ kind: 'stop' });
  });

  it('the window counts from the original failure', () => {
    const failed = new Date(T0.getTime() - 25 * DAY);
    const { times } = runSchedule({ responseCode: '05' }, { firstFailedAt: failed });
    expect(times.length).toBeLessThan(8);
    for (const t of times) expect(t.getTime() - failed.getTime()).toBeLessThanOrEqual(30 * DAY);
    const old = planNextAttempt(base({ firstFailedAt: new Date(T0.getTime() - 31 * DAY) }));
    expect(old).toMatchObject({ kind: 'stop', reason: expect.stringMatching(/window/) });
  });

  it('never plans into a network limit: MC 10 declines in a calendar day push the attempt to the next day', () => {
    const history: CardAttempt[] = Array.from({ length: 10 }, (_, i) => ({
      at: new Date(T0.getTime() - 10 * 60_000 * (10 - i)),
      amountMinor: 1n,
      outcome: 'declined',
      responseCode: '05',
    }));
    const p = planNextAttempt(base({ network: 'mastercard', lastDecline: { technical: true }, cardHistory: history }));
    if (p.kind !== 'retry') throw new Error(p.reason);
    expect(p.at.getTime()).toBeGreaterThanOrEqual(Date.parse('2026-03-10T00:00:00Z'));
    expect(checkNetworkLimits('mastercard', history, p.at, 1000n).allowed).toBe(true);
  });

  it('MAC 24-30: the next attempt waits for the advised delay, then takes the next slot', () => {
    const decline = { responseCode: '05', merchantAdviceCode: '30' };
    const history: CardAttempt[] = [{ at: T0, amountMinor: 1000n, outcome: 'declined', ...decline }];
    const p = planNextAttempt(
      base({ network: 'mastercard', attemptsMade: 1, lastDecline: decline, cardHistory: history }),
    );
    if (p.kind !== 'retry') throw new Error(p.reason);
    expect(p.at.getTime()).toBeGreaterThanOrEqual(T0.getTime() + 10 * DAY);
    expect(p.at.getUTCHours()).toBe(DEFAULT_RETRY_POLICY.attemptHourUtc);
  });

  it('Visa: a card near its 20-in-30-days limit waits until an attempt leaves the window', () => {
    const history: CardAttempt[] = Array.from({ length: 20 }, (_, i) => ({
      at: new Date(T0.getTime() - 20 * DAY + i * DAY),
      amountMinor: 1n,
      outcome: 'declined',
      responseCode: '05',
    }));
    const p = planNextAttempt(base({ cardHistory: history }));
    if (p.kind !== 'retry') throw new Error(p.reason);
    expect(p.at.getTime()).toBeGreaterThanOrEqual(T0.getTime() + 10 * DAY);
    expect(checkNetworkLimits('visa', history, p.at, 1000n).allowed).toBe(true);
  });

  it('accepts a policy override', () => {
    const { times } = runSchedule({ responseCode: '05' }, { config: { maxAttempts: 3 } });
    expect(times).toHaveLength(3);
  });
});

describe('RETRY_TIME_SCALE', () => {
  it('compresses the first delay exactly', () => {
    const slow = planNextAttempt(base());
    const fast = planNextAttempt(base({ timeScale: 1000 }));
    if (slow.kind !== 'retry' || fast.kind !== 'retry') throw new Error('expected retries');
    expect(fast.at.getTime() - T0.getTime()).toBe(Math.ceil((slow.at.getTime() - T0.getTime()) / 1000));
  });

  it('compresses the whole schedule: same attempts, same calendar, N times faster', () => {
    const scale = 1000;
    for (const decline of [{ responseCode: '05' }, { responseCode: '51' }, { technical: true as const }]) {
      const slow = runSchedule(decline).times;
      const fast = runSchedule(decline, { timeScale: scale }).times;
      expect(fast).toHaveLength(slow.length);
      // Real milliseconds are rounded up at each step: a few virtual seconds of drift at most.
      fast.forEach((t, i) =>
        expect(Math.abs(T0.getTime() + (t.getTime() - T0.getTime()) * scale - slow[i]!.getTime())).toBeLessThan(60_000),
      );
      expect(fast[fast.length - 1]!.getTime() - T0.getTime()).toBeLessThanOrEqual((30 * DAY) / scale);
    }
  });

  it('always terminates with a time strictly after now, whatever the scale and the moment', () => {
    let seed = 7;
    const rnd = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
    for (let i = 0; i < 300; i++) {
      const timeScale = [1, 2, 60, 1000, 1_000_000][i % 5]!;
      const startedAt = new Date(T0.getTime() + Math.floor(rnd() * 60 * DAY));
      const now = new Date(startedAt.getTime() + Math.floor((rnd() * 20 * DAY) / timeScale));
      const responseCode = ['05', '51', '91', '59'][i % 4]!;
      const p = planNextAttempt(
        base({ startedAt, now, timeScale, attemptsMade: i % 6, lastDecline: { responseCode } }),
      );
      if (p.kind === 'retry') expect(p.at.getTime()).toBeGreaterThan(now.getTime());
    }
  });

  it('rejects a non-positive scale', () => {
    expect(() => planNextAttempt(base({ timeScale: -1 }))).toThrow(RangeError);
  });
});
