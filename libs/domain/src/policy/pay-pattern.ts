/**
 * A cardholder's likely pay calendar, from the instants of this subscription's earlier successful
 * charges (in the cardholder's local time): a charge goes through once money has arrived, so the
 * weekday, day of month and hour of past successes point at when money arrives. Without a clear
 * pattern the generic payday calendar applies (Fridays, the 1st, the 15th, the last business day).
 */
import { DateTime } from 'luxon';
import { cachedZone } from './zone-cache';
import { hourBucket } from './attempt-slots';

export interface PayPattern {
  /** Weekly or biweekly payday (luxon weekday 1 = Monday .. 7 = Sunday). */
  weekday: number | null;
  /** Biweekly: local epoch day of one known payday (paydays are 14 days apart); null if weekly. */
  biweeklyAnchor: number | null;
  /** Monthly or semi-monthly: the days of month money arrived (1-31; 31 = the last day). */
  daysOfMonth: readonly number[];
  /** Local hour bucket most earlier charges went through in, when they agree. */
  hour: number | null;
  samples: number;
}

const epochDay = (d: DateTime): number => Math.floor(Date.UTC(d.year, d.month - 1, d.day) / 86_400_000);

/** Share of xs equal to the most common value, and that value. */
function mode<T>(xs: readonly T[]): { value: T; share: number } | null {
  const counts = new Map<T, number>();
  for (const x of xs) counts.set(x, (counts.get(x) ?? 0) + 1);
  let best: { value: T; share: number } | null = null;
  for (const [value, n] of counts) if (!best || n / xs.length > best.share) best = { value, share: n / xs.length };
  return best;
}

/** The pattern of earlier successful charges; null when there are fewer than 2 or no pattern. */
export function inferPayPattern(paidBefore: readonly Date[] | undefined, timeZone: string): PayPattern | null {
  const local = (paidBefore ?? [])
    .filter((d) => d instanceof Date && Number.isFinite(d.getTime()))
    .map((d) => DateTime.fromJSDate(d, { zone: cachedZone(timeZone) }));
  if (local.length < 2) return null;
  const agree = 0.6;

  const hour = mode(local.map((d) => hourBucket(d.hour)));
  const pattern: PayPattern = {
    weekday: null,
    biweeklyAnchor: null,
    daysOfMonth: [],
    hour: hour && hour.share >= agree ? hour.value : null,
    samples: local.length,
  };

  // Monthly / semi-monthly: days of month (the month's last day counts as 31) that agree within a day.
  const doms = local.map((d) => (d.day === d.daysInMonth ? 31 : d.day));
  const clusters: number[] = [];
  for (const dom of [...new Set(doms)].sort((a, b) => a - b)) {
    const near = doms.filter((x) => Math.abs(x - dom) <= 1).length;
    if (near / doms.length >= 0.34 && near >= 2 && !clusters.some((c) => Math.abs(c - dom) <= 1)) clusters.push(dom);
  }
  const covered = doms.filter((x) => clusters.some((c) => Math.abs(x - c) <= 1)).length;
  if (clusters.length > 0 && clusters.length <= 2 && covered / doms.length >= agree) pattern.daysOfMonth = clusters;

  // Weekly / biweekly: the same weekday most of the time.
  const wd = mode(local.map((d) => d.weekday));
  if (wd && wd.share >= agree && pattern.daysOfMonth.length === 0) {
    pattern.weekday = wd.value;
    const days = local.filter((d) => d.weekday === wd.value).map(epochDay);
    const biweekly = days.length >= 2 && days.every((x) => (x - days[0]!) % 14 === 0);
    pattern.biweeklyAnchor = biweekly ? days[0]! : null;
  }
  return pattern.weekday !== null || pattern.daysOfMonth.length > 0 || pattern.hour !== null ? pattern : null;
}

/** Is this local date a likely payday under the pattern? */
export function isPatternPayday(pattern: PayPattern, date: DateTime): boolean {
  if (pattern.weekday !== null && date.weekday === pattern.weekday) {
    if (pattern.biweeklyAnchor === null) return true;
    return (((epochDay(date) - pattern.biweeklyAnchor) % 14) + 14) % 14 === 0;
  }
  // Day d of this month: a day past its end (31 = the last day; the 30th in February) is its last day.
  // A payday on a weekend is paid on the Friday before: accept a Friday up to 2 days early.
  return pattern.daysOfMonth.some((d) => {
    const payday = Math.min(d, date.daysInMonth ?? 31);
    return date.day === payday || (date.weekday === 5 && payday > date.day && payday - date.day <= 2);
  });
}

/** The generic calendar, on the cardholder's local date: Fridays, 1st, 15th, last business day. */
export function isGenericPayday(date: DateTime): boolean {
  if (date.weekday >= 6) return false;
  if (date.weekday === 5 || date.day === 1 || date.day === 15) return true;
  let last = date.endOf('month').startOf('day');
  while (last.weekday >= 6) last = last.minus({ days: 1 });
  return date.day === last.day;
}
