import { DateTime } from 'luxon';
import { describe, expect, it } from 'vitest';
import { slotKeyFor, type SlotStat } from './attempt-slots';
import { checkNetworkLimits, type CardAttempt } from './network-limits';
import { inferPayPattern, isPatternPayday } from './pay-pattern';
import {
  DEFAULT_RETRY_POLICY,
  planNextAttempt,
  POLICY_VERSION,
  type LastOutcome,
  type Plan,
  type PlanInput,
  type RetryPolicyConfig,
} from './retry-schedule';
import { seededRng } from './slot-learner';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const adaptive = { version: POLICY_VERSION, learning: false };

const base = (failedAt: Date, over: Partial<PlanInput> = {}): PlanInput => ({
  attemptsMade: 0,
  startedAt: failedAt,
  firstFailedAt: failedAt,
  now: new Date(failedAt.getTime() + 10 * 60_000),
  lastDecline: { responseCode: '51' },
  network: 'visa',
  amountMinor: 1999n,
  cardHistory: [],
  policy: adaptive,
  ...over,
});

/** A whole schedule in which every attempt declines with `decline`. */
function schedule(failedAt: Date, decline: LastOutcome, over: Partial<PlanInput> = {}) {
  const plans: Extract<Plan, { kind: 'retry' }>[] = [];
  const history: CardAttempt[] = [];
  let now = new Date(failedAt.getTime() + 10 * 60_000);
  for (let n = 0; n < 40; n++) {
    const plan = planNextAttempt(
      base(failedAt, { ...over, attemptsMade: n, now, lastDecline: decline, cardHistory: history }),
    );
    if (plan.kind === 'stop') return { plans, reason: plan.reason };
    expect(plan.at.getTime()).toBeGreaterThan(now.getTime());
    plans.push(plan);
    history.push({
      at: plan.at,
      amountMinor: 1999n,
      outcome: 'declined',
      responseCode: decline.responseCode ?? null,
      merchantAdviceCode: decline.merchantAdviceCode ?? null,
    });
    now = plan.at;
  }
  throw new Error('schedule did not end');
}

const localOf = (at: Date, zone: string) => DateTime.fromJSDate(at, { zone });

describe('adaptive policy: cardholder-local time', () => {
  it.each([
    ['US', '94105', 'America/Los_Angeles'],
    ['US', '10001', 'America/New_York'],
    ['BR', '01310-100', 'America/Sao_Paulo'],
    ['JP', '100-0001', 'Asia/Tokyo'],
    ['IN', '110001', 'Asia/Kolkata'],
    ['AU', '6000', 'Australia/Perth'],
    ['AU', '2000', 'Australia/Sydney'],
  ])('%s %s: every attempt on a local morning in %s', (country, postalCode, zone) => {
    const failedAt = new Date('2026-03-10T02:00:00Z');
    const { plans } = schedule(failedAt, { responseCode: '05' }, { cardholder: { country, postalCode } });
    expect(plans.length).toBeGreaterThanOrEqual(6);
    for (const p of plans) {
      const local = localOf(p.at, zone);
      expect([7, 9], `${p.at.toISOString()} is ${local.toISO()}`).toContain(local.hour);
      expect(p.explain?.slot.timeZone).toBe(zone);
      expect(p.explain?.slot.localHour).toBe(local.hour - 1);
    }
  });

  it('keeps the local hour across DST changes (US spring forward and fall back, Sydney)', () => {
    for (const [failed, zone, country, postalCode] of [
      ['2026-03-05T15:00:00Z', 'America/New_York', 'US', '10001'],
      ['2026-10-27T15:00:00Z', 'America/Chicago', 'US', '60601'],
      ['2026-03-31T01:00:00Z', 'Australia/Sydney', 'AU', '2000'], // DST ends April 5
      ['2026-09-30T01:00:00Z', 'Australia/Sydney', 'AU', '2000'], // DST starts October 4
    ] as const) {
      const { plans } = schedule(new Date(failed), { responseCode: '05' }, { cardholder: { country, postalCode } });
      const offsets = new Set(plans.map((p) => localOf(p.at, zone).offset));
      expect(offsets.size, `${zone}: the schedule spans a DST change`).toBe(2);
      for (const p of plans) expect([7, 9]).toContain(localOf(p.at, zone).hour);
    }
  });

  it('counts days correctly over month ends and Feb 29', () => {
    // Monday Feb 28 2028, 23:00 in New York; Feb 29 (a Tuesday) is the month's last business day.
    const failedAt = new Date('2028-02-29T04:00:00Z');
    const first = planNextAttempt(base(failedAt, { cardholder: { country: 'US', postalCode: '10001' } }));
    if (first.kind !== 'retry') throw new Error(first.reason);
    const local = localOf(first.at, 'America/New_York');
    expect(local.toISODate()).toBe('2028-02-29');
    expect(first.explain).toMatchObject({ rule: 'prior slot on a likely payday', slot: { dayAfterFailure: 1 } });
    // January 31, evening in Los Angeles: the 1st is a payday.
    const jan = planNextAttempt(
      base(new Date('2027-02-01T03:00:00Z'), { cardholder: { country: 'US', postalCode: '94105' } }),
    );
    if (jan.kind !== 'retry') throw new Error(jan.reason);
    expect(localOf(jan.at, 'America/Los_Angeles').toISODate()).toBe('2027-02-01');
    expect(jan.explain?.slot.dayAfterFailure).toBe(1);
  });

  it('without address or BIN country: the documented fallback zone (America/New_York)', () => {
    const p = planNextAttempt(base(new Date('2026-03-10T02:00:00Z')));
    expect(p.kind === 'retry' && p.explain?.slot.timeZone).toBe('America/New_York');
    const bin = planNextAttempt(base(new Date('2026-03-10T02:00:00Z'), { card: { binCountry: 'DE' } }));
    expect(bin.kind === 'retry' && bin.explain?.slot.timeZone).toBe('Europe/Berlin');
  });
});

describe('adaptive policy: signals', () => {
  const failedAt = new Date('2026-06-01T14:00:00Z'); // a Monday

  it('front-loads: most attempts in the first 10 days', () => {
    for (const responseCode of ['05', '51']) {
      const { plans } = schedule(failedAt, { responseCode });
      const early = plans.filter((p) => p.at.getTime() - failedAt.getTime() <= 10 * DAY).length;
      expect(early / plans.length, responseCode).toBeGreaterThan(0.5);
      expect(plans.length).toBeLessThanOrEqual(
        DEFAULT_RETRY_POLICY.budgetByClass[responseCode === '05' ? 'generic' : 'funds']!,
      );
    }
  });

  it('stops at once on codes a retry never fixes (13 invalid amount, 62 restricted card)', () => {
    for (const responseCode of ['13', '62', '58', '93']) {
      const p = planNextAttempt(base(failedAt, { lastDecline: { responseCode } }));
      expect(p, responseCode).toMatchObject({ kind: 'stop', reason: expect.stringMatching(/does not change/) });
    }
    // A later decline with such a code stops too, and so does an original one.
    expect(planNextAttempt(base(failedAt, { attemptsMade: 2, lastDecline: { responseCode: '62' } })).kind).toBe('stop');
    expect(
      planNextAttempt(
        base(failedAt, { attemptsMade: 2, originalResponseCode: '13', lastDecline: { responseCode: '05' } }),
      ).kind,
    ).toBe('stop');
  });

  it('an original never-recovers code binds only its own card: another card of the account is planned', () => {
    for (const originalResponseCode of ['62', '13', '12']) {
      // A fresh card (the account's next payment method): planned like a cleared outage.
      const fresh = { originalResponseCode, lastDecline: { technical: true } as LastOutcome };
      expect(planNextAttempt(base(failedAt, fresh)).kind, originalResponseCode).toBe('stop');
      expect(planNextAttempt(base(failedAt, { ...fresh, originalOnAnotherCard: true })).kind).toBe('retry');
      // That card's own soft decline is retried as its class; its own never-recovers code still stops.
      const on = { originalResponseCode, originalOnAnotherCard: true, attemptsMade: 1 };
      expect(planNextAttempt(base(failedAt, { ...on, lastDecline: { responseCode: '51' } })).kind).toBe('retry');
      expect(planNextAttempt(base(failedAt, { ...on, lastDecline: { responseCode: '62' } })).kind).toBe('stop');
    }
  });

  it('obeys a MAC 24-30 delay of the original decline once: the first good slot after it, no payday wait', () => {
    for (const [mac, hours] of [
      ['25', 24],
      ['27', 96],
      ['30', 240],
    ] as const) {
      const p = planNextAttempt(
        base(failedAt, {
          network: 'mastercard',
          originalAdviceCode: mac,
          cardholder: { country: 'US', postalCode: '10001' },
        }),
      );
      if (p.kind !== 'retry') throw new Error(p.reason);
      const wait = p.at.getTime() - failedAt.getTime();
      expect(wait, mac).toBeGreaterThanOrEqual(hours * HOUR);
      expect(wait, mac).toBeLessThanOrEqual((hours + 30) * HOUR);
      expect(p.explain?.rule).toMatch(new RegExp(`advice code ${mac}`));
    }
    // The same for a MAC on a later attempt (the card history also guards it).
    const decline = { responseCode: '51', merchantAdviceCode: '28' };
    const history: CardAttempt[] = [{ at: failedAt, amountMinor: 1999n, outcome: 'declined', ...decline }];
    const later = planNextAttempt(
      base(failedAt, {
        network: 'mastercard',
        attemptsMade: 1,
        now: failedAt,
        lastDecline: decline,
        cardHistory: history,
      }),
    );
    if (later.kind !== 'retry') throw new Error(later.reason);
    expect(later.at.getTime() - failedAt.getTime()).toBeGreaterThanOrEqual(144 * HOUR);
    expect(later.at.getTime() - failedAt.getTime()).toBeLessThanOrEqual(174 * HOUR);
  });

  it('a stop advice code on the original decline stops', () => {
    const p = planNextAttempt(base(failedAt, { network: 'mastercard', originalAdviceCode: '21' }));
    expect(p.kind).toBe('stop');
  });

  it('learns the pay calendar from earlier successful charges (paid on the 3rd in the afternoon)', () => {
    const zone = 'America/Chicago';
    const paidBefore = ['2026-03-03T14:10', '2026-04-03T15:20', '2026-05-04T14:40'].map((s) =>
      DateTime.fromISO(s, { zone }).toJSDate(),
    );
    const pattern = inferPayPattern(paidBefore, zone);
    expect(pattern).toMatchObject({ daysOfMonth: [3], hour: 14, weekday: null });
    const { plans } = schedule(
      failedAt,
      { responseCode: '51' },
      { paidBefore, cardholder: { country: 'US', postalCode: '60601' } },
    );
    const onThe3rd = plans.filter((p) => localOf(p.at, zone).day === 3);
    expect(onThe3rd).toHaveLength(1);
    // June 3 is a Wednesday, not on the generic calendar: a payday by the pattern, at its hour.
    expect(onThe3rd[0]!.explain?.rule).toMatch(/payday/);
    expect(onThe3rd[0]!.explain?.slot.localHour).toBe(14);
    // Without that history the generic calendar applies: the 3rd is a plain morning.
    const generic = schedule(failedAt, { responseCode: '51' }, { cardholder: { country: 'US', postalCode: '60601' } });
    const plain = generic.plans.filter((p) => localOf(p.at, zone).day === 3);
    for (const p of plain) expect(p.explain?.rule).not.toMatch(/payday/);
  });

  it('detects a biweekly payday', () => {
    const zone = 'Europe/London';
    const paidBefore = ['2026-04-10T09:00', '2026-04-24T09:30', '2026-05-08T10:00', '2026-05-22T09:00'].map((s) =>
      DateTime.fromISO(s, { zone }).toJSDate(),
    );
    expect(inferPayPattern(paidBefore, zone)).toMatchObject({ weekday: 5, biweeklyAnchor: expect.any(Number) });
  });

  it('does not plan after the card expires; an expired card stops', () => {
    const { plans } = schedule(failedAt, { responseCode: '05' }, { card: { expiry: '202606' } });
    for (const p of plans) expect(p.at.getTime()).toBeLessThan(Date.parse('2026-07-01T04:00:00Z'));
    expect(planNextAttempt(base(failedAt, { card: { expiry: '202605' } })).kind).toBe('stop');
  });

  it('an expired card the account updater can renew is planned as usual (renewed before it is charged)', () => {
    expect(planNextAttempt(base(failedAt, { card: { expiry: '202605', renewable: true } })).kind).toBe('retry');
    const renewable = schedule(failedAt, { responseCode: '05' }, { card: { expiry: '202605', renewable: true } });
    expect(renewable.plans.length).toBe(schedule(failedAt, { responseCode: '05' }).plans.length);
  });

  it('reads a Visa 57 by the rules of the day it arrived (05 until 25 Oct 2026, category 1 from then)', () => {
    const submitted = new Date('2026-11-20T10:00:00Z');
    const declined = (at: string, over: Partial<PlanInput> = {}) =>
      planNextAttempt(base(submitted, { lastDecline: { responseCode: '57', at: new Date(at) }, ...over })).kind;
    expect(declined('2026-10-24T22:00:00Z')).toBe('retry');
    expect(declined('2026-10-25T02:00:00Z')).toBe('stop');
    // Later attempts: the original 57 of before the date does not stop the plan.
    const later = (originalDeclinedAt: string) =>
      planNextAttempt(
        base(submitted, {
          attemptsMade: 1,
          lastDecline: { responseCode: '51' },
          originalResponseCode: '57',
          originalDeclinedAt: new Date(originalDeclinedAt),
        }),
      ).kind;
    expect(later('2026-10-24T22:00:00Z')).toBe('retry');
    expect(later('2026-10-25T02:00:00Z')).toBe('stop');
  });

  it('an account that never pays gets a smaller budget', () => {
    const full = schedule(failedAt, { responseCode: '05' }).plans.length;
    const bad = schedule(failedAt, { responseCode: '05' }, { accountOutcomes: { approvals: 0, declines: 5 } }).plans
      .length;
    expect(bad).toBeLessThan(full);
  });

  it('explains every plan: rule, slot, prior estimate', () => {
    const p = planNextAttempt(base(failedAt, { lastDecline: { responseCode: '05' } }));
    expect(p).toMatchObject({
      kind: 'retry',
      reason: expect.any(String),
      explain: {
        rule: expect.stringMatching(/prior slot/),
        slot: { dayAfterFailure: expect.any(Number), localHour: expect.any(Number), timeZone: 'America/New_York' },
        estimate: { mean: expect.any(Number), samples: 0, source: 'prior' },
      },
    });
  });

  it('compresses with RETRY_TIME_SCALE and stays after now', () => {
    // The clock runs 1000 times faster from the start: plan at once (now = the failure).
    const p = planNextAttempt(base(failedAt, { timeScale: 1000, now: failedAt }));
    if (p.kind !== 'retry') throw new Error(p.reason);
    expect(p.at.getTime()).toBeGreaterThan(failedAt.getTime());
    expect(p.at.getTime() - failedAt.getTime()).toBeLessThan((2 * DAY) / 1000 + 60_000);
  });
});

describe("adaptive policy: a variant's settings (experiments)", () => {
  const failedAt = new Date('2026-06-01T14:00:00Z');
  const withConfig = (config: Partial<RetryPolicyConfig>): Partial<PlanInput>[] => [
    // As the service passes an arm's config (policy-inputs: `config`), and as a PolicyChoice carries it.
    { config },
    { policy: { ...adaptive, config } },
  ];

  it('an explicit maxAttempts caps the budget of every decline class', () => {
    for (const over of withConfig({ maxAttempts: 6 }))
      for (const responseCode of ['51', '05']) {
        const { plans, reason } = schedule(failedAt, { responseCode }, over);
        expect(plans.length, responseCode).toBe(6);
        expect(reason).toBe('attempt budget of 6 used');
      }
    // Together with budgetByClass: the smaller one.
    const both = schedule(
      failedAt,
      { responseCode: '51' },
      { config: { maxAttempts: 4, budgetByClass: { funds: 6 } } },
    );
    expect(both.plans.length).toBe(4);
  });

  it('a partial budgetByClass changes only the classes it names', () => {
    const plain = (responseCode: string) => schedule(failedAt, { responseCode }).plans.length;
    for (const over of withConfig({ budgetByClass: { funds: 6 } })) {
      const funds = schedule(failedAt, { responseCode: '51' }, over);
      expect(funds.plans.length).toBe(6);
      expect(funds.reason).toBe('attempt budget of 6 used');
      // Generic declines keep their default budget (15), not maxAttempts (8).
      expect(plain('05')).toBeGreaterThan(DEFAULT_RETRY_POLICY.maxAttempts);
      expect(schedule(failedAt, { responseCode: '05' }, over).plans.length).toBe(plain('05'));
    }
  });

  it('without overrides, the budgets by class stand (maxAttempts does not cap them)', () => {
    expect(schedule(failedAt, { responseCode: '51' }).plans.length).toBeGreaterThan(DEFAULT_RETRY_POLICY.maxAttempts);
  });
});

describe('adaptive policy: the learner', () => {
  /** A planted world: attempts at local day `day`, hour bucket `hour` approve with 60%, others 3%. */
  function bandit(day: number, hour: number, rounds: number, seed: number) {
    const rng = seededRng(seed);
    const worldRng = seededRng(seed + 1);
    const stats = new Map<string, SlotStat>();
    const chosen: { day: number; hour: number }[] = [];
    const zone = 'America/Chicago';
    for (let i = 0; i < rounds; i++) {
      const failedAt = new Date(Date.parse('2026-01-05T18:00:00Z') + (i % 90) * DAY + (i % 7) * HOUR);
      const p = planNextAttempt(
        base(failedAt, {
          lastDecline: { responseCode: '05' },
          cardholder: { country: 'US', postalCode: '60601' },
          policy: { version: POLICY_VERSION, learning: true, config: { attemptDeadlineDays: [5] } },
          learned: [...stats.values()],
          rng,
        }),
      );
      if (p.kind !== 'retry') throw new Error(p.reason);
      const key = slotKeyFor({
        declineClass: 'generic',
        country: 'US',
        binPrefix: null,
        failedAt,
        at: p.at,
        timeZone: zone,
      });
      expect(key.dayAfterFailure).toBe(p.explain?.slot.dayAfterFailure);
      expect(key.localHour).toBe(p.explain?.slot.localHour);
      const approved = worldRng() < (key.dayAfterFailure === day && key.localHour === hour ? 0.6 : 0.03);
      const id = `${key.dayAfterFailure}:${key.localHour}`;
      const s = stats.get(id) ?? {
        scope: 'merchant' as const,
        ...key,
        country: null,
        binPrefix: null,
        attempts: 0,
        approvals: 0,
      };
      s.attempts++;
      if (approved) s.approvals++;
      stats.set(id, s);
      chosen.push({ day: key.dayAfterFailure, hour: key.localHour });
    }
    return chosen;
  }

  it('converges on a planted pattern (day 3, 14:00-16:00 local) far from the prior (early mornings)', () => {
    const chosen = bandit(3, 14, 1500, 42);
    const hits = (xs: typeof chosen) => xs.filter((c) => c.day === 3 && c.hour === 14).length / xs.length;
    expect(hits(chosen.slice(0, 100))).toBeLessThan(0.2);
    expect(hits(chosen.slice(-300))).toBeGreaterThan(0.7);
  });

  it('stops when the learned rates of the remaining slots are under 1% (late days that never pay)', () => {
    const learned: SlotStat[] = [];
    for (let d = 0; d <= 30; d++)
      for (let h = 0; h < 24; h += 2)
        learned.push({
          scope: 'merchant',
          declineClass: 'funds',
          country: null,
          binPrefix: null,
          dayAfterFailure: d,
          localHour: h,
          attempts: 200,
          approvals: d < 8 ? 20 : 0,
        });
    const failedAt = new Date('2026-06-01T14:00:00Z');
    const { plans, reason } = schedule(
      failedAt,
      { responseCode: '51' },
      {
        learned,
        rng: seededRng(5),
        policy: { version: POLICY_VERSION, learning: true },
      },
    );
    expect(reason).toMatch(/no slot left/);
    for (const p of plans) expect(p.explain!.slot.dayAfterFailure).toBeLessThan(8);
  });

  it("other merchants' outcomes (global scope) reorder slots but never stop a merchant's recovery on their own", () => {
    const learned: SlotStat[] = [];
    for (let d = 0; d <= 30; d++)
      for (let h = 0; h < 24; h += 2)
        learned.push({
          scope: 'global',
          declineClass: 'funds',
          country: null,
          binPrefix: null,
          dayAfterFailure: d,
          localHour: h,
          attempts: 5000,
          approvals: 0,
        });
    const failedAt = new Date('2026-06-01T14:00:00Z');
    const plan = planNextAttempt(
      base(failedAt, {
        lastDecline: { responseCode: '51' },
        learned,
        rng: seededRng(5),
        policy: { version: POLICY_VERSION, learning: true },
      }),
    );
    expect(plan.kind).toBe('retry');
  });

  it('is deterministic with a seeded rng', () => {
    expect(bandit(2, 10, 200, 7)).toEqual(bandit(2, 10, 200, 7));
  });

  it('never proposes a slot the network rules refuse, whatever it learned', () => {
    const rng = seededRng(3);
    // Learned: day 0 at night is wonderful. The rules say otherwise for these cards.
    const learned: SlotStat[] = Array.from({ length: 12 }, (_, h) => ({
      scope: 'merchant',
      declineClass: 'funds',
      country: null,
      binPrefix: null,
      dayAfterFailure: 0,
      localHour: h * 2,
      attempts: 1000,
      approvals: h === 0 ? 900 : 10,
    }));
    const failedAt = new Date('2026-06-01T14:00:00Z');
    for (let i = 0; i < 300; i++) {
      const network = i % 2 ? 'mastercard' : 'visa';
      const now = new Date(failedAt.getTime() + Math.floor(rng() * 5 * DAY));
      const history: CardAttempt[] = Array.from({ length: Math.floor(rng() * 25) }, (_, k) => ({
        at: new Date(now.getTime() - Math.floor(rng() * 29 * DAY) - k),
        amountMinor: 1999n,
        outcome: 'declined' as const,
        responseCode: '51',
        merchantAdviceCode: rng() < 0.2 ? ['24', '25', '26', '27', '28', '29', '30'][Math.floor(rng() * 7)]! : null,
      }));
      const p = planNextAttempt(
        base(failedAt, {
          attemptsMade: i % 5,
          now,
          network,
          cardHistory: history,
          learned,
          rng,
          policy: { version: POLICY_VERSION, learning: true },
        }),
      );
      if (p.kind === 'retry') expect(checkNetworkLimits(network, history, p.at, 1999n).allowed).toBe(true);
    }
  });
});

describe('a monthly payday on a weekend is paid on the Friday before, in every month', () => {
  const monthly = (day: number) => ({
    weekday: null,
    biweeklyAnchor: null,
    daysOfMonth: [day],
    hour: null,
    samples: 4,
  });
  const on = (iso: string) => DateTime.fromISO(iso, { zone: 'UTC' });
  it.each([
    ['2024-06-28', 31, true], // June 2024 ends on Sunday 30th: paid Friday 28th
    ['2026-02-27', 31, true], // February 2026 ends on Saturday 28th: paid Friday 27th
    ['2026-02-28', 31, true], // its last day still counts
    ['2026-01-30', 31, true], // January 2026 ends on Saturday 31st: paid Friday 30th
    ['2026-05-29', 30, true], // the 30th on a Saturday: Friday 29th
    ['2026-02-27', 30, true], // the 30th does not exist in February: its last day (Saturday 28th), so Friday 27th
    ['2026-02-20', 31, false],
    ['2026-05-28', 31, false],
  ])('%s for a payday on day %i: %s', (iso, day, expected) => {
    expect(isPatternPayday(monthly(day), on(iso))).toBe(expected);
  });
});
