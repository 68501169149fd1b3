// Connection-level failures of Postgres (SQLSTATE class 08, shutting down 57P01-57P03, too many
// connections 53300) and of the network; pg-pool's own timeout and termination messages; ioredis
// giving up on a command while Redis is away.
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  '57P01',
  '57P02',
  '57P03',
  '53300',
  '08000',
  '08001',
  '08003',
  '08004',
  '08006',
]);
const UNAVAILABLE_MESSAGE_RE =
  /Connection terminated|timeout exceeded when trying to connect|connect ECONNREFUSED|not queryable|Connection is closed|max retries per request|Stream isn't writeable/i;

/**
 * A back end (Postgres, Redis) that is down or unreachable: the client should retry later
 * (the API answers 503 RET900 with Retry-After, decisions §16; a job is tried again without using an
 * attempt up). Looks through TypeORM's `driverError`, `cause` and
 * AggregateError (a connect attempt to every address of a host) for the underlying error.
 */
export function isUnavailable(e: unknown, depth = 0): boolean {
  if (typeof e !== 'object' || e === null || depth > 4) return false;
  const err = e as { code?: unknown; message?: unknown; driverError?: unknown; cause?: unknown; errors?: unknown };
  if (typeof err.code === 'string' && UNAVAILABLE_CODES.has(err.code)) return true;
  if (typeof err.message === 'string' && UNAVAILABLE_MESSAGE_RE.test(err.message)) return true;
  const inner = [err.driverError, err.cause, ...(Array.isArray(err.errors) ? err.errors : [])];
  return inner.some((x) => isUnavailable(x, depth + 1));
}
