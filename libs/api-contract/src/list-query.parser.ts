import { RetMessage, TRANSACTION_STATUSES, type TransactionStatus } from '@retain/domain';
import { parseDateOrDateTime, parseUpperBound } from './date-time.parser';
import { longerThan } from './field-rules';
import { MERCHANT_ID_MAX_LENGTH } from './transaction-fields.table';

/** `{ error }` carries the whole message: `Invalid parameter: <name>` (answered as 400 RET400). */
export interface QueryError {
  error: string;
}

export interface ListTransactionsQuery {
  limit: number;
  startingAfter?: string;
  endingBefore?: string;
  statuses?: TransactionStatus[];
  subscriptionId?: string;
  accountId?: string;
  submittedSince?: Date;
  /** `submitted_until` as a date-time: submitted at or before it. */
  submittedUntil?: Date;
  /** `submitted_until` as a plain date: submitted before the next day's midnight (UTC). */
  submittedBefore?: Date;
  updatedSince?: Date;
}

export interface ListRefundsQuery {
  limit: number;
  startingAfter?: string;
  endingBefore?: string;
  since?: Date;
  /** `until` as a date-time: refund timestamp at or before it. */
  until?: Date;
  /** `until` as a plain date: refund timestamp before the next day's midnight (UTC). */
  before?: Date;
}

export const LIST_LIMIT_DEFAULT = 100;
export const LIST_LIMIT_MAX = 1000;

const invalid = (name: string): QueryError => ({ error: RetMessage.invalidParameter(name) });

/** Thrown inside a parser and turned into its `{ error }` result: keeps the parsers linear. */
class BadParam {
  constructor(readonly name: string) {}
}

type Query = Record<string, unknown> | null | undefined;

// Repeated parameters arrive as arrays: only `status` may repeat.
function single(query: Query, name: string): string | undefined {
  const v = query?.[name];
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw new BadParam(name);
  return v;
}

function identifier(query: Query, name: string): string | undefined {
  const v = single(query, name);
  if (v !== undefined && (v.length === 0 || longerThan(v, MERCHANT_ID_MAX_LENGTH))) throw new BadParam(name);
  return v;
}

function date(query: Query, name: string): Date | undefined {
  const v = single(query, name);
  if (v === undefined) return undefined;
  const d = parseDateOrDateTime(v);
  if (d === null) throw new BadParam(name);
  return d;
}

/**
 * An upper bound (parseUpperBound): `{ until }` for a date-time (inclusive), `{ before }` for a plain
 * date (the next day's midnight, exclusive). A `since` past the range is a bad bound.
 */
function upperBound(query: Query, name: string, since: Date | undefined): { until?: Date; before?: Date } {
  const v = single(query, name);
  if (v === undefined) return {};
  const b = parseUpperBound(v);
  if (b === null) throw new BadParam(name);
  if (since !== undefined && (b.inclusive ? since > b.at : since >= b.at)) throw new BadParam(name);
  return b.inclusive ? { until: b.at } : { before: b.at };
}

function limit(query: Query): number {
  const v = single(query, 'limit');
  if (v === undefined) return LIST_LIMIT_DEFAULT;
  const n = /^\d{1,4}$/.test(v) ? Number(v) : NaN;
  if (!(n >= 1 && n <= LIST_LIMIT_MAX)) throw new BadParam('limit');
  return n;
}

function cursors(query: Query): { startingAfter?: string; endingBefore?: string } {
  const startingAfter = identifier(query, 'starting_after');
  const endingBefore = identifier(query, 'ending_before');
  // Stripe-style paging goes one way per call.
  if (startingAfter !== undefined && endingBefore !== undefined) throw new BadParam('ending_before');
  return { ...(startingAfter !== undefined && { startingAfter }), ...(endingBefore !== undefined && { endingBefore }) };
}

const STATUS_BY_LOWER = new Map(TRANSACTION_STATUSES.map((s) => [s.toLowerCase(), s]));

function statuses(query: Query): TransactionStatus[] | undefined {
  const raw = query?.['status'];
  if (raw === undefined) return undefined;
  const parts = (Array.isArray(raw) ? raw : [raw]).flatMap((v) => {
    if (typeof v !== 'string') throw new BadParam('status');
    return v.split(',');
  });
  const out = new Set<TransactionStatus>();
  for (const p of parts) {
    const s = STATUS_BY_LOWER.get(p.trim().toLowerCase());
    if (s === undefined) throw new BadParam('status');
    out.add(s);
  }
  return [...out];
}

function run<T>(parse: () => T): T | QueryError {
  try {
    return parse();
  } catch (e) {
    if (e instanceof BadParam) return invalid(e.name);
    throw e;
  }
}

/** Drops undefined members so the result only carries the filters that were given. */
function defined<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}

/** Query of `GET /retain/transactions` (decisions §5). Unknown parameters are ignored. */
export function parseListTransactionsQuery(query: Query): ListTransactionsQuery | QueryError {
  return run(() => {
    const submittedSince = date(query, 'submitted_since');
    const { until: submittedUntil, before: submittedBefore } = upperBound(query, 'submitted_until', submittedSince);
    return defined({
      limit: limit(query),
      ...cursors(query),
      statuses: statuses(query),
      subscriptionId: identifier(query, 'subscription_id'),
      accountId: identifier(query, 'account_id'),
      submittedSince,
      submittedUntil,
      submittedBefore,
      updatedSince: date(query, 'updated_since'),
    });
  });
}

/** Query of `GET /retain/refunds` (decisions §8): refund `timestamp` range and cursor paging. */
export function parseListRefundsQuery(query: Query): ListRefundsQuery | QueryError {
  return run(() => {
    const since = date(query, 'since');
    const { until, before } = upperBound(query, 'until', since);
    return defined({ limit: limit(query), ...cursors(query), since, until, before });
  });
}

/** `dryrun`: absent 0; `0` / `1` (decisions §4). */
export function parseDryrun(value: unknown): 0 | 1 | QueryError {
  if (value === undefined) return 0;
  if (value === '0' || value === 0) return 0;
  if (value === '1' || value === 1) return 1;
  return invalid('dryrun');
}

/** `related` of `GET /retain/transactions/{id}`: `true`/`1` or `false`/`0`/absent (decisions §5). */
export function parseRelated(value: unknown): boolean | QueryError {
  if (value === undefined || value === 'false' || value === '0' || value === false) return false;
  if (value === 'true' || value === '1' || value === true) return true;
  return invalid('related');
}
