// The portal talks to the same API as any merchant, authenticated by the session cookie
// (decisions §14). Every request carries X-Requested-With: a write without it is refused (CSRF).
// Nothing here keeps a credential: the cookie is HttpOnly and never seen by this code.

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Called on a 401 to any request but the session's own (a login's 401 is a wrong key; the check on
 * load finds no session; a logout ends it anyway): the session expired (12 h, 30 min idle), ended in
 * another tab, or by a key rotation. The App returns to the login form; the caller still gets the error.
 */
let sessionEnded: () => void = () => undefined;
export function onSessionEnded(handler: () => void): void {
  sessionEnded = handler;
}

export const SESSION_PATH = '/v1/retain/session';

export async function api<T = any>(
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<T> {
  let res: Response;
  let text: string;
  try {
    res = await fetch(path, {
      method,
      credentials: 'same-origin',
      headers: {
        ...headers,
        'X-Requested-With': 'retain-portal',
        ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    text = await res.text();
  } catch {
    // No answer (network down, connection cut): fetch says only "Failed to fetch".
    throw new Error(NO_ANSWER);
  }
  if (res.status === 401 && path !== SESSION_PATH) sessionEnded();
  // An answer that is not the API's JSON (a proxy's HTML error page) is reported by its status.
  let json: any = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    if (res.ok) throw new Error(`Retain's answer (${res.status}) could not be read.`);
  }
  if (!res.ok && res.status !== 207) {
    const code = typeof json?.code === 'string' ? json.code : String(res.status);
    const message =
      typeof json?.message === 'string'
        ? json.message
        : `Retain answered ${res.status}${res.statusText ? ` ${res.statusText}` : ''}: try again later.`;
    throw new ApiError(res.status, code, message);
  }
  return json as T;
}

/** What a request with no answer at all says (not an ApiError: nothing is known of its outcome). */
export const NO_ANSWER = 'Could not reach Retain: check the connection and try again.';

export interface Figures {
  failed_count: number;
  failed_amount: number;
  recovered_count: number;
  recovered_amount: number;
  recovery_rate: number | null;
  amount_recovery_rate: number | null;
  attempts: number;
  attempts_per_recovery: number | null;
  refunded_count: number;
  refunded_amount: number;
  stopped_count: number;
  net_recovered_amount: number;
}

export interface CurrencyAnalytics {
  currency: string;
  totals: Figures;
  network_fees_avoided: number;
  series: ({ period_start: string } & Figures)[];
  success_by_attempt: { attempt_number: number; attempts: number; recovered: number; success_rate: number | null }[];
  breakdowns: Record<string, ({ key: string } & Figures)[]>;
}

export interface Analytics {
  from: string;
  to: string;
  currencies: CurrencyAnalytics[];
}

export const day = (d: Date): string => d.toISOString().slice(0, 10);

/**
 * A fresh Idempotency-Key (README, refunds): 128 random bits. crypto.getRandomValues, not
 * randomUUID: the portal may be served over plain http, where randomUUID does not exist.
 */
export function newIdempotencyKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `portal-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}
