// Small helpers for writing worlds (not a world: files starting with `_` are skipped by --world all).
import { createHash } from 'node:crypto';
import { DateTime } from 'luxon';

export const HOUR = 3_600_000;
export const DAY = 24 * HOUR;

/** mulberry32: seeded uniforms for generating a population. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** A uniform in [0, 1) fixed by its key: charge() answers the same for the same (tx, attempt). */
export function draw(...key: (string | number)[]): number {
  return createHash('sha256').update(key.join('|')).digest().readUInt32BE(0) / 2 ** 32;
}

export function pick<T>(r: number, xs: readonly (readonly [T, number])[]): T {
  const total = xs.reduce((s, [, p]) => s + p, 0);
  let acc = 0;
  for (const [x, p] of xs) if ((acc += p / total) > r) return x;
  return xs[xs.length - 1]![0];
}

export function luhnCard(prefix: string, r: () => number): string {
  let body = prefix;
  while (body.length < 15) body += Math.floor(r() * 10);
  let sum = 0;
  for (let i = 0; i < body.length; i++) {
    let d = Number(body[body.length - 1 - i]);
    if (i % 2 === 0) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
  }
  return body + String((10 - (sum % 10)) % 10);
}

/** The local calendar day of `at` and the `k` days before it, as luxon dates. */
export function localDays(at: number, zone: string, back: number): DateTime[] {
  const local = DateTime.fromMillis(at, { zone });
  return Array.from({ length: back + 1 }, (_, k) => local.minus({ days: k }).startOf('day'));
}

/** The n-th business day (Mon-Fri) of the month of `d` (1-based). */
export function nthBusinessDay(d: DateTime, n: number): number {
  let count = 0;
  for (let day = d.startOf('month'); day.month === d.month; day = day.plus({ days: 1 }))
    if (day.weekday <= 5 && ++count === n) return day.day;
  return d.daysInMonth!;
}

/** The last business day of the month of `d`. */
export function lastBusinessDay(d: DateTime): number {
  let day = d.endOf('month').startOf('day');
  while (day.weekday > 5) day = day.minus({ days: 1 });
  return day.day;
}
