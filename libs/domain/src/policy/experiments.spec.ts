import { describe, expect, it } from 'vitest';
import {
  assignArm,
  HOLDOUT_ARM,
  meanInterval,
  parseExperiment,
  stickyDraw,
  wilsonInterval,
  type ExperimentDefinition,
} from './experiments';
import { LEGACY_POLICY_VERSION, POLICY_VERSION } from './retry-schedule';

const variant = (name: string, weight = 1, policy_version = POLICY_VERSION) => ({
  name,
  policy_version,
  weight,
  learning: true,
  config: {},
});

describe('sticky experiment assignment', () => {
  const exp: ExperimentDefinition = {
    id: 'exp_1',
    holdout_share: 0.1,
    variants: [variant('adaptive'), variant('legacy', 1, LEGACY_POLICY_VERSION)],
  };

  it('gives the same transaction the same arm every time, whatever else was assigned', () => {
    const ids = Array.from({ length: 500 }, (_, i) => `txn-${i}`);
    const first = ids.map((id) => assignArm(exp, id));
    const again = [...ids]
      .reverse()
      .map((id) => assignArm(exp, id))
      .reverse();
    expect(again).toEqual(first);
  });

  it('splits by the holdout share and the weights', () => {
    const n = 20_000;
    const counts = new Map<string, number>();
    for (let i = 0; i < n; i++) {
      const arm = assignArm({ ...exp, variants: [variant('a', 3), variant('b', 1)] }, `t${i}`);
      counts.set(arm, (counts.get(arm) ?? 0) + 1);
    }
    // holdout 10%, then a:b = 3:1 of the remaining 90%
    expect(counts.get(HOLDOUT_ARM)! / n).toBeCloseTo(0.1, 1);
    expect(counts.get('a')! / n).toBeCloseTo(0.675, 1);
    expect(counts.get('b')! / n).toBeCloseTo(0.225, 1);
  });

  it('draws independently per experiment (a transaction is not always first in every experiment)', () => {
    const a = Array.from({ length: 200 }, (_, i) => stickyDraw('exp_a', `t${i}`));
    const b = Array.from({ length: 200 }, (_, i) => stickyDraw('exp_b', `t${i}`));
    const same = a.filter((x, i) => x < 0.5 === b[i]! < 0.5).length;
    expect(same).toBeGreaterThan(60);
    expect(same).toBeLessThan(140);
    for (const x of a) expect(x >= 0 && x < 1).toBe(true);
  });

  it('never assigns the holdout when its share is 0', () => {
    const noHoldout = { ...exp, holdout_share: 0 };
    for (let i = 0; i < 1000; i++) expect(assignArm(noHoldout, `t${i}`)).not.toBe(HOLDOUT_ARM);
  });
});

describe('experiment validation', () => {
  it('accepts every tunable at the ends of its range', () => {
    const ends = {
      windowDays: 60,
      maxAttempts: 20,
      maxAttemptsByClass: { risky: 0 },
      budgetByClass: { funds: 20, generic: 0 },
      attemptDeadlineDays: [0, 60],
      technicalBackoffHours: [0, 1440],
      waitCostPerDay: 1,
      minSlotRate: 0,
      minGapHours: 1440,
      paydayBoost: 100,
    };
    const r = parseExperiment({ name: 'x', variants: [variant('a'), { ...variant('b'), config: ends }] });
    expect(r.ok && r.variants[1]!.config).toEqual(ends);
  });

  it('accepts variants with versions, weights and tunables', () => {
    const r = parseExperiment({
      name: 'fewer attempts',
      holdout_share: 0.2,
      variants: [
        { name: 'six', policy_version: POLICY_VERSION, weight: 2, config: { maxAttempts: 6 } },
        { name: 'old', policy_version: LEGACY_POLICY_VERSION },
      ],
    });
    expect(r).toEqual({
      ok: true,
      name: 'fewer attempts',
      holdout_share: 0.2,
      variants: [
        { name: 'six', policy_version: POLICY_VERSION, weight: 2, learning: true, config: { maxAttempts: 6 } },
        { name: 'old', policy_version: LEGACY_POLICY_VERSION, weight: 1, learning: true, config: {} },
      ],
    });
  });

  it.each([
    [{ variants: [variant('a')] }, 'name'],
    [{ name: 'x', holdout_share: 0.9, variants: [variant('a')] }, 'holdout_share'],
    // Stored with three decimals (numeric(4,3)): 0.1235 would be kept and shown as 0.124.
    [{ name: 'x', holdout_share: 0.1235, variants: [variant('a')] }, 'holdout_share'],
    [{ name: 'x', variants: [] }, 'variants'],
    [{ name: 'x', variants: [variant('a')] }, 'variants'],
    [{ name: 'x', variants: [variant('a'), variant('a')] }, 'variants[1].name'],
    [{ name: 'x', variants: [variant('holdout'), variant('b')] }, 'variants[0].name'],
    [{ name: 'x', variants: [variant('a'), { ...variant('b'), policy_version: 'v9' }] }, 'variants[1].policy_version'],
    [{ name: 'x', variants: [variant('a'), { ...variant('b'), weight: 0 }] }, 'variants[1].weight'],
    [{ name: 'x', variants: [variant('a'), { ...variant('b'), config: { nope: 1 } }] }, 'variants[1].config.nope'],
    [
      { name: 'x', variants: [variant('a'), { ...variant('b'), config: { maxAttempts: '6' } }] },
      'variants[1].config.maxAttempts',
    ],
    // Settings the variant's policy never reads would silently do nothing: refused.
    [
      { name: 'x', variants: [variant('a'), { ...variant('b'), config: { attemptHourUtc: 10 } }] },
      'variants[1].config.attemptHourUtc',
    ],
    [
      {
        name: 'x',
        holdout_share: 0.1,
        variants: [{ ...variant('a', 1, LEGACY_POLICY_VERSION), config: { budgetByClass: { funds: 6 } } }],
      },
      'variants[0].config.budgetByClass',
    ],
    [
      {
        name: 'x',
        holdout_share: 0.1,
        variants: [{ ...variant('a', 1, LEGACY_POLICY_VERSION), config: { paydayBoost: 2 } }],
      },
      'variants[0].config.paydayBoost',
    ],
    // Out of range: a window or deadline the planner would walk day by day, a fraction above 1.
    ...(
      [
        [{ windowDays: 365_000 }, 'windowDays'],
        [{ windowDays: 0 }, 'windowDays'],
        [{ maxAttempts: 6.5 }, 'maxAttempts'],
        [{ maxAttempts: 21 }, 'maxAttempts'],
        [{ attemptDeadlineDays: [1, 61] }, 'attemptDeadlineDays'],
        [{ technicalBackoffHours: [1, -1] }, 'technicalBackoffHours'],
        [{ waitCostPerDay: 1.5 }, 'waitCostPerDay'],
        [{ minSlotRate: 2 }, 'minSlotRate'],
        [{ budgetByClass: { funds: 21 } }, 'budgetByClass'],
        [{ minGapHours: 1e9 }, 'minGapHours'],
        // A key every object answers to (`in` finds it on the prototype) is no decline class.
        [{ budgetByClass: { toString: 1 } }, 'budgetByClass'],
      ] as const
    ).map(([config, key]): [unknown, string] => [
      { name: 'x', variants: [variant('a'), { ...variant('b'), config }] },
      `variants[1].config.${key}`,
    ]),
  ])('refuses %j at %s', (body, field) => {
    const r = parseExperiment(body);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.field).toBe(field);
  });
});

describe('confidence intervals', () => {
  it('Wilson interval of a proportion matches the textbook value', () => {
    // 40 of 100: 95% Wilson interval 0.3094 to 0.4980
    const w = wilsonInterval(40, 100);
    expect(w.rate).toBe(0.4);
    expect(w.low).toBeCloseTo(0.3094, 3);
    expect(w.high).toBeCloseTo(0.498, 3);
    expect(wilsonInterval(0, 0)).toEqual({ rate: 0, low: 0, high: 0 });
  });

  it('mean interval from count, sum and sum of squares', () => {
    const xs = [0, 0, 10, 20, 0, 30, 0, 0, 10, 30];
    const sum = xs.reduce((a, b) => a + b, 0);
    const sq = xs.reduce((a, b) => a + b * b, 0);
    const m = meanInterval(xs.length, sum, sq);
    expect(m.mean).toBe(10);
    // sample sd = 12.47; half width 1.96 * 12.47 / sqrt(10) = 7.73
    expect(m.high - m.mean).toBeCloseTo(7.73, 1);
    expect(m.low).toBeCloseTo(2.27, 1);
  });
});
