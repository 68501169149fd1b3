import type { DataSource, EntityManager } from 'typeorm';

/**
 * Postgres aborts a transaction with one of these when it could not be serialised (40001) or was
 * chosen as a deadlock victim (40P01). Nothing of it was applied, and running it again is the
 * documented answer. A correct lock order makes them rare; they are retried, never shown as 500.
 */
export const RETRYABLE_PG_CODES: readonly string[] = ['40001', '40P01'];

/** The SQLSTATE of a TypeORM QueryFailedError or a pg error (else undefined). */
export function pgErrorCode(err: unknown): string | undefined {
  const e = err as { code?: unknown; driverError?: { code?: unknown } } | null;
  const code = e?.code ?? e?.driverError?.code;
  return typeof code === 'string' ? code : undefined;
}

/** The constraint a pg error names (a unique violation's index), else undefined. */
export function constraintOf(err: unknown): string | undefined {
  const e = err as { constraint?: unknown; driverError?: { constraint?: unknown } } | null;
  const c = e?.constraint ?? e?.driverError?.constraint;
  return typeof c === 'string' ? c : undefined;
}

/** A serialization failure or a deadlock: the whole transaction may simply run again. */
export function isRetryableTransactionError(err: unknown): boolean {
  const code = pgErrorCode(err);
  return code !== undefined && RETRYABLE_PG_CODES.includes(code);
}

export interface TransactionRetryOptions {
  /** Runs in all, the first included (default 5). */
  attempts?: number;
  /** Backoff before run n+1 is uniform in [0, min(maxDelayMs, baseDelayMs * 2^(n-1))] (full jitter). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  isolation?: 'READ COMMITTED' | 'REPEATABLE READ' | 'SERIALIZABLE';
  /**
   * Unique constraints whose violation means "another transaction just committed this key": the
   * run is repeated and then sees that row (the intake's duplicate checks, without a lock).
   */
  retryOnUniqueViolation?: readonly string[];
  /** Told about each retry (to log it); `attempt` is the run that failed. */
  onRetry?: (info: { code: string; attempt: number; delayMs: number }) => void;
}

/**
 * `dataSource.transaction(fn)`, run again when Postgres aborts it with a serialization failure or a
 * deadlock (jittered exponential backoff, so two victims do not collide again in step). `fn` must
 * be safe to run again: it may only change state through `m` (rolled back with the failed run), so
 * anything it collects outside must be reset at its start. After the last attempt the error is
 * thrown as it came (the HTTP layer answers it 503 with Retry-After).
 */
export async function inTransactionWithRetry<T>(
  dataSource: DataSource,
  fn: (m: EntityManager) => Promise<T>,
  options: TransactionRetryOptions = {},
): Promise<T> {
  const attempts = Math.max(1, options.attempts ?? 5);
  const base = options.baseDelayMs ?? 20;
  const max = options.maxDelayMs ?? 500;
  for (let attempt = 1; ; attempt++) {
    try {
      return options.isolation ? await dataSource.transaction(options.isolation, fn) : await dataSource.transaction(fn);
    } catch (err) {
      const raced =
        pgErrorCode(err) === '23505' && (options.retryOnUniqueViolation ?? []).includes(constraintOf(err) ?? '');
      if (attempt >= attempts || !(raced || isRetryableTransactionError(err))) throw err;
      const delayMs = Math.round(Math.random() * Math.min(max, base * 2 ** (attempt - 1)));
      options.onRetry?.({ code: pgErrorCode(err)!, attempt, delayMs });
      await new Promise((resolve) => setTimeout(resolve, delayMs));
    }
  }
}
