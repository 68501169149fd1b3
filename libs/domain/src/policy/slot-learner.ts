/**
 * The learner: Thompson sampling over attempt slots (local day after the failure x local 2-hour
 * bucket), per decline class. The approval rate of a slot is a day effect times a relative hour
 * effect, rate(d, h) = day(d) * hour(h): the day rate has a Beta posterior, the hour ratio a Gamma
 * posterior, each fitted with the other held at its estimate. 31 + 12 arms learn far faster than
 * 372 cells, and the hour (when deposits post) is what differs most between populations. Evidence:
 *   prior (today's heuristics: mornings, front-loaded days) with a fixed strength
 *   + this merchant's counted outcomes (full weight)
 *   + all merchants' outcomes (the global scope), capped so a merchant's own data soon dominates.
 * To choose, one draw per arm is scored and the best candidate slot wins; with `learning` off the
 * posterior means of the prior alone are used (deterministic, the cold-start heuristics).
 */
import { MAX_SLOT_DAY, SLOT_HOURS, type SlotStat } from './attempt-slots';

export const HOUR_BUCKETS = 24 / SLOT_HOURS;

export interface LearnerConfig {
  /** Pseudo-observations behind each prior hour arm. */
  priorStrength: number;
  /**
   * Pseudo-observations behind each prior day arm: stronger, since the day a retry lands on is
   * mostly set by the front-loading deadlines, and day counts are confounded by who is still unpaid.
   */
  dayPriorStrength: number;
  /** At most this many global-scope observations per arm (scaled down beyond). */
  globalCap: number;
}

export const DEFAULT_LEARNER: LearnerConfig = { priorStrength: 60, dayPriorStrength: 100, globalCap: 300 };

/**
 * Prior approval rate of a retry on local day `d` after the failure, per decline class: what the
 * heuristics believe (technical errors clear within a day; funds and generic declines decay as
 * cardholders give up or cancel, so earlier is better).
 */
export function priorDayRate(declineClass: string, day: number): number {
  // The day of the failure itself: money rarely arrives within the same day, issuers repeat themselves.
  const sameDay = day === 0 ? 0.5 : 1;
  switch (declineClass) {
    case 'technical':
      return day === 0 ? 0.35 : 0.18 * Math.exp(-day / 10);
    case 'funds':
      return sameDay * 0.09 * Math.exp(-day / 18);
    case 'risky':
      return sameDay * 0.04 * Math.exp(-day / 15);
    default:
      return sameDay * 0.1 * Math.exp(-day / 12);
  }
}

/**
 * Prior shape of the local hour (bucket start): best in the morning, once overnight deposits have
 * posted (06:00-10:00), fair during the day, poor at night (issuers' fraud rules, no new money).
 */
const HOUR_SHAPE = [0.45, 0.45, 0.6, 1.0, 1.0, 0.9, 0.85, 0.8, 0.75, 0.7, 0.6, 0.5];
export const priorHourShape = (bucketStart: number): number => HOUR_SHAPE[Math.floor(bucketStart / SLOT_HOURS)] ?? 0.5;

interface Evidence {
  merchant: number;
  global: number;
}

/** Day arm: the approval rate at an average hour, Beta(alpha, beta). */
interface DayArm extends Evidence {
  alpha: number;
  beta: number;
}

/** Hour arm: the hour's rate relative to an average hour, Gamma(shape, rate). */
interface HourArm extends Evidence {
  shape: number;
  rate: number;
}

export interface SlotModel {
  declineClass: string;
  days: readonly DayArm[];
  hours: readonly HourArm[];
}

export interface SlotDraw {
  /** Day rates and relative hour effects drawn (Thompson) or their posterior means. */
  day: readonly number[];
  hour: readonly number[];
}

const HOUR_SHAPE_MEAN = HOUR_SHAPE.reduce((a, b) => a + b, 0) / HOUR_SHAPE.length;

/**
 * Posterior arms of one decline class from the prior and the learned counts. The model is
 * approvals(d, h) ~ attempts(d, h) * day(d) * hour(h): each effect is estimated with the other one
 * held at its estimate (two alternations), so the hours a policy happens to use on good days do
 * not take credit for those days, and the reverse.
 */
export function buildSlotModel(
  declineClass: string,
  learned: readonly SlotStat[] | undefined,
  config: LearnerConfig = DEFAULT_LEARNER,
): SlotModel {
  // Flat typed arrays, cell (d, h) at d * HOUR_BUCKETS + h: the retry worker builds one model per
  // recorded decline, so this runs thousands of times a second (the same sums, in the same order).
  const D = MAX_SLOT_DAY + 1;
  const H = HOUR_BUCKETS;
  const cn = new Float64Array(D * H);
  const ca = new Float64Array(D * H);
  const cgn = new Float64Array(D * H);
  const cga = new Float64Array(D * H);
  let globalTotal = 0;
  for (const s of learned ?? []) {
    if (s.declineClass !== declineClass || !(s.attempts > 0)) continue;
    const d = Math.max(0, Math.min(MAX_SLOT_DAY, Math.floor(s.dayAfterFailure)));
    const h = Math.max(0, Math.min(H - 1, Math.floor(s.localHour / SLOT_HOURS)));
    const approvals = Math.max(0, Math.min(s.attempts, s.approvals));
    const i = d * H + h;
    if (s.scope === 'merchant') {
      cn[i] += s.attempts;
      ca[i] += approvals;
    } else {
      cgn[i] += s.attempts;
      cga[i] += approvals;
      globalTotal += s.attempts;
    }
  }
  // All merchants' evidence counts for at most globalCap observations per hour arm on average.
  const w = globalTotal > config.globalCap * H ? (config.globalCap * H) / globalTotal : 1;
  const n = new Float64Array(D * H);
  const a = new Float64Array(D * H);
  const dayMerchant = new Float64Array(D);
  const dayGlobal = new Float64Array(D);
  const hourMerchant = new Float64Array(H);
  const hourGlobal = new Float64Array(H);
  for (let i = 0; i < D * H; i++) {
    n[i] = cn[i]! + w * cgn[i]!;
    a[i] = ca[i]! + w * cga[i]!;
    const d = Math.floor(i / H);
    const h = i % H;
    dayMerchant[d] += cn[i]!;
    dayGlobal[d] += cgn[i]!;
    hourMerchant[h] += cn[i]!;
    hourGlobal[h] += cgn[i]!;
  }

  const shape0 = priorHourShapes();
  // Hour prior strength in expected approvals: the hour arms' pseudo-attempts at the class's rate.
  const k0 = config.priorStrength * priorDayRate(declineClass, 1);
  const n0 = config.dayPriorStrength;
  const m0 = priorDayRates(declineClass);
  let hourMean: ArrayLike<number> = shape0;
  const dayMean = new Float64Array(D);
  const dayAlpha = new Float64Array(D);
  const dayBeta = new Float64Array(D);
  const hourShape = new Float64Array(H);
  const hourRate = new Float64Array(H);
  for (let round = 0; round < 2; round++) {
    for (let d = 0; d < D; d++) {
      let effective = 0;
      let approvals = 0;
      for (let h = 0; h < H; h++) {
        effective += n[d * H + h]! * hourMean[h]!;
        approvals += a[d * H + h]!;
      }
      dayAlpha[d] = n0 * m0[d]! + approvals;
      dayBeta[d] = n0 * (1 - m0[d]!) + Math.max(0, effective - approvals);
      dayMean[d] = dayAlpha[d]! / (dayAlpha[d]! + dayBeta[d]!);
    }
    const nextHourMean = new Float64Array(H);
    for (let h = 0; h < H; h++) {
      let expected = 0;
      let approvals = 0;
      for (let d = 0; d < D; d++) {
        expected += n[d * H + h]! * dayMean[d]!;
        approvals += a[d * H + h]!;
      }
      hourShape[h] = k0 * shape0[h]! + approvals;
      hourRate[h] = k0 + expected;
      nextHourMean[h] = hourShape[h]! / hourRate[h]!;
    }
    hourMean = nextHourMean;
  }
  const days: DayArm[] = Array.from({ length: D }, (_, d) => ({
    alpha: dayAlpha[d]!,
    beta: dayBeta[d]!,
    merchant: dayMerchant[d]!,
    global: dayGlobal[d]!,
  }));
  const hours: HourArm[] = Array.from({ length: H }, (_, h) => ({
    shape: hourShape[h]!,
    rate: hourRate[h]!,
    merchant: hourMerchant[h]!,
    global: hourGlobal[h]!,
  }));
  return { declineClass, days, hours };
}

/** The prior hour shapes relative to their mean, per bucket (constant: computed once). */
let hourShapes: Float64Array | undefined;
function priorHourShapes(): Float64Array {
  hourShapes ??= Float64Array.from(
    { length: HOUR_BUCKETS },
    (_, h) => priorHourShape(h * SLOT_HOURS) / HOUR_SHAPE_MEAN,
  );
  return hourShapes;
}

/** priorDayRate of every slot day, per decline class (constant: computed once per class). */
const dayRates = new Map<string, Float64Array>();
function priorDayRates(declineClass: string): Float64Array {
  let rates = dayRates.get(declineClass);
  if (!rates) {
    rates = Float64Array.from({ length: MAX_SLOT_DAY + 1 }, (_, d) => priorDayRate(declineClass, d));
    dayRates.set(declineClass, rates);
  }
  return rates;
}

/** One Thompson draw of every arm (rng given), or the posterior means (rng null). */
export function drawSlotModel(model: SlotModel, rng: (() => number) | null): SlotDraw {
  return {
    day: model.days.map((x) => (rng ? sampleBeta(x.alpha, x.beta, rng) : x.alpha / (x.alpha + x.beta))),
    hour: model.hours.map((x) => (rng ? sampleGamma(Math.max(x.shape, 1e-3), rng) / x.rate : x.shape / x.rate)),
  };
}

/** Score of slot (day, hour bucket start) under a draw: day rate times relative hour effect. */
export function slotScore(_model: SlotModel, draw: SlotDraw, day: number, bucketStart: number): number {
  const d = Math.max(0, Math.min(MAX_SLOT_DAY, day));
  const h = Math.floor(bucketStart / SLOT_HOURS);
  return draw.day[d]! * draw.hour[h]!;
}

/** Posterior mean of a slot and the evidence behind it (the merchant's own samples), for the plan's explanation. */
export function slotEstimate(
  model: SlotModel,
  day: number,
  bucketStart: number,
): { mean: number; samples: number; source: 'prior' | 'merchant' | 'global' } {
  const d = model.days[Math.max(0, Math.min(MAX_SLOT_DAY, day))]!;
  const h = model.hours[Math.floor(bucketStart / SLOT_HOURS)]!;
  const mean = (d.alpha / (d.alpha + d.beta)) * (h.shape / h.rate);
  const merchant = Math.min(d.merchant, h.merchant);
  const global = Math.min(d.global, h.global);
  const source = merchant > 0 && merchant >= global ? 'merchant' : global > 0 ? 'global' : 'prior';
  // Only the merchant's own count is shown (decisions §2: reads are scoped to the merchant); what
  // all merchants add shows as the source, never as their number of attempts.
  return { mean: Math.min(1, mean), samples: merchant, source };
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
