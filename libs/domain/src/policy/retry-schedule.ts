import {
  classifyDecline,
  classifyProcessorError,
  type DeclineClassification,
  type Network,
  type WaitClass,
} from './decline-classifier';
import { checkNetworkLimits, validScale, type CardAttempt } from './network-limits';
import type { NetworkRuleSet } from './network-rules.config';
import { planAdaptive } from './adaptive-policy';
import type { SlotStat } from './attempt-slots';
import { DEFAULT_CARDHOLDER_TIME_ZONE } from './cardholder-time';
import { DEFAULT_LEARNER, type LearnerConfig } from './slot-learner';
import { isBusinessDay, isPayday, nextDayAt } from './payday-calendar';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/**
 * The default schedule, after the leaders (network-rules.md): Stripe tries 8 times, Recurly sees
 * 90% of its recoveries in the first 10 days, Adyen rescues cards for a month. So: a bounded budget
 * of attempts in a 30-day window, denser early, each placed where approvals are likelier.
 */
export interface RetryPolicyConfig {
  /** Recovery window, counted from the original failure. */
  windowDays: number;
  /** Attempt budget per transaction (the Visa limit of 20 per card stays far away). */
  maxAttempts: number;
  /** Smaller budgets for some classes: a suspicious decline gets few tries. */
  maxAttemptsByClass: Partial<Record<WaitClass, number>>;
  /**
   * Hour (UTC) of day-aligned attempts: overnight batch posting (salaries, transfers) is done in
   * Europe and on the US east coast by then, and it is early morning for US cardholders.
   */
  attemptHourUtc: number;
  /** Technical errors: backoff in hours for the first tries; then spaced like generic declines. */
  technicalBackoffHours: readonly number[];
  /** Generic declines: minimum days since the previous attempt, by attempt index (last repeats). */
  genericGapDays: readonly number[];
  /** Generic declines move to a payday if one is at most this many days after the slot. */
  paydayPullDays: number;
  /** Insufficient funds: minimum hours between attempts, by attempt index (last repeats). */
  fundsMinGapHours: readonly number[];
  /** Suspicious declines: minimum days since the previous attempt, by attempt index. */
  riskyGapDays: readonly number[];

  // ---- The adaptive policy (POLICY_VERSION, adaptive-policy.ts) ----
  /** Attempt budget by the ORIGINAL decline's class (maxAttemptsByClass still caps risky). */
  budgetByClass: Readonly<Record<string, number>>;
  /**
   * Latest cardholder-local day after the failure for attempt n (index n, last repeats): most
   * attempts land in the first ~10 days, while cardholders still want the service.
   */
  attemptDeadlineDays: readonly number[];
  /**
   * Score discount per day of waiting within an attempt's window: a later day must be clearly
   * better (a payday) to be chosen, since cardholders give up and all later attempts move later.
   */
  waitCostPerDay: number;
  /** Slots whose (drawn) approval rate is below this are not tried: late days that never pay. */
  minSlotRate: number;
  /** Minimum hours between two attempts (funds and generic; at most one attempt per local day). */
  minGapHours: number;
  /** Score factor of a generic-calendar payday (Fridays, 1st, 15th, last business day). */
  paydayBoost: number;
  /** Score factor of a payday predicted from the subscription's earlier successful charges. */
  patternPaydayBoost: number;
  /** Score factor of the local hour at which earlier charges went through. */
  paidHourBoost: number;
  /** Time zone when neither the billing address, the BIN country nor the merchant tell one. */
  fallbackTimeZone: string;
  /** Thompson sampling: prior strength and the cap on global-scope evidence. */
  learner: LearnerConfig;
}

export const DEFAULT_RETRY_POLICY: RetryPolicyConfig = {
  windowDays: 30,
  maxAttempts: 8,
  maxAttemptsByClass: { risky: 3 },
  attemptHourUtc: 9,
  technicalBackoffHours: [1, 4, 12],
  // Attempts near days 1, 3, 6, 10, 14, 19, 24, 29: dense early, never two on one day.
  genericGapDays: [0.5, 2, 3, 4, 4, 5, 5, 5],
  paydayPullDays: 1,
  // Every payday morning (Fridays, 1st, 15th, last business day), the first one as soon as possible.
  fundsMinGapHours: [1, 20],
  riskyGapDays: [3, 7, 10],
  // Near-daily for the first 13 days (money arrives on many calendars: weekly, biweekly, benefits,
  // gig income), then every 3 days: about half of what daily retries spend, most of it by day 10.
  budgetByClass: { funds: 18, generic: 15, technical: 8, risky: 3 },
  attemptDeadlineDays: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 19, 22, 25, 28],
  waitCostPerDay: 0.15,
  minSlotRate: 0.01,
  minGapHours: 16,
  paydayBoost: 1.6,
  patternPaydayBoost: 2.5,
  paidHourBoost: 1.5,
  fallbackTimeZone: DEFAULT_CARDHOLDER_TIME_ZONE,
  learner: DEFAULT_LEARNER,
};

/** Why a retry was planned where it is: the rule, the slot, the learned estimate behind it. */
export interface PlanExplanation {
  /** The rule that placed the attempt (e.g. 'learned slot', 'advice code delay', 'technical backoff'). */
  rule: string;
  slot: { dayAfterFailure: number; localHour: number; timeZone: string };
  /** Approval estimate of the slot: from the prior only, or with this merchant's / all outcomes. */
  estimate?: { mean: number; samples: number; source: 'prior' | 'merchant' | 'global' };
}

export type Plan =
  { kind: 'retry'; at: Date; reason: string; explain?: PlanExplanation } | { kind: 'stop'; reason: string };

/** Policy version of transactions planned before versions existed: the UTC heuristics below. */
export const LEGACY_POLICY_VERSION = 'utc-heuristics-2026-10';
/** The policy new transactions get (adaptive-policy.ts): cardholder-local, signal-aware, learning. */
export const POLICY_VERSION = 'adaptive-2026-11';

/** Which policy plans a transaction; recorded on the transaction so config changes never alter it. */
export interface PolicyChoice {
  version: string;
  /** Use learned slot statistics (Thompson sampling); false: the prior (today's heuristics) only. */
  learning: boolean;
  config?: Partial<RetryPolicyConfig>;
}

/** The latest outcome: a decline's codes, or a processor error (no decision). */
export type LastOutcome =
  | {
      responseCode: string;
      merchantAdviceCode?: string | null;
      technical?: false;
      /**
       * When the decline arrived (default `now`): it is judged by the network rules in force then
       * (network-rules.md dated changes). The original decline arrived at the transaction's `timestamp`.
       */
      at?: Date;
    }
  | { responseCode?: string; merchantAdviceCode?: null; technical: true };

export interface PlanInput {
  /** Retry attempts made so far on this transaction (0 before the first). */
  attemptsMade: number;
  /** When recovery started (the submission): the anchor of the time-scaled clock. */
  startedAt: Date;
  /** When the payment originally failed: the recovery window starts here (default startedAt). */
  firstFailedAt?: Date;
  now: Date;
  /** The latest decline (before attempt 1: the submitted auth_code) or processor error. */
  lastDecline: LastOutcome;
  network: Network | string | null | undefined;
  amountMinor: bigint;
  /** Every attempt on this card across transactions, for the network limits. */
  cardHistory: readonly CardAttempt[];
  /** Fingerprint of the card data the next attempt sends (see CardAttempt.cardDataVersion). */
  cardDataVersion?: string | null;
  /** RETRY_TIME_SCALE (default 1). */
  timeScale?: number;
  config?: Partial<RetryPolicyConfig>;
  rules?: NetworkRuleSet | readonly NetworkRuleSet[];

  // ---- Signals (all optional; without `policy` the legacy UTC schedule ignores them) ----
  /**
   * The policy that plans this transaction. Absent: LEGACY_POLICY_VERSION (what transactions in
   * flight before versions existed were planned with). POLICY_VERSION selects the adaptive policy.
   */
  policy?: PolicyChoice;
  /** Mastercard Merchant Advice Code of the ORIGINAL decline (network_advice_code, section 16). */
  originalAdviceCode?: string | null;
  /** Response code of the original decline (defaults to lastDecline's before the first attempt). */
  originalResponseCode?: string | null;
  /**
   * The transaction now charges another card than the one the original decline came from (the
   * account's next payment method, decisions §15): that decline's "never recovers" reading binds the
   * submitted card only. Its class still sets the budget and the learned slots.
   */
  originalOnAnotherCard?: boolean;
  /** When the original decline arrived (the transaction's `timestamp`): the rules of that day read it. */
  originalDeclinedAt?: Date;
  /** Billing address of the cardholder, for the local time zone. */
  cardholder?: { country?: string | null; postalCode?: string | null } | null;
  /** Card facts: BIN (6-8 digits), issuing country, 'credit' | 'debit' | 'prepaid', expiry YYYYMM. */
  card?: {
    bin?: string | null;
    binCountry?: string | null;
    fundingType?: string | null;
    expiry?: string | null;
    /** The account updater may renew the card before it is charged (decisions §15): its expiry ends nothing. */
    renewable?: boolean;
  } | null;
  /** Merchant's country, the time-zone fallback before the default zone. */
  merchantCountry?: string | null;
  /** Instants of this subscription's earlier successful charges (its pay calendar). */
  paidBefore?: readonly Date[];
  /** The account's other transactions at this merchant: approvals and declines. */
  accountOutcomes?: { approvals: number; declines: number } | null;
  /** Learned slot statistics (merchant scope and global scope) for the learner. */
  learned?: readonly SlotStat[];
  /** Random source in [0, 1) for Thompson sampling; seeded in tests and benches (default Math.random). */
  rng?: () => number;
}

/**
 * The defaults with overrides applied in order (a caller's `config`, then the policy choice's): the
 * per-class records (budgetByClass, maxAttemptsByClass) merge key by key, so a variant that names one
 * class changes that class only.
 */
export function policyConfig(...overrides: (Partial<RetryPolicyConfig> | undefined)[]): RetryPolicyConfig {
  let config: RetryPolicyConfig = DEFAULT_RETRY_POLICY;
  for (const o of overrides) {
    if (!o) continue;
    config = {
      ...config,
      ...o,
      budgetByClass: { ...config.budgetByClass, ...o.budgetByClass },
      maxAttemptsByClass: { ...config.maxAttemptsByClass, ...o.maxAttemptsByClass },
    };
  }
  return config;
}

/**
 * When the transaction's recovery window ends, in real time (RETRY_TIME_SCALE applied): the policy
 * plans nothing after it, so an attempt the network limits push past it is never made.
 */
export function recoveryWindowEnd(
  input: Pick<PlanInput, 'startedAt' | 'firstFailedAt' | 'timeScale' | 'config' | 'policy'>,
): Date {
  const adaptive = input.policy && input.policy.version !== LEGACY_POLICY_VERSION;
  const config = policyConfig(input.config, adaptive ? input.policy?.config : undefined);
  const scale = validScale(input.timeScale);
  const anchor = input.startedAt.getTime();
  const v = (input.firstFailedAt ?? input.startedAt).getTime() + config.windowDays * DAY;
  return new Date(v <= anchor ? v : anchor + Math.ceil((v - anchor) / scale));
}

/**
 * The next attempt of a transaction, or why there is none. The schedule is computed on a virtual
 * clock that runs `timeScale` times faster from `startedAt` (identical to real time at scale 1),
 * then mapped back: calendar targeting (paydays, hours) works the same in demos as in production,
 * and consecutive calls see the virtual days pass. Every candidate time is checked against the
 * card-network limits; a temporary limit pushes it to the next slot after `notBefore`.
 */
export function planNextAttempt(input: PlanInput): Plan {
  if (input.policy && input.policy.version !== LEGACY_POLICY_VERSION)
    return planAdaptive(
      input,
      policyConfig(input.config, input.policy.config),
      input.policy.learning,
      // An explicit maxAttempts (an experiment arm's) caps every class's budget; the default does not.
      input.policy.config?.maxAttempts ?? input.config?.maxAttempts,
    );
  const config = policyConfig(input.config);
  const scale = validScale(input.timeScale);
  const anchor = input.startedAt.getTime();
  const toVirtual = (t: number): number => (t <= anchor ? t : anchor + (t - anchor) * scale);
  const toReal = (v: number): number => (v <= anchor ? v : anchor + Math.ceil((v - anchor) / scale));

  const decline: DeclineClassification = input.lastDecline.technical
    ? classifyProcessorError()
    : classifyDecline(
        {
          network: input.network,
          responseCode: input.lastDecline.responseCode,
          merchantAdviceCode: input.lastDecline.merchantAdviceCode,
        },
        input.lastDecline.at ?? input.now,
      );
  if (!decline.retryable) return { kind: 'stop', reason: decline.reason };
  const waitClass = decline.waitClass;
  const budget = Math.min(config.maxAttempts, config.maxAttemptsByClass[waitClass] ?? Infinity);
  if (input.attemptsMade >= budget) return { kind: 'stop', reason: `attempt budget of ${budget} used` };

  const windowEnd = (input.firstFailedAt ?? input.startedAt).getTime() + config.windowDays * DAY;
  const nowReal = input.now.getTime();
  let v = nextSlot(config, waitClass, input.attemptsMade, toVirtual(nowReal));
  // Bounded: every round moves past a notBefore, and the window ends after a few.
  for (let round = 0; round < 50; round++) {
    if (v > windowEnd) return { kind: 'stop', reason: `recovery window of ${config.windowDays} days ends` };
    const at = new Date(Math.max(toReal(v), nowReal + 1));
    const check = checkNetworkLimits(
      { network: input.network, cardDataVersion: input.cardDataVersion },
      input.cardHistory,
      at,
      input.amountMinor,
      { timeScale: scale, rules: input.rules },
    );
    if (check.allowed) return { kind: 'retry', at, reason: decline.reason, explain: utcExplanation(input, config, v) };
    if (check.permanently) return { kind: 'stop', reason: check.rule };
    v = align(config, waitClass, Math.max(toVirtual(check.notBefore.getTime()), v + 1));
  }
  return { kind: 'stop', reason: 'network limits leave no slot in the recovery window' };
}

/** The first retry after the post-submission review, from the original decline (auth_code). */
export function firstAttemptAt(input: Omit<PlanInput, 'attemptsMade'>): Plan {
  return planNextAttempt({ ...input, attemptsMade: 0 });
}

/** Virtual time of the attempt after `attemptsMade` attempts, the previous one at `now`. */
function nextSlot(config: RetryPolicyConfig, waitClass: WaitClass, attemptsMade: number, now: number): number {
  switch (waitClass) {
    case 'technical': {
      // The outage is usually over within hours; after a few tries treat it like a generic decline.
      const hours = config.technicalBackoffHours[attemptsMade];
      if (hours !== undefined) return now + hours * HOUR;
      return align(config, 'generic', now + gapAt(config.genericGapDays, attemptsMade) * DAY);
    }
    case 'funds':
      return align(config, 'funds', now + gapAt(config.fundsMinGapHours, attemptsMade) * HOUR);
    case 'risky':
      return align(config, 'risky', now + gapAt(config.riskyGapDays, attemptsMade) * DAY);
    case 'generic':
      return align(config, 'generic', now + gapAt(config.genericGapDays, attemptsMade) * DAY);
    case 'never':
      throw new Error('no slot for a decline that must not be retried');
  }
}

/**
 * The first preferred time at or after `from`: insufficient funds on a payday morning (money has
 * just arrived); generic and risky declines on a business-day morning (issuers approve less on
 * weekends and at night), moved to a payday right after when there is one; technical: at once.
 */
function align(config: RetryPolicyConfig, waitClass: WaitClass, from: number): number {
  const hour = config.attemptHourUtc;
  if (waitClass === 'technical') return from;
  if (waitClass === 'funds') return nextDayAt(new Date(from), hour, isPayday).getTime();
  const slot = nextDayAt(new Date(from), hour, isBusinessDay);
  const payday = nextDayAt(slot, hour, isPayday);
  return payday.getTime() - slot.getTime() <= config.paydayPullDays * DAY ? payday.getTime() : slot.getTime();
}

const gapAt = (gaps: readonly number[], index: number): number => gaps[Math.min(index, gaps.length - 1)] ?? 0;

/** The legacy schedule's explanation: its rule and the slot in UTC. */
function utcExplanation(input: PlanInput, config: RetryPolicyConfig, virtualAt: number): PlanExplanation {
  const failed = (input.firstFailedAt ?? input.startedAt).getTime();
  const day = (t: number): number => Math.floor(t / DAY);
  const hour = new Date(virtualAt).getUTCHours();
  return {
    rule: `${LEGACY_POLICY_VERSION}: paydays and business days at ${config.attemptHourUtc}:00 UTC`,
    slot: { dayAfterFailure: Math.max(0, day(virtualAt) - day(failed)), localHour: hour, timeZone: 'UTC' },
  };
}
