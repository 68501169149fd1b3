/**
 * The adaptive retry policy (POLICY_VERSION): every attempt is placed in the cardholder's LOCAL
 * time, in the slot (local day after the failure x local 2-hour bucket) that scores best under a
 * Thompson draw of the learned approval rates (slot-learner.ts), weighted by the cardholder's
 * likely paydays (pay-pattern.ts). Each attempt n has a latest local day (front-loading), and a
 * budget by decline class. The network rules are a hard guard: every proposed slot is checked with
 * checkNetworkLimits and a refused slot is never returned.
 *
 * Signals used: original decline and Mastercard advice code (a MAC 24-30 delay is THE wait: the
 * first good hour after it, no payday wait on top), card network, funding type (credit limits do not
 * follow paydays), BIN / billing address (time zone), card expiry (no attempt after the card
 * expires), paidBefore (pay calendar and hour), the account's other outcomes (an account that never
 * pays gets a smaller budget). Codes that a retry never fixes stop at once (never-recover.ts).
 */
import { DateTime } from 'luxon';
import { cachedZone } from './zone-cache';
import { declineClassOf, localDaysBetween, MAX_SLOT_DAY, SLOT_HOURS } from './attempt-slots';
import { timeZoneFor } from './cardholder-time';
import { classifyDecline, classifyProcessorError, normalizeNetwork } from './decline-classifier';
import { checkNetworkLimits, validScale } from './network-limits';
import { normalizeCode, ruleSetAt, visaCodeAsRead } from './network-rules.config';
import { neverRecovers } from './never-recover';
import { inferPayPattern, isGenericPayday, isPatternPayday, type PayPattern } from './pay-pattern';
import type { Plan, PlanExplanation, PlanInput, RetryPolicyConfig } from './retry-schedule';
import { buildSlotModel, drawSlotModel, HOUR_BUCKETS, slotEstimate, slotScore } from './slot-learner';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

interface Candidate {
  day: number;
  bucket: number;
  score: number;
  payday: boolean;
}

/**
 * `maxAttempts`: an explicit attempt budget (a variant's `maxAttempts`), capping the budget of every
 * class; without it each class has its own (`budgetByClass`, `config.maxAttempts` for a class it
 * does not name).
 */
export function planAdaptive(
  input: PlanInput,
  config: RetryPolicyConfig,
  learning: boolean,
  maxAttempts?: number,
): Plan {
  const scale = validScale(input.timeScale);
  const anchor = input.startedAt.getTime();
  const toVirtual = (t: number): number => (t <= anchor ? t : anchor + (t - anchor) * scale);
  const toReal = (v: number): number => (v <= anchor ? v : anchor + Math.ceil((v - anchor) / scale));
  const nowReal = input.now.getTime();
  const nowV = toVirtual(nowReal);
  const failedAt = (input.firstFailedAt ?? input.startedAt).getTime();
  const network = normalizeNetwork(input.network);
  const last = input.lastDecline;

  // The original decline's advice code binds the first attempt (section 16).
  const mac = last.technical
    ? null
    : (last.merchantAdviceCode ?? (input.attemptsMade === 0 ? input.originalAdviceCode : null) ?? null);
  const decline = last.technical
    ? classifyProcessorError()
    : classifyDecline({ network, responseCode: last.responseCode, merchantAdviceCode: mac }, last.at ?? input.now);
  if (!decline.retryable) return { kind: 'stop', reason: decline.reason };
  const originalCode =
    input.originalResponseCode ?? (input.attemptsMade === 0 && !last.technical ? last.responseCode : null);
  // Codes are read as the rules of their day read them (a Visa 57 arrived as 05 until 25 Oct 2026).
  const asRead = (code: string | null, at: Date): string | null =>
    code === null || network !== 'visa' ? code : visaCodeAsRead(code, at);
  const lastAt = (!last.technical && last.at) || input.now;
  const originalAt = input.originalDeclinedAt ?? (input.attemptsMade === 0 ? lastAt : input.now);
  // The original decline's "never recovers" binds the card it came from, not one moved to since.
  const never =
    neverRecovers(last.technical ? null : asRead(last.responseCode, lastAt)) ??
    (input.originalOnAnotherCard ? null : neverRecovers(asRead(originalCode, originalAt)));
  if (never) return { kind: 'stop', reason: never };

  // Slots are learned under the ORIGINAL decline's class (stable for the whole transaction).
  let learnClass = originalCode
    ? declineClassOf(network, originalCode, input.originalAdviceCode, new Date(failedAt))
    : decline.waitClass;
  if (learnClass === 'never') learnClass = decline.waitClass;

  let budget = config.budgetByClass[learnClass] ?? config.maxAttempts;
  if (maxAttempts !== undefined) budget = Math.min(budget, maxAttempts);
  if (decline.waitClass === 'risky') budget = Math.min(budget, config.maxAttemptsByClass.risky ?? budget);
  const account = input.accountOutcomes;
  if (account && account.approvals === 0 && account.declines >= 3) budget = Math.ceil(budget * 0.6);
  if (input.attemptsMade >= budget) return { kind: 'stop', reason: `attempt budget of ${budget} used` };

  const zone = timeZoneFor({
    cardholder: input.cardholder,
    card: input.card,
    merchantCountry: input.merchantCountry,
    fallback: config.fallbackTimeZone,
  }).timeZone;

  let windowEnd = failedAt + config.windowDays * DAY;
  // A card the account updater can renew is renewed before it is charged: its expiry ends nothing.
  const expiresAt = input.card?.renewable ? null : expiryEnd(input.card?.expiry, zone);
  if (expiresAt !== null) {
    if (expiresAt <= nowV) return { kind: 'stop', reason: 'the card has expired: an attempt needs updated card data' };
    windowEnd = Math.min(windowEnd, expiresAt);
  }
  const windowStop: Plan = { kind: 'stop', reason: `recovery window of ${config.windowDays} days ends` };

  const check = (at: Date) =>
    checkNetworkLimits(
      { network: input.network, cardDataVersion: input.cardDataVersion },
      input.cardHistory,
      at,
      input.amountMinor,
      {
        timeScale: scale,
        rules: input.rules,
      },
    );
  const slotOf = (v: number) => {
    const local = DateTime.fromMillis(v, { zone: cachedZone(zone) });
    return {
      dayAfterFailure: Math.max(0, Math.min(MAX_SLOT_DAY, localDaysBetween(new Date(failedAt), new Date(v), zone))),
      localHour: Math.floor(local.hour / SLOT_HOURS) * SLOT_HOURS,
      timeZone: zone,
    };
  };

  // Technical errors: the outage is usually over within hours, whatever the hour.
  const backoff = decline.waitClass === 'technical' ? config.technicalBackoffHours[input.attemptsMade] : undefined;
  if (backoff !== undefined) {
    let v = nowV + backoff * HOUR;
    for (let round = 0; round < 20; round++) {
      if (v > windowEnd) return windowStop;
      const at = new Date(Math.max(toReal(v), nowReal + 1));
      const c = check(at);
      if (c.allowed)
        return { kind: 'retry', at, reason: decline.reason, explain: { rule: 'technical backoff', slot: slotOf(v) } };
      if (c.permanently) return { kind: 'stop', reason: c.rule };
      v = Math.max(toVirtual(c.notBefore.getTime()), v + 1);
    }
    return { kind: 'stop', reason: 'network limits leave no slot in the recovery window' };
  }

  // Earliest moment, and the latest local day, of this attempt.
  let earliest = nowV + (input.attemptsMade === 0 ? HOUR : config.minGapHours * HOUR);
  if (decline.waitClass === 'risky')
    earliest = Math.max(earliest, nowV + gapAt(config.riskyGapDays, input.attemptsMade) * DAY);
  let minDay = input.attemptsMade === 0 ? 0 : localDaysBetween(new Date(failedAt), new Date(nowV), zone) + 1;
  const delayHours =
    network === 'mastercard' && mac ? ruleSetAt(input.now).mastercard.retryAfterHours[normalizeCode(mac)] : undefined;
  const adviceWait = delayHours !== undefined;
  if (adviceWait) earliest = Math.max(earliest, (input.attemptsMade === 0 ? failedAt : nowV) + delayHours * HOUR);

  const model = buildSlotModel(learnClass, learning ? input.learned : undefined, config.learner);
  const draw = drawSlotModel(model, learning ? (input.rng ?? Math.random) : null);
  const pattern = inferPayPattern(input.paidBefore, zone);
  const payWeight = paydayWeight(learnClass, input.card?.fundingType);
  const failDay = DateTime.fromMillis(failedAt, { zone: cachedZone(zone) }).startOf('day');
  const deadline = gapAt(config.attemptDeadlineDays, input.attemptsMade);

  let extend = false;
  for (let round = 0; round < 20; round++) {
    if (earliest > windowEnd) return windowStop;
    const firstDay = Math.max(minDay, localDaysBetween(new Date(failedAt), new Date(earliest), zone));
    const windowEndDay = localDaysBetween(new Date(failedAt), new Date(windowEnd), zone);
    // Advice delay: the first good hours after it, nothing more. Else up to the attempt's deadline.
    const lastDay = extend
      ? windowEndDay
      : Math.min(windowEndDay, adviceWait ? firstDay + 1 : Math.max(deadline, firstDay));
    const candidates: Candidate[] = [];
    for (let d = firstDay; d <= lastDay; d++) {
      const date = failDay.plus({ days: d });
      const payday = !adviceWait && payWeight > 0 && isLikelyPayday(pattern, date);
      const dayFactor = payday
        ? 1 + (pattern && hasCalendar(pattern) ? config.patternPaydayBoost - 1 : config.paydayBoost - 1) * payWeight
        : 1;
      for (let h = 0; h < HOUR_BUCKETS; h++) {
        const bucket = h * SLOT_HOURS;
        const hourFactor = pattern?.hour === bucket ? config.paidHourBoost : 1;
        const rate = slotScore(model, draw, d, bucket) * dayFactor * hourFactor;
        // Not worth an attempt (a fee, and a decline on the card's record) below this rate.
        if (rate < config.minSlotRate) continue;
        // Waiting costs: cardholders give up, and every later attempt moves later too.
        const wait = Math.pow(1 - config.waitCostPerDay, d - firstDay);
        candidates.push({ day: d, bucket, payday, score: rate * wait });
      }
    }
    candidates.sort((a, b) => b.score - a.score || a.day - b.day || a.bucket - b.bucket);
    let moved = false;
    for (const c of candidates) {
      // The middle of the bucket, on the local date (luxon moves a time skipped by DST forward).
      const v = failDay
        .plus({ days: c.day })
        .set({ hour: c.bucket + SLOT_HOURS / 2, minute: 0, second: 0, millisecond: 0 })
        .toMillis();
      if (v < earliest || v > windowEnd) continue;
      const at = new Date(Math.max(toReal(v), nowReal + 1));
      const limit = check(at);
      if (!limit.allowed) {
        if (limit.permanently) return { kind: 'stop', reason: limit.rule };
        earliest = Math.max(toVirtual(limit.notBefore.getTime()), earliest + 1);
        minDay = Math.max(minDay, c.day);
        moved = true;
        break;
      }
      const explain: PlanExplanation = {
        rule: adviceWait
          ? `Mastercard advice code ${normalizeCode(mac)}: first good slot after ${delayHours} h`
          : `${learning ? 'learned' : 'prior'} slot${c.payday ? ' on a likely payday' : ''}`,
        slot: { dayAfterFailure: Math.min(MAX_SLOT_DAY, c.day), localHour: c.bucket, timeZone: zone },
        estimate: slotEstimate(model, c.day, c.bucket),
      };
      return { kind: 'retry', at, reason: decline.reason, explain };
    }
    if (candidates.length === 0) {
      if (lastDay >= windowEndDay)
        return { kind: 'stop', reason: `no slot left with an approval rate of ${config.minSlotRate * 100}% or more` };
      // Nothing worth trying before the deadline: the best slot of the rest of the window, if any.
      extend = true;
      minDay = lastDay + 1;
      continue;
    }
    if (!moved) {
      // No candidate fits before the deadline (e.g. it is late in the day): look a day further.
      if (lastDay >= windowEndDay) return windowStop;
      minDay = lastDay + 1;
      earliest = Math.max(earliest, failDay.plus({ days: minDay }).toMillis());
    }
  }
  return { kind: 'stop', reason: 'network limits leave no slot in the recovery window' };
}

const gapAt = (gaps: readonly number[], index: number): number => gaps[Math.min(index, gaps.length - 1)] ?? 0;

const hasCalendar = (p: PayPattern): boolean => p.weekday !== null || p.daysOfMonth.length > 0;

function isLikelyPayday(pattern: PayPattern | null, date: DateTime): boolean {
  return pattern && hasCalendar(pattern) ? isPatternPayday(pattern, date) : isGenericPayday(date);
}

/**
 * How much paydays matter: insufficient funds wait for money; generic declines a little (some are
 * funds in disguise); credit cards less (a credit limit frees up on the statement cycle, not on
 * payday), debit and prepaid more (the account balance is the payday deposit).
 */
function paydayWeight(declineClass: string, fundingType: string | null | undefined): number {
  const base = declineClass === 'funds' ? 1 : declineClass === 'generic' ? 0.3 : 0;
  const funding = (fundingType ?? '').toLowerCase();
  return base * (funding === 'credit' ? 0.5 : funding === 'debit' || funding === 'prepaid' ? 1.2 : 1);
}

/** expiryEnd's answers by expiry and zone: few distinct pairs, asked once per planned attempt. */
const expiryEnds = new Map<string, number | null>();

/** End of the card's expiry month (YYYYMM or YYYY-MM), in the cardholder's zone; null if unknown. */
function expiryEnd(expiry: string | null | undefined, zone: string): number | null {
  const key = `${expiry ?? ''}|${zone}`;
  let end = expiryEnds.get(key);
  if (end === undefined) {
    if (expiryEnds.size >= 10_000) expiryEnds.clear();
    end = computeExpiryEnd(expiry, zone);
    expiryEnds.set(key, end);
  }
  return end;
}

function computeExpiryEnd(expiry: string | null | undefined, zone: string): number | null {
  const m = /^(\d{4})-?(\d{2})$/.exec((expiry ?? '').trim());
  if (!m) return null;
  const month = Number(m[2]);
  if (month < 1 || month > 12) return null;
  return DateTime.fromObject({ year: Number(m[1]), month }, { zone: cachedZone(zone) })
    .endOf('month')
    .toMillis();
}
