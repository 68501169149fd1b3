import { createHash } from 'node:crypto';
import { isNameable } from '../client-names';
import { unsafeTextDetail } from '../storable-text';
import { DEFAULT_RETRY_POLICY, LEGACY_POLICY_VERSION, POLICY_VERSION, type RetryPolicyConfig } from './retry-schedule';

/**
 * Policy experiments (issue 11): a merchant runs retry-policy variants side by side. Each new
 * transaction is assigned to one arm (a variant, or the holdout that keeps the merchant's default
 * policy) by a hash of the experiment and the transaction, so the assignment is sticky (the same
 * transaction always lands in the same arm) and needs no state. The arm is stored on the
 * transaction at intake with the policy version it plans with: changing or stopping an experiment
 * never alters transactions already in flight.
 */

/** The policy versions a variant can name. */
export const KNOWN_POLICY_VERSIONS: readonly string[] = [LEGACY_POLICY_VERSION, POLICY_VERSION];
/** The arm of transactions kept on the merchant's default policy (RETRY_POLICY), for comparison. */
export const HOLDOUT_ARM = 'holdout';
export const MAX_VARIANTS = 5;

export interface ExperimentVariant {
  /** Unique within the experiment; 1-64 of [A-Za-z0-9_.-], not `holdout`. */
  name: string;
  policy_version: string;
  /** Relative share of the non-holdout transactions (default 1). */
  weight: number;
  /** The adaptive policy's learner on (default) or off (plans with the prior alone). */
  learning: boolean;
  /** Overrides of the policy's tunables (RetryPolicyConfig keys), e.g. {"maxAttempts": 6}. */
  config: Partial<RetryPolicyConfig>;
}

export interface ExperimentDefinition {
  id: string;
  /** Share of transactions in the holdout arm, 0 to 0.5. */
  holdout_share: number;
  variants: readonly ExperimentVariant[];
}

const NAME = /^[A-Za-z0-9_.-]{1,64}$/;

/**
 * The tunables each policy reads (retry-schedule.ts, adaptive-policy.ts): a variant overrides only
 * these, since a setting its policy never reads would change nothing while looking like a variant.
 * (`budgetByClass` and the adaptive's scoring are the adaptive policy's; the UTC hour, the gaps by
 * class and the payday pull are the UTC schedule's.)
 */
export const POLICY_TUNABLES: Readonly<Record<string, readonly (keyof RetryPolicyConfig)[]>> = {
  [LEGACY_POLICY_VERSION]: [
    'windowDays',
    'maxAttempts',
    'maxAttemptsByClass',
    'attemptHourUtc',
    'technicalBackoffHours',
    'genericGapDays',
    'paydayPullDays',
    'fundsMinGapHours',
    'riskyGapDays',
  ],
  [POLICY_VERSION]: [
    'windowDays',
    'maxAttempts',
    'maxAttemptsByClass',
    'budgetByClass',
    'attemptDeadlineDays',
    'waitCostPerDay',
    'minSlotRate',
    'minGapHours',
    'paydayBoost',
    'patternPaydayBoost',
    'paidHourBoost',
    'riskyGapDays',
    'technicalBackoffHours',
  ],
};

/** A uniform number in [0, 1) from a stable hash: the sticky draw of one transaction in one experiment. */
export function stickyDraw(experimentId: string, transactionKey: string): number {
  const h = createHash('sha256').update(`${experimentId}\u0000${transactionKey}`).digest();
  // 48 bits are plenty for shares given to three decimals.
  return h.readUIntBE(0, 6) / 2 ** 48;
}

/** The arm of a transaction: `holdout` or a variant's name. Deterministic in (experiment, key). */
export function assignArm(exp: ExperimentDefinition, transactionKey: string): string {
  const u = stickyDraw(exp.id, transactionKey);
  if (u < exp.holdout_share) return HOLDOUT_ARM;
  // Rescale the rest of [holdout, 1) onto the variants by weight.
  const v = (u - exp.holdout_share) / (1 - exp.holdout_share);
  const total = exp.variants.reduce((s, x) => s + x.weight, 0);
  let acc = 0;
  for (const variant of exp.variants) {
    acc += variant.weight / total;
    if (v < acc) return variant.name;
  }
  return exp.variants[exp.variants.length - 1]!.name;
}

export type ParsedExperiment =
  | { ok: true; name: string; holdout_share: number; variants: ExperimentVariant[] }
  | { ok: false; field: string; detail: string };

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Longest recovery window a variant may ask for: twice the default, as the longest of the leaders (Stripe's 2 months). */
const MAX_WINDOW_DAYS = 60;
/**
 * What each tunable may be set to (every number of it, for lists and per-class maps), from 0. The
 * policies plan by walking days and hours up to these: an unbounded window or gap (a year, 1e9 days)
 * made a single plan walk every day of it in the shared retry-worker, or overflow a Date; an hour past
 * 23 or a factor past 1 where a share is meant is no policy at all.
 */
export const TUNABLE_LIMITS: Readonly<
  Record<
    Exclude<keyof RetryPolicyConfig, 'learner' | 'fallbackTimeZone'>,
    { max: number; integer?: true; min?: number }
  >
> = {
  windowDays: { min: 1, max: MAX_WINDOW_DAYS },
  // A card's network limit is 20 attempts in 30 days (network-rules.md); 0 tries nothing.
  maxAttempts: { max: 20, integer: true },
  maxAttemptsByClass: { max: 20, integer: true },
  budgetByClass: { max: 20, integer: true },
  attemptHourUtc: { max: 23, integer: true },
  technicalBackoffHours: { max: MAX_WINDOW_DAYS * 24 },
  genericGapDays: { max: MAX_WINDOW_DAYS },
  paydayPullDays: { max: 31 },
  fundsMinGapHours: { max: MAX_WINDOW_DAYS * 24 },
  riskyGapDays: { max: MAX_WINDOW_DAYS },
  attemptDeadlineDays: { max: MAX_WINDOW_DAYS },
  waitCostPerDay: { max: 1 },
  minSlotRate: { max: 1 },
  minGapHours: { max: MAX_WINDOW_DAYS * 24 },
  paydayBoost: { max: 100 },
  patternPaydayBoost: { max: 100 },
  paidHourBoost: { max: 100 },
};

/**
 * Why `value` may not replace the default tunable `key` (same type, arrays and maps of numbers, each
 * within TUNABLE_LIMITS), or null when it may.
 */
function overrideProblem(key: string, value: unknown): string | null {
  const base = (DEFAULT_RETRY_POLICY as unknown as Record<string, unknown>)[key];
  const limit = Object.hasOwn(TUNABLE_LIMITS, key) ? TUNABLE_LIMITS[key as keyof typeof TUNABLE_LIMITS] : undefined;
  if (base === undefined || limit === undefined) return 'is not a tunable of the policy';
  const range = `${limit.integer ? 'a whole number' : 'a number'} from ${limit.min ?? 0} to ${limit.max}`;
  const inRange = (x: unknown) =>
    typeof x === 'number' &&
    Number.isFinite(x) &&
    x >= (limit.min ?? 0) &&
    x <= limit.max &&
    (!limit.integer || Number.isInteger(x));
  if (typeof base === 'number') return inRange(value) ? null : `must be ${range}`;
  if (Array.isArray(base))
    return Array.isArray(value) && value.length > 0 && value.length <= 40 && value.every(inRange)
      ? null
      : `must be a list of 1 to 40 numbers, each ${range}`;
  if (isRecord(base))
    return isRecord(value) && Object.entries(value).every(([k, x]) => Object.hasOwn(base, k) && inRange(x))
      ? null
      : `must map ${Object.keys(base).join(', ')} to ${range}`;
  return 'is not a tunable of the policy';
}

/**
 * A stored variant's overrides that lie within TUNABLE_LIMITS. A variant created before the limits may
 * hold any number (a window of a million days): the planner takes the default for such a setting rather
 * than walk it, and keeps the variant's other settings.
 */
export function overridesWithinLimits(config: Partial<RetryPolicyConfig>): Partial<RetryPolicyConfig> {
  return Object.fromEntries(Object.entries(config).filter(([k, v]) => overrideProblem(k, v) === null));
}

/** Validates an experiment as a merchant submits it (API body or CLI options). */
export function parseExperiment(body: unknown): ParsedExperiment {
  if (!isRecord(body)) return { ok: false, field: 'body', detail: 'must be a JSON object' };
  const name = body['name'];
  if (typeof name !== 'string' || name.trim().length === 0 || name.length > 100)
    return { ok: false, field: 'name', detail: 'must be a string of 1 to 100 characters' };
  // Postgres refuses NUL and would store an unpaired surrogate as U+FFFD.
  const unsafe = unsafeTextDetail(name);
  if (unsafe !== null) return { ok: false, field: 'name', detail: unsafe };
  const holdout = body['holdout_share'] ?? 0;
  // Stored as numeric(4,3): a fourth decimal would be rounded away unseen.
  if (
    typeof holdout !== 'number' ||
    !Number.isFinite(holdout) ||
    holdout < 0 ||
    holdout > 0.5 ||
    Math.round(holdout * 1000) / 1000 !== holdout
  )
    return { ok: false, field: 'holdout_share', detail: 'must be a number from 0 to 0.5 with at most 3 decimals' };
  const list = body['variants'];
  if (!Array.isArray(list) || list.length < 1 || list.length > MAX_VARIANTS)
    return { ok: false, field: 'variants', detail: `must be an array of 1 to ${MAX_VARIANTS} variants` };
  if (list.length === 1 && holdout === 0)
    return { ok: false, field: 'variants', detail: 'one variant needs a holdout_share above 0 to compare with' };
  const variants: ExperimentVariant[] = [];
  for (const [i, raw] of list.entries()) {
    const f = (k: string): string => `variants[${i}].${k}`;
    if (!isRecord(raw)) return { ok: false, field: `variants[${i}]`, detail: 'must be an object' };
    const vName = raw['name'];
    if (typeof vName !== 'string' || !NAME.test(vName) || vName === HOLDOUT_ARM)
      return { ok: false, field: f('name'), detail: 'must be 1-64 of A-Z a-z 0-9 _ . - and not "holdout"' };
    if (variants.some((v) => v.name === vName)) return { ok: false, field: f('name'), detail: 'is repeated' };
    const version = raw['policy_version'];
    if (typeof version !== 'string' || !KNOWN_POLICY_VERSIONS.includes(version))
      return { ok: false, field: f('policy_version'), detail: `must be one of ${KNOWN_POLICY_VERSIONS.join(', ')}` };
    const weight = raw['weight'] ?? 1;
    if (typeof weight !== 'number' || !Number.isFinite(weight) || weight <= 0 || weight > 1000)
      return { ok: false, field: f('weight'), detail: 'must be a number above 0 and at most 1000' };
    const learning = raw['learning'] ?? true;
    if (typeof learning !== 'boolean') return { ok: false, field: f('learning'), detail: 'must be a boolean' };
    const config = raw['config'] ?? {};
    if (!isRecord(config)) return { ok: false, field: f('config'), detail: 'must be an object' };
    for (const [k, v] of Object.entries(config)) {
      const problem = overrideProblem(k, v);
      if (problem !== null)
        return {
          ok: false,
          // The key is the client's: named only when it cannot be card data (decisions §10).
          field: isNameable(k) ? `${f('config')}.${k}` : `${f('config')} key`,
          detail: problem,
        };
      if (!(POLICY_TUNABLES[version] ?? []).includes(k as keyof RetryPolicyConfig))
        return { ok: false, field: `${f('config')}.${k}`, detail: `is not read by the policy ${version}` };
    }
    variants.push({
      name: vName,
      policy_version: version,
      weight,
      learning,
      config: config as Partial<RetryPolicyConfig>,
    });
  }
  return { ok: true, name: name.trim(), holdout_share: holdout, variants };
}

// ---------------------------------------------------------------- confidence intervals

const Z95 = 1.959964;

/** Wilson score interval of a proportion (95%): good at small counts and near 0 or 1. */
export function wilsonInterval(successes: number, n: number, z = Z95): { rate: number; low: number; high: number } {
  if (n <= 0) return { rate: 0, low: 0, high: 0 };
  const p = successes / n;
  const z2 = z * z;
  const centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const half = (z * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n))) / (1 + z2 / n);
  return { rate: p, low: Math.max(0, centre - half), high: Math.min(1, centre + half) };
}

/**
 * Mean and 95% interval (normal approximation, sample variance) of a per-transaction value from its
 * count, sum and sum of squares: recovered amount per transaction of one arm and currency.
 */
export function meanInterval(
  n: number,
  sum: number,
  sumSquares: number,
  z = Z95,
): { mean: number; low: number; high: number } {
  if (n <= 0) return { mean: 0, low: 0, high: 0 };
  const mean = sum / n;
  if (n < 2) return { mean, low: mean, high: mean };
  const variance = Math.max(0, (sumSquares - n * mean * mean) / (n - 1));
  const half = z * Math.sqrt(variance / n);
  return { mean, low: Math.max(0, mean - half), high: mean + half };
}

/**
 * Difference of two proportions (a − b) with its 95% interval: Newcombe's hybrid score interval
 * (Statistics in Medicine 17, 1998, method 10), built from each arm's Wilson interval. Welch's normal
 * approximation (differenceInterval) sees no variance in an arm that recovered none or all of its
 * transactions, and answered a zero-width interval there ([1, 1] for 4 of 4 against 0 of 4): a
 * certain difference from a handful of transactions. Null when an arm has fewer than 2.
 */
export function rateDifferenceInterval(
  successesA: number,
  nA: number,
  successesB: number,
  nB: number,
  z = Z95,
): { difference: number; low: number; high: number } | null {
  if (nA < 2 || nB < 2) return null;
  const a = wilsonInterval(successesA, nA, z);
  const b = wilsonInterval(successesB, nB, z);
  const difference = a.rate - b.rate;
  return {
    difference,
    low: Math.max(-1, difference - Math.sqrt((a.rate - a.low) ** 2 + (b.high - b.rate) ** 2)),
    high: Math.min(1, difference + Math.sqrt((a.high - a.rate) ** 2 + (b.rate - b.low) ** 2)),
  };
}

/** Count, sum and sum of squares of a per-transaction value (0/1 for a rate). */
export interface Moments {
  n: number;
  sum: number;
  sumSquares: number;
}

/** Difference of two means (a − b) with its 95% interval (Welch's normal approximation). */
export function differenceInterval(
  a: Moments,
  b: Moments,
  z = Z95,
): { difference: number; low: number; high: number } | null {
  if (a.n < 2 || b.n < 2) return null;
  const variance = (x: Moments): number => {
    const mean = x.sum / x.n;
    return Math.max(0, (x.sumSquares - x.n * mean * mean) / (x.n - 1));
  };
  const difference = a.sum / a.n - b.sum / b.n;
  const half = z * Math.sqrt(variance(a) / a.n + variance(b) / b.n);
  return { difference, low: difference - half, high: difference + half };
}
