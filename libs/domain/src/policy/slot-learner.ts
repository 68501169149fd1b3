/**
 * The learner: Thompson sampling over attempt slots (local day after the failure x local 2-hour
 * bucket), per decline class. Each slot's approval rate has a Beta posterior:
 *   prior (today's heuristics: mornings, front-loaded days) with a fixed strength
 *   + this merchant's counted outcomes (full weight)
 *   + all merchants' outcomes (the global scope), capped so a merchant's own data soon dominates.
 * The rate is modelled as a day effect times an hour effect (rate(d, h) = day(d) * hour(h) / mean
 * hour), each with its own posterior over the marginal counts: 31 + 12 arms learn far faster than
 * 372 cells, and the hour effect (when deposits post) is what differs most between populations.
 * To choose, one draw per arm is scored and the best candidate slot wins; with `learning` off the
 * posterior means of the prior alone are used (deterministic, the cold-start heuristics).
 */
import { MAX_SLOT_DAY, SLOT_HOURS, type SlotStat } from './attempt-slots';

export const HOUR_BUCKETS = 24 / SLOT_HOURS;

export interface LearnerConfig {
  /** Pseudo-observations behind each prior day arm and hour arm. */
  priorStrength: number;
  /** At most this many global-scope observations per arm (scaled down beyond). */
  globalCap: number;
}

export const DEFAULT_LEARNER: LearnerConfig = { priorStrength: 30, globalCap: 300 };

/**
 * Prior approval rate of a retry on local day `d` after the failure, per decline class: what the
 * heuristics believe (technical errors clear within a day; funds and generic declines decay as
 * cardholders give up or cancel, so earlier is better).
 */
export function priorDayRate(declineClass: string, day: number): number {
  switch (declineClass) {
    case 'technical':
      return day === 0 ? 0.35 : 0.18 * Math.exp(-day / 10);
    case 'funds':
      return 0.09 * Math.exp(-day / 18);
    case 'risky':
      return 0.04 * Math.exp(-day / 15);
    default:
      return 0.1 * Math.exp(-day / 12);
  }
}

/**
 * Prior shape of the local hour (bucket start): best in the morning, once overnight deposits have
 * posted (06:00-10:00), fair during the day, poor at night (issuers' fraud rules, no new money).
 */
const HOUR_SHAPE = [0.45, 0.45, 0.6, 1.0, 1.0, 0.9, 0.85, 0.8, 0.75, 0.7, 0.6, 0.5];
export const priorHourShape = (bucketStart: number): number => HOUR_SHAPE[Math.floor(bucketStart / SLOT_HOURS)] ?? 0.5;

interface Arm {
  alpha: number;
  beta: number;
  merchant: number;
  global: number;
}

export interface SlotModel {
  declineClass: string;
  days: readonly Arm[];
  hours: readonly Arm[];
  /** Mean over hour arms of the posterior mean (the hour effect is relative to it). */
  hourMean: number;
}

export interface SlotDraw {
  /** Day and hour effects drawn (Thompson) or their posterior means. */
  day: readonly number[];
  hour: readonly number[];
}

/** Posterior arms of one decline class from the prior and the learned counts. */
export function buildSlotModel(
  declineClass: string,
  learned: readonly SlotStat[] | undefined,
  config: LearnerConfig = DEFAULT_LEARNER,
): SlotModel {
  const dayCounts = Array.from({ length: MAX_SLOT_DAY + 1 }, () => ({ m: [0, 0], g: [0, 0] }));
  const hourCounts = Array.from({ length: HOUR_BUCKETS }, () => ({ m: [0, 0], g: [0, 0] }));
  for (const s of learned ?? []) {
    if (s.declineClass !== declineClass || !(s.attempts > 0)) continue;
    const d = Math.max(0, Math.min(MAX_SLOT_DAY, Math.floor(s.dayAfterFailure)));
    const h = Math.max(0, Math.min(HOUR_BUCKETS - 1, Math.floor(s.localHour / SLOT_HOURS)));
    const approvals = Math.max(0, Math.min(s.attempts, s.approvals));
    const key = s.scope === 'merchant' ? 'm' : 'g';
    dayCounts[d]![key][0]! += s.attempts;
    dayCounts[d]![key][1]! += approvals;
    hourCounts[h]![key][0]! += s.attempts;
    hourCounts[h]![key][1]! += approvals;
  }
  // The class's overall rate scales the hour prior: the hour arm's mean is that rate times the shape.
  const base = priorDayRate(declineClass, 1);
  const arm = (priorMean: number, c: { m: number[]; g: number[] }): Arm => {
    const [gn, ga] = c.g as [number, number];
    const shrink = gn > config.globalCap ? config.globalCap / gn : 1;
    const [mn, ma] = c.m as [number, number];
    const n0 = config.priorStrength;
    const alpha = n0 * priorMean + ma + ga * shrink;
    const beta = n0 * (1 - priorMean) + (mn - ma) + (gn - ga) * shrink;
    return { alpha, beta, merchant: mn, global: gn };
  };
  const days = dayCounts.map((c, d) => arm(priorDayRate(declineClass, d), c));
  const hours = hourCounts.map((c, h) => arm(Math.min(0.95, base * priorHourShape(h * SLOT_HOURS)), c));
  const hourMean = hours.reduce((a, h) => a + h.alpha / (h.alpha + h.beta), 0) / hours.length;
  return { declineClass, days, hours, hourMean };
}

/** One Thompson draw of every arm (rng given), or the posterior means (rng null). */
export function drawSlotModel(model: SlotModel, rng: (() => number) | null): SlotDraw {
  const value = (a: Arm): number => (rng ? sampleBeta(a.alpha, a.beta, rng) : a.alpha / (a.alpha + a.beta));
  return { day: model.days.map(value), hour: model.hours.map(value) };
}

/** Score of slot (day, hour bucket start) under a draw: day effect times relative hour effect. */
export function slotScore(model: SlotModel, draw: SlotDraw, day: number, bucketStart: number): number {
  const d = Math.max(0, Math.min(MAX_SLOT_DAY, day));
  const h = Math.floor(bucketStart / SLOT_HOURS);
  return draw.day[d]! * (draw.hour[h]! / model.hourMean);
}

/** Posterior mean of a slot and the evidence behind it, for the plan's explanation. */
export function slotEstimate(
  model: SlotModel,
  day: number,
  bucketStart: number,
): { mean: number; samples: number; source: 'prior' | 'merchant' | 'global' } {
  const d = model.days[Math.max(0, Math.min(MAX_SLOT_DAY, day))]!;
  const h = model.hours[Math.floor(bucketStart / SLOT_HOURS)]!;
  const mean = (d.alpha / (d.alpha + d.beta)) * (h.alpha / (h.alpha + h.beta) / model.hourMean);
  const merchant = Math.min(d.merchant, h.merchant);
  const global = Math.min(d.global, h.global);
  const source = merchant > 0 && merchant >= global ? 'merchant' : global > 0 ? 'global' : 'prior';
  return { mean: Math.min(1, mean), samples: merchant + global, source };
}

// ---------------------------------------------------------------- Beta sampling

function sampleNormal(rng: () => number): number {
  const u = Math.max(rng(), 1e-12);
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rng());
}

/** Gamma(shape, 1) by Marsaglia and Tsang (shape < 1 boosted). */
function sampleGamma(shape: number, rng: () => number): number {
  if (shape < 1) return sampleGamma(shape + 1, rng) * Math.pow(Math.max(rng(), 1e-12), 1 / shape);
  const d = shape - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (;;) {
    let x: number;
    let v: number;
    do {
      x = sampleNormal(rng);
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const u = rng();
    if (u < 1 - 0.0331 * x ** 4) return d * v;
    if (Math.log(Math.max(u, 1e-300)) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v;
  }
}

export function sampleBeta(alpha: number, beta: number, rng: () => number): number {
  const x = sampleGamma(Math.max(alpha, 1e-3), rng);
  const y = sampleGamma(Math.max(beta, 1e-3), rng);
  return x + y > 0 ? x / (x + y) : 0.5;
}

/** mulberry32: a small seeded PRNG for deterministic sampling in tests and benches. */
export function seededRng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}
