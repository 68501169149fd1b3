/**
 * Calendar of when money arrives, in UTC. Payroll pays on business days: weekly and biweekly on
 * Fridays, semi-monthly on the 15th and the last business day, monthly on the 1st or the last
 * business day; a payday falling on a weekend moves to the business day before it (a Friday or the
 * month's last business day, both paydays already). Public holidays are ignored.
 */
const DAY = 86_400_000;

export const isBusinessDay = (d: Date): boolean => d.getUTCDay() !== 0 && d.getUTCDay() !== 6;

/** Date (1-31) of the last Monday-Friday of d's month. */
export function lastBusinessDayOfMonth(d: Date): number {
  const last = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 0));
  while (!isBusinessDay(last)) last.setUTCDate(last.getUTCDate() - 1);
  return last.getUTCDate();
}

export function isPayday(d: Date): boolean {
  if (!isBusinessDay(d)) return false;
  const date = d.getUTCDate();
  return d.getUTCDay() === 5 || date === 1 || date === 15 || date === lastBusinessDayOfMonth(d);
}

/**
 * The first time at or after `from` that falls at `hourUtc` on a day accepted by `accept`.
 * Scans at most `maxDays` days, so it always terminates; returns the plain hour-aligned time of
 * the day after `from` when no day qualifies.
 */
export function nextDayAt(from: Date, hourUtc: number, accept: (d: Date) => boolean, maxDays = 40): Date {
  const d = new Date(from);
  d.setUTCHours(hourUtc, 0, 0, 0);
  if (d.getTime() < from.getTime()) d.setTime(d.getTime() + DAY);
  const first = new Date(d);
  for (let i = 0; i < maxDays; i++, d.setTime(d.getTime() + DAY)) if (accept(d)) return d;
  return first;
}
