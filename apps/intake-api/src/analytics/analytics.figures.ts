import type { AnalyticsRow } from '@retain/db';
import { fromMinorUnits } from '@retain/domain';

/**
 * The analytics figures, computed from rollup rows (libs/db AnalyticsRepository). Pure functions:
 * everything a figure means is decided here, and documented in the README's analytics section.
 * Cohort: every figure of a period belongs to the failed transactions SUBMITTED in that period
 * (UTC days): what became of them so far.
 */

export const BREAKDOWN_DIMENSIONS = ['decline_code', 'decline_class', 'card_network', 'bin', 'country'] as const;
export type BreakdownDimension = (typeof BREAKDOWN_DIMENSIONS)[number];

export interface Figures {
  /** Failed transactions submitted (review-rejected ones excluded) and their amount. */
  failed_count: number;
  failed_amount: number;
  /** Transactions recovered (an attempt captured) and the amount captured. */
  recovered_count: number;
  recovered_amount: number;
  /** recovered_count / failed_count (4 decimals); null without failed transactions. */
  recovery_rate: number | null;
  /** recovered_amount / failed_amount (4 decimals); null without failed transactions. */
  amount_recovery_rate: number | null;
  /** Retry attempts made (sent to the processor, whatever their answer). */
  attempts: number;
  /** attempts / recovered_count (2 decimals): attempts it takes to recover one transaction. */
  attempts_per_recovery: number | null;
  /** Completed refunds that gave money back, and their amount. */
  refunded_count: number;
  refunded_amount: number;
  /** Transactions stopped by the merchant before recovery. */
  stopped_count: number;
  /** recovered_amount - refunded_amount. */
  net_recovered_amount: number;
}

export interface SuccessByAttempt {
  attempt_number: number;
  attempts: number;
  recovered: number;
  /** recovered / attempts at this attempt number (4 decimals). */
  success_rate: number | null;
}

export interface TimeToRecover {
  recovered_count: number;
  /** Nearest-rank percentiles of whole hours from the original failure (`timestamp`) to the capture. */
  p50_hours: number | null;
  p90_hours: number | null;
  /** The same in days (hours / 24, 2 decimals). */
  p50_days: number | null;
  p90_days: number | null;
}

/**
 * Network fees avoided over the range, in USD (the networks bill their excess-reattempt fees in
 * USD, whatever the transaction's currency): for every transaction whose recovery ended, what a
 * naive daily schedule would have paid minus what its attempts paid (libs/domain network-fees.ts).
 * Read from the range totals of the `all` dimension.
 */
export function networkFeesAvoided(currency: string, rows: readonly AnalyticsRow[]): number {
  const minor = rows
    .filter((r) => r.currency === currency && r.period === null && r.dim === 'all')
    .reduce((s, r) => s + BigInt(r.network_fees_avoided ?? '0'), 0n);
  return fromMinorUnits(minor, 'USD');
}
export const NETWORK_FEES_AVOIDED_NOTE =
  'network_fees_avoided is in USD: excess-reattempt fees a naive daily schedule (30 days, blind to the network rules) would have paid on the transactions whose recovery ended, minus the fees our attempts paid';

const ratio = (n: number, d: number, places: number): number | null =>
  d === 0 ? null : Math.round((n / d) * 10 ** places) / 10 ** places;

interface Sums {
  failed_count: number;
  failed_amount: bigint;
  attempts: number;
  recovered_count: number;
  recovered_amount: bigint;
  refunded_count: number;
  refunded_amount: bigint;
  stopped_count: number;
}

const zero = (): Sums => ({
  failed_count: 0,
  failed_amount: 0n,
  attempts: 0,
  recovered_count: 0,
  recovered_amount: 0n,
  refunded_count: 0,
  refunded_amount: 0n,
  stopped_count: 0,
});

function add(s: Sums, r: AnalyticsRow): Sums {
  s.failed_count += Number(r.failed_count);
  s.failed_amount += BigInt(r.failed_amount);
  s.attempts += Number(r.attempts);
  s.recovered_count += Number(r.recovered_count);
  s.recovered_amount += BigInt(r.recovered_amount);
  s.refunded_count += Number(r.refunded_count);
  s.refunded_amount += BigInt(r.refunded_amount);
  s.stopped_count += Number(r.stopped_count);
  return s;
}

/** Rates divide minor-unit integers; amounts are shown in the currency's decimal units as elsewhere. */
export function figures(s: Sums, currency: string): Figures {
  return {
    failed_count: s.failed_count,
    failed_amount: fromMinorUnits(s.failed_amount, currency),
    recovered_count: s.recovered_count,
    recovered_amount: fromMinorUnits(s.recovered_amount, currency),
    recovery_rate: ratio(s.recovered_count, s.failed_count, 4),
    amount_recovery_rate: ratio(Number(s.recovered_amount), Number(s.failed_amount), 4),
    attempts: s.attempts,
    attempts_per_recovery: ratio(s.attempts, s.recovered_count, 2),
    refunded_count: s.refunded_count,
    refunded_amount: fromMinorUnits(s.refunded_amount, currency),
    stopped_count: s.stopped_count,
    net_recovered_amount: fromMinorUnits(s.recovered_amount - s.refunded_amount, currency),
  };
}

/** Nearest-rank percentile of a histogram (value -> count). */
export function percentile(hist: ReadonlyMap<number, number>, p: number): number | null {
  const total = [...hist.values()].reduce((a, b) => a + b, 0);
  if (total <= 0) return null;
  const rank = Math.max(1, Math.ceil(p * total));
  let seen = 0;
  for (const value of [...hist.keys()].sort((a, b) => a - b)) {
    seen += hist.get(value)!;
    if (seen >= rank) return value;
  }
  return null;
}

/** Every period start from `from` to `to` (YYYY-MM-DD, UTC); weeks start on Monday. */
export function periods(from: string, to: string, bucket: 'day' | 'week'): string[] {
  const day = 86_400_000;
  let t = Date.parse(`${from}T00:00:00Z`);
  if (bucket === 'week') t -= ((new Date(t).getUTCDay() + 6) % 7) * day;
  const end = Date.parse(`${to}T00:00:00Z`);
  const out: string[] = [];
  for (; t <= end; t += bucket === 'week' ? 7 * day : day) out.push(new Date(t).toISOString().slice(0, 10));
  return out;
}

export interface CurrencyAnalytics {
  currency: string;
  totals: Figures;
  network_fees_avoided: number;
  series: ({ period_start: string } & Figures)[];
  success_by_attempt: SuccessByAttempt[];
  time_to_recover: TimeToRecover;
  breakdowns: Record<BreakdownDimension, ({ key: string } & Figures)[]>;
}

/** The per-currency answer from the rollup rows of one read. */
export function buildAnalytics(
  rows: readonly AnalyticsRow[],
  from: string,
  to: string,
  bucket: 'day' | 'week',
  breakdownLimit: number,
): CurrencyAnalytics[] {
  const byCurrency = new Map<string, AnalyticsRow[]>();
  for (const r of rows) {
    const list = byCurrency.get(r.currency) ?? [];
    list.push(r);
    byCurrency.set(r.currency, list);
  }
  const out: CurrencyAnalytics[] = [];
  for (const [currency, list] of [...byCurrency.entries()].sort(([a], [b]) => a.localeCompare(b))) {
    const totals = zero();
    const series = new Map(periods(from, to, bucket).map((p) => [p, zero()]));
    const attempts = new Map<number, { attempts: number; recovered: number }>();
    const ttr = new Map<number, number>();
    const breakdowns = new Map<string, Map<string, Sums>>(BREAKDOWN_DIMENSIONS.map((d) => [d, new Map()]));
    for (const r of list) {
      if (r.period !== null) {
        if (r.dim === 'all') add(series.get(r.period) ?? series.set(r.period, zero()).get(r.period)!, r);
        continue;
      }
      if (r.dim === 'all') add(totals, r);
      else if (r.dim === 'attempt') {
        attempts.set(Number(r.key), { attempts: Number(r.attempts), recovered: Number(r.recovered_count) });
      } else if (r.dim === 'ttr') {
        if (Number(r.recovered_count) > 0) ttr.set(Number(r.key), Number(r.recovered_count));
      } else {
        const dim = breakdowns.get(r.dim);
        if (dim) dim.set(r.key, add(dim.get(r.key) ?? zero(), r));
      }
    }
    const p50 = percentile(ttr, 0.5);
    const p90 = percentile(ttr, 0.9);
    const days = (h: number | null): number | null => (h === null ? null : Math.round((h / 24) * 100) / 100);
    out.push({
      currency,
      totals: figures(totals, currency),
      network_fees_avoided: networkFeesAvoided(currency, list),
      series: [...series.entries()]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([period_start, s]) => ({ period_start, ...figures(s, currency) })),
      success_by_attempt: [...attempts.entries()]
        .filter(([, v]) => v.attempts > 0 || v.recovered > 0)
        .sort(([a], [b]) => a - b)
        .map(([n, v]) => ({
          attempt_number: n,
          attempts: v.attempts,
          recovered: v.recovered,
          success_rate: ratio(v.recovered, v.attempts, 4),
        })),
      time_to_recover: {
        recovered_count: [...ttr.values()].reduce((a, b) => a + b, 0),
        p50_hours: p50,
        p90_hours: p90,
        p50_days: days(p50),
        p90_days: days(p90),
      },
      breakdowns: Object.fromEntries(
        BREAKDOWN_DIMENSIONS.map((d) => [
          d,
          [...breakdowns.get(d)!.entries()]
            .filter(([, s]) => s.failed_count !== 0 || s.attempts !== 0 || s.refunded_count !== 0)
            .sort(([ka, a], [kb, b]) => b.failed_count - a.failed_count || ka.localeCompare(kb))
            .slice(0, breakdownLimit)
            .map(([key, s]) => ({ key, ...figures(s, currency) })),
        ]),
      ) as CurrencyAnalytics['breakdowns'],
    });
  }
  return out;
}
