import { createHash } from 'node:crypto';
import { declineGroup, lastBusinessDayOfMonth, type DeclineGroup } from '@retain/domain';
import type { CardNetwork } from '../processor.port';

/**
 * A seeded model of how real declines recover, for sandbox cards outside the scripted table.
 * Everything about a card (can it recover at all, when its owner is paid, how long money lasts,
 * how long an issuer's hold lasts) is drawn from a hash of the card number; the noise of one
 * attempt from a hash of the card number and the attempt number. So a card behaves the same in
 * every run, and the outcome of an attempt depends on WHEN it is made:
 * - insufficient funds recover when money arrives: on the owner's paydays (weekly or biweekly
 *   Fridays, the 15th and last business day, the 1st), from the early-morning deposit, for a few
 *   days (fewer for weekly pay and large amounts);
 * - generic and suspicious declines recover after an issuer-side hold of a few days;
 * - technical declines clear within hours;
 * - at night (22-04 UTC) and on weekends issuers approve less;
 * - every further attempt on a card approves a little less (issuers score repeated declines as
 *   risk), and a card that will never recover sometimes says so (a hard code, or MAC 03/21).
 */
export type ModelOutcome =
  | { kind: 'approve'; /** approved for half of the amount (decisions §15 partial authorization) */ half?: boolean }
  | { kind: 'decline'; code: string; mac?: string }
  | { kind: 'error' };

export interface ModelInput {
  pan: string;
  network: CardNetwork;
  /** The merchant's original decline code (auth_code): the kind of trouble the card is in. */
  originalResponseCode: string;
  amountMinor: bigint;
  /** 1-based retry attempt number. */
  attemptNumber: number;
  at: Date;
  /** Unknown: the hold or outage is taken as over (only paydays and noise remain). */
  originalFailedAt?: Date | null;
}

type PayCycle = 'weekly' | 'biweekly-even' | 'biweekly-odd' | 'semi-monthly' | 'monthly-first' | 'monthly-last';

export interface CardProfile {
  group: DeclineGroup;
  recoverable: boolean;
  payCycle: PayCycle;
  /** Hour (UTC) at which a salary is available on payday. */
  depositHourUtc: number;
  /** How long money lasts after a payday. */
  fundsHours: number;
  /** How long an issuer hold or outage lasts after the original failure. */
  holdHours: number;
  /** From this attempt on, a card that will not recover may answer with a hard decline. */
  hardFromAttempt: number;
}

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** Share of cards that can recover at all, by the original decline's group. */
const RECOVERABLE: Record<DeclineGroup, number> = {
  funds: 0.72,
  generic: 0.5,
  technical: 0.92,
  risky: 0.3,
  data: 0,
  hard: 0,
  auth: 0,
};
/** Mean issuer hold in hours (exponential), by group. */
const MEAN_HOLD_HOURS: Record<DeclineGroup, number> = {
  funds: 0,
  generic: 4 * 24,
  technical: 4,
  risky: 8 * 24,
  data: 0,
  hard: 0,
  auth: 0,
};
/** Chance of approval when the card's trouble is over / still there. */
const APPROVE_WHEN_OK: Record<DeclineGroup, number> = {
  funds: 0.92,
  generic: 0.8,
  technical: 0.9,
  risky: 0.6,
  data: 0,
  hard: 0,
  auth: 0,
};
const APPROVE_WHEN_NOT_OK = 0.03;
/** Per further attempt: issuers trust a card less with every decline. */
const FATIGUE = 0.95;
const ERROR_RATE = 0.01;

const PAY_CYCLES: readonly [PayCycle, number][] = [
  ['weekly', 0.25],
  ['biweekly-even', 0.175],
  ['biweekly-odd', 0.175],
  ['semi-monthly', 0.25],
  ['monthly-first', 0.07],
  ['monthly-last', 0.08],
];

/** Uniform numbers in [0,1) from a seed: 8 per SHA-256 digest. */
function uniforms(seed: string): number[] {
  const h = createHash('sha256').update(seed).digest();
  return Array.from({ length: 8 }, (_, i) => h.readUInt32BE(i * 4) / 0x1_0000_0000);
}

/** Deterministic uniform number in [0,1) from a seed. */
export const seeded = (seed: string): number => uniforms(seed)[0]!;

const cardSeed = (pan: string): string => createHash('sha256').update(`sandbox-card:${pan}`).digest('hex');

export function cardProfile(pan: string, originalResponseCode: string, amountMinor: bigint): CardProfile {
  const [uRec, uCycle, uHour, uFunds, uHold, uHard] = uniforms(cardSeed(pan));
  const group = declineGroup(originalResponseCode);
  // Larger amounts are harder to collect: $100 keeps ~83% of the odds, $500 half.
  const amountFactor = 1 / (1 + Number(amountMinor) / 50_000);
  let acc = 0;
  const payCycle = PAY_CYCLES.find(([, p]) => (acc += p) > uCycle!)?.[0] ?? 'monthly-last';
  const fundsDays = payCycle === 'weekly' ? 1 + uFunds! * 2 : 2 + uFunds! * 6;
  return {
    group,
    recoverable: uRec! < RECOVERABLE[group] * amountFactor,
    payCycle,
    depositHourUtc: 2 + Math.floor(uHour! * 7),
    fundsHours: Math.max(12, fundsDays * 24 * amountFactor),
    holdHours: Math.min(30 * 24, -Math.log(1 - uHold!) * MEAN_HOLD_HOURS[group]),
    hardFromAttempt: 2 + Math.floor(uHard! * 6),
  };
}

/** Is money on the account at `at`: within fundsHours after one of the owner's paydays? */
export function fundsAvailable(profile: CardProfile, at: Date): boolean {
  for (let back = 0; back * DAY <= profile.fundsHours * HOUR + DAY; back++) {
    const day = new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate() - back));
    if (!paysOn(profile.payCycle, day)) continue;
    const since = at.getTime() - (day.getTime() + profile.depositHourUtc * HOUR);
    if (since >= 0 && since < profile.fundsHours * HOUR) return true;
  }
  return false;
}

function paysOn(cycle: PayCycle, day: Date): boolean {
  if (isWeekend(day)) return false;
  const weekday = day.getUTCDay();
  const date = day.getUTCDate();
  const lastBusiness = lastBusinessDayOfMonth(day);
  switch (cycle) {
    case 'weekly':
      return weekday === 5;
    case 'biweekly-even':
    case 'biweekly-odd':
      return weekday === 5 && (Math.floor(day.getTime() / (7 * DAY)) % 2 === 0) === (cycle === 'biweekly-even');
    case 'semi-monthly':
      // The 15th, or the Friday before when it falls on a weekend; and the last business day.
      return date === lastBusiness || date === 15 || (weekday === 5 && (date === 13 || date === 14));
    case 'monthly-first':
      // The 1st, or the last business day before it when the 1st falls on a weekend.
      return (
        date === 1 ||
        (date === lastBusiness && isWeekend(new Date(Date.UTC(day.getUTCFullYear(), day.getUTCMonth() + 1, 1))))
      );
    case 'monthly-last':
      return date === lastBusiness;
  }
}

const isWeekend = (d: Date): boolean => d.getUTCDay() === 0 || d.getUTCDay() === 6;

/** Chance that the attempt is approved. */
export function approvalProbability(input: ModelInput, profile = profileOf(input)): number {
  if (!profile.recoverable) return 0;
  const { group } = profile;
  let ok: boolean;
  if (group === 'funds') {
    ok = fundsAvailable(profile, input.at);
  } else {
    const since = input.originalFailedAt ? input.at.getTime() - input.originalFailedAt.getTime() : Infinity;
    ok = since >= profile.holdHours * HOUR;
  }
  let p = ok ? APPROVE_WHEN_OK[group] : APPROVE_WHEN_NOT_OK;
  const hour = input.at.getUTCHours();
  if (hour >= 22 || hour < 4) p *= 0.8;
  const weekday = input.at.getUTCDay();
  if (weekday === 0 || weekday === 6) p *= 0.9;
  return p * FATIGUE ** Math.max(0, input.attemptNumber - 1);
}

const profileOf = (input: ModelInput): CardProfile =>
  cardProfile(input.pan, input.originalResponseCode, input.amountMinor);

const RETRY_AFTER_MACS = ['24', '25', '26', '27', '28', '29', '30'];

/** The outcome of one attempt. */
export function modelOutcome(input: ModelInput): ModelOutcome {
  const profile = profileOf(input);
  const [uApprove, uError, uHard, uMac, uMacCode] = uniforms(`${cardSeed(input.pan)}:${input.attemptNumber}`);
  if (uError! < ERROR_RATE) return { kind: 'error' };
  if (uApprove! < approvalProbability(input, profile)) return { kind: 'approve' };

  const original = input.originalResponseCode.trim().toUpperCase();
  const mc = input.network === 'mastercard';
  // A card that will not recover sometimes ends it: account closed, or "do not try again".
  if (!profile.recoverable && input.attemptNumber >= profile.hardFromAttempt && uHard! < 0.3) {
    if (mc) return { kind: 'decline', code: original, mac: uMacCode! < 0.7 ? '03' : '21' };
    return { kind: 'decline', code: uMacCode! < 0.7 ? '14' : 'R1' };
  }
  const code = declineCode(profile, original, input);
  if (mc && profile.recoverable && uMac! < 0.25) {
    // Mastercard issuers often advise when to come back: try later (02) or after a delay (24-30).
    const mac = uMac! < 0.17 ? '02' : RETRY_AFTER_MACS[Math.floor(uMacCode! * RETRY_AFTER_MACS.length)]!;
    return { kind: 'decline', code, mac };
  }
  return { kind: 'decline', code };
}

function declineCode(profile: CardProfile, original: string, input: ModelInput): string {
  if (profile.group !== 'technical') return original;
  // Once the outage is over, the issuer's own answer shows through.
  const since = input.originalFailedAt ? input.at.getTime() - input.originalFailedAt.getTime() : Infinity;
  return since < profile.holdHours * HOUR ? original : '05';
}
