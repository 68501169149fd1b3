/**
 * Attempt slots: where in time an attempt falls, as the learner counts it. A slot is the
 * cardholder-LOCAL calendar day after the original failure (day 0 = the local day it failed) and a
 * 2-hour bucket of the local hour, per decline class (and country / BIN prefix, recorded for finer
 * scopes). The service records every attempt outcome under `slotKeyFor` into its stats table (one
 * row per scope and key: attempts, approvals); the policy reads them back as `SlotStat`s.
 *
 * The bucketing is part of the stored data: changing it needs a new stats table or a migration.
 */
import { DateTime } from 'luxon';
import { cachedZone } from './zone-cache';
import { classifyDecline } from './decline-classifier';

/** Last day bucket: later days (the window is 30 days) share it. */
export const MAX_SLOT_DAY = 30;
/** Width of an hour bucket; a bucket is named by its first hour (0, 2, .., 22). */
export const SLOT_HOURS = 2;

export type SlotScope = 'global' | 'merchant';

export interface SlotKey {
  /** Wait class of the ORIGINAL decline ('funds', 'generic', 'risky', 'technical'). */
  declineClass: string;
  /** Cardholder country (ISO alpha-2, upper case) or null. */
  country: string | null;
  /** First 6 digits of the card's BIN, or null. */
  binPrefix: string | null;
  /** Cardholder-local calendar days from the failure to the attempt, 0..MAX_SLOT_DAY. */
  dayAfterFailure: number;
  /** First hour of the attempt's local 2-hour bucket (0, 2, .., 22). */
  localHour: number;
}

/** Attempts and approvals counted in one slot, for one scope (all merchants, or this merchant). */
export interface SlotStat extends SlotKey {
  scope: SlotScope;
  attempts: number;
  approvals: number;
}

export interface SlotKeyArgs {
  declineClass: string;
  country: string | null;
  binPrefix: string | null;
  failedAt: Date;
  at: Date;
  timeZone: string;
}

/** Local calendar days between two instants in a zone (b's date minus a's date). */
export function localDaysBetween(a: Date, b: Date, timeZone: string): number {
  // Only the local dates are read (no startOf('day'): it costs as much as the conversion).
  const da = DateTime.fromJSDate(a, { zone: cachedZone(timeZone) });
  const db = DateTime.fromJSDate(b, { zone: cachedZone(timeZone) });
  // Calendar days: compare the dates themselves, so a 23- or 25-hour DST day still counts as one.
  const ua = Date.UTC(da.year, da.month - 1, da.day);
  const ub = Date.UTC(db.year, db.month - 1, db.day);
  return Math.round((ub - ua) / 86_400_000);
}

export const hourBucket = (localHour: number): number => Math.floor(localHour / SLOT_HOURS) * SLOT_HOURS;

export const normalizeBinPrefix = (bin: string | null | undefined): string | null => {
  const digits = (bin ?? '').replace(/\D/g, '');
  return digits.length >= 6 ? digits.slice(0, 6) : null;
};

/** The slot an attempt at `at` falls in (stable: the service stores outcomes under it). */
export function slotKeyFor(args: SlotKeyArgs): SlotKey {
  const local = DateTime.fromJSDate(args.at, { zone: cachedZone(args.timeZone) });
  const days = localDaysBetween(args.failedAt, args.at, args.timeZone);
  const country = (args.country ?? '').trim().toUpperCase();
  return {
    declineClass: args.declineClass,
    country: /^[A-Z]{2}$/.test(country) ? country : null,
    binPrefix: normalizeBinPrefix(args.binPrefix),
    dayAfterFailure: Math.max(0, Math.min(MAX_SLOT_DAY, days)),
    localHour: hourBucket(local.hour),
  };
}

/**
 * The decline class a transaction's slots are counted under: the wait class of its ORIGINAL
 * decline ('funds', 'generic', 'risky', 'technical'; 'never' for declines that are not retried).
 * A null response code is a processor error ('technical').
 */
export function declineClassOf(
  network: string | null | undefined,
  responseCode: string | null | undefined,
  adviceCode?: string | null,
  at: Date = new Date(),
): string {
  if (!responseCode) return 'technical';
  return classifyDecline({ network, responseCode, merchantAdviceCode: adviceCode }, at).waitClass;
}
