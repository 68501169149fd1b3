import { nameOr } from '@retain/domain';
import type { FastifyRequest } from 'fastify';

/** The List envelope of the spec: `{object:"List", data, url, next, previous, total_count}`. */
export function listEnvelope(
  data: Record<string, unknown>[],
  req: FastifyRequest,
  next: string | null,
  previous: string | null,
): Record<string, unknown> {
  const q = (req.url ?? '').indexOf('?');
  return {
    object: 'List',
    data,
    url: q >= 0 ? (req.url ?? '').slice(q) : '',
    next,
    previous,
    total_count: data.length,
  };
}

/**
 * Partial routes to the next and previous pages (Stripe-style cursors on the merchant `id`):
 * the same filters, with starting_after = last id or ending_before = first id; null at the ends.
 */
export function pageLinks(
  path: string,
  query: Record<string, unknown>,
  page: { data: Record<string, unknown>[]; hasMore: boolean; backwards: boolean },
  idOf: (row: Record<string, unknown>) => string,
): { next: string | null; previous: string | null } {
  if (page.data.length === 0) return { next: null, previous: null };
  const base = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (k === 'starting_after' || k === 'ending_before' || v === undefined) continue;
    base.set(k, String(v));
  }
  const link = (key: string, id: string): string => {
    const p = new URLSearchParams(base);
    p.set(key, id);
    return `${path}?${p.toString()}`;
  };
  const first = idOf(page.data[0]!);
  const last = idOf(page.data[page.data.length - 1]!);
  const cameWithCursor = query['starting_after'] !== undefined || query['ending_before'] !== undefined;
  // Forward: more after us -> next; we came from a cursor -> previous. Backwards mirrors that.
  const next = page.backwards ? link('starting_after', last) : page.hasMore ? link('starting_after', last) : null;
  const previous = page.backwards
    ? page.hasMore
      ? link('ending_before', first)
      : null
    : cameWithCursor
      ? link('ending_before', first)
      : null;
  return { next, previous };
}

/**
 * The query of a list paged by `limit` and `starting_after` alone (pushes, experiments): every
 * parameter one of `known` and given once, the page size 1 to `maxLimit` (`defaultLimit` when absent),
 * the cursor matching `cursor`. Returns the name a 400 names when a parameter is bad (a parameter
 * nobody knows is named only when it cannot be card data: `query` otherwise).
 */
export function simplePage(
  query: Record<string, unknown>,
  opts: { known: readonly string[]; defaultLimit: number; maxLimit: number; cursor: RegExp },
): { limit: number; startingAfter: string | null } | { bad: string } {
  for (const [k, v] of Object.entries(query))
    if (!opts.known.includes(k) || typeof v !== 'string') return { bad: nameOr(k, 'query') };
  const limitText = (query['limit'] as string | undefined) ?? String(opts.defaultLimit);
  const limit = /^\d{1,3}$/.test(limitText) ? Number(limitText) : NaN;
  if (!(limit >= 1 && limit <= opts.maxLimit)) return { bad: 'limit' };
  const startingAfter = (query['starting_after'] as string | undefined) ?? null;
  if (startingAfter !== null && !opts.cursor.test(startingAfter)) return { bad: 'starting_after' };
  return { limit, startingAfter };
}
