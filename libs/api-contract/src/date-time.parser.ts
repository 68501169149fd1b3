// ISO 8601 / RFC 3339 date-times, parsed by hand: Date.parse accepts too much (e.g. "2024-02-30",
// zone-less strings read as local time), and a character scan avoids the allocations of a
// capturing regex (this runs for every transaction of a 1000-item batch).

export type ZoneRule = 'required' | 'optional';

// Years 0001-9999 in UTC (ISO 8601 without expansion; Postgres has no year 0): an offset may not
// carry a date outside them.
const MIN_MILLIS = -62_135_596_800_000; // 0001-01-01T00:00:00Z
const MAX_MILLIS = 253_402_300_799_999; // 9999-12-31T23:59:59.999Z

const FRACTION_SCALE = [100, 10, 1];
const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function daysInMonth(year: number, month: number): number {
  if (month !== 2) return DAYS_IN_MONTH[month - 1]!;
  return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
}

function utcMillis(y: number, mo: number, d: number, h = 0, mi = 0, s = 0, ms = 0): number {
  if (y >= 100) return Date.UTC(y, mo - 1, d, h, mi, s, ms);
  // Date.UTC maps years 0-99 to 1900-1999; setUTCFullYear does not.
  const date = new Date(0);
  date.setUTCFullYear(y, mo - 1, d);
  date.setUTCHours(h, mi, s, ms);
  return date.getTime();
}

/** `count` decimal digits at `at` as a number, or -1. */
function digits(s: string, at: number, count: number): number {
  let n = 0;
  for (let i = at; i < at + count; i++) {
    const c = s.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return -1; // NaN (past the end) fails both tests too
    n = n * 10 + c;
  }
  return n;
}

/** Parses `YYYY-MM-DD` at the start of `s`: [year, month, day] or null. */
function datePart(s: string): [number, number, number] | null {
  if (s.charCodeAt(4) !== 45 /* - */ || s.charCodeAt(7) !== 45) return null;
  const year = digits(s, 0, 4);
  const month = digits(s, 5, 2);
  const day = digits(s, 8, 2);
  if (year < 0 || month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return null;
  return [year, month, day];
}

/**
 * `YYYY-MM-DDThh:mm:ss[.fraction](Z|±hh:mm|±hhmm)`; with `zone: 'optional'` a zone-less value is
 * read as UTC (subscription.starts). Returns null for anything else, including impossible dates and
 * instants outside years 0001-9999 once the offset is applied.
 */
export function parseDateTime(value: string, zone: ZoneRule = 'required'): Date | null {
  const ms = parseDateTimeMillis(value, zone);
  return ms === null ? null : new Date(ms);
}

/** As parseDateTime, as epoch milliseconds (no Date allocated when only checking). */
export function parseDateTimeMillis(s: string, zone: ZoneRule = 'required'): number | null {
  if (s.length < 19 || s.length > 64) return null;
  const date = datePart(s);
  if (date === null) return null;
  const t = s.charCodeAt(10);
  if ((t !== 84 /* T */ && t !== 116) /* t */ || s.charCodeAt(13) !== 58 /* : */ || s.charCodeAt(16) !== 58) {
    return null;
  }
  const hour = digits(s, 11, 2);
  const minute = digits(s, 14, 2);
  const second = digits(s, 17, 2);
  if (hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 59) return null;

  let i = 19;
  let millis = 0;
  const sep = s.charCodeAt(i);
  if (sep === 46 /* . */ || sep === 44 /* , */) {
    const start = ++i;
    while (i < s.length && i - start < 9) {
      const c = s.charCodeAt(i) - 48;
      if (c < 0 || c > 9) break;
      if (i - start < 3) millis += c * FRACTION_SCALE[i - start]!;
      i++;
    }
    if (i === start) return null;
  }

  let offsetMinutes = 0;
  if (i === s.length) {
    if (zone === 'required') return null;
  } else {
    const z = s.charCodeAt(i);
    if (z === 90 /* Z */ || z === 122 /* z */) {
      if (i + 1 !== s.length) return null;
    } else if (z === 43 /* + */ || z === 45 /* - */) {
      const rest = s.length - i - 1;
      const colon = rest === 5 && s.charCodeAt(i + 3) === 58;
      if (!(colon || rest === 4)) return null;
      const oh = digits(s, i + 1, 2);
      const om = digits(s, colon ? i + 4 : i + 3, 2);
      if (oh < 0 || oh > 23 || om < 0 || om > 59) return null;
      offsetMinutes = (z === 45 ? -1 : 1) * (oh * 60 + om);
    } else {
      return null;
    }
  }
  const ms = utcMillis(date[0], date[1], date[2], hour, minute, second, millis) - offsetMinutes * 60_000;
  return ms < MIN_MILLIS || ms > MAX_MILLIS ? null : ms;
}

/**
 * Query parameters also accept a plain date (`YYYY-MM-DD`, midnight UTC): the start of that day, as a
 * lower bound (`since`) uses it. An upper bound reads a plain date as the whole day: parseUpperBound.
 */
export function parseDateOrDateTime(value: string): Date | null {
  if (value.length !== 10) return parseDateTime(value, 'required');
  const date = datePart(value);
  if (date === null || date[0] < 1) return null;
  return new Date(utcMillis(date[0], date[1], date[2]));
}

const DAY_MS = 86_400_000;

/**
 * The upper bound of a query range (`submitted_until`, refunds' `until`). A date-time is exact: at or
 * before that instant (`inclusive`). A plain date names its whole UTC day: before the next day's
 * midnight (not inclusive), so `since=D&until=D` is day D and `until=<today>` includes today.
 */
export function parseUpperBound(value: string): { at: Date; inclusive: boolean } | null {
  const at = parseDateOrDateTime(value);
  if (at === null) return null;
  // UTC days are all 24 h long; 9999-12-31 ends at 10000-01-01, which a Date and Postgres both hold.
  return value.length === 10 ? { at: new Date(at.getTime() + DAY_MS), inclusive: false } : { at, inclusive: true };
}
