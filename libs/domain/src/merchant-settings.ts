/**
 * A merchant's login and webhook URL as every entry point takes them (the operator CLI, the API and
 * the portal): one set of rules, so the CLI cannot store what the API or the portal then refuses.
 */

/** merchants.login is varchar(128). */
export const MAX_LOGIN = 128;
export const MAX_WEBHOOK_URL = 2048;

/**
 * Why `login` cannot be a merchant's login, or null. Basic authentication sends `login:api_key` and
 * splits at the first colon (decisions §2), so a login with one could never authenticate with Basic;
 * the portal's session login refuses an empty one.
 */
export function loginProblem(login: string): string | null {
  if (login.length === 0) return 'login must not be empty';
  if (login.length > MAX_LOGIN) return `login must be at most ${MAX_LOGIN} characters`;
  if (login.includes(':')) return 'login must not contain ":" (Basic authentication splits login:api_key there)';
  return null;
}

/** Why `v` cannot be a webhook URL (absolute http(s), no user info, no fragment), or null. */
export function webhookUrlProblem(v: string): string | null {
  if (v.length === 0) return 'webhook URL must not be empty';
  if (v.length > MAX_WEBHOOK_URL) return `webhook URL must be at most ${MAX_WEBHOOK_URL} characters`;
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    return 'webhook URL is not a valid URL';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'webhook URL must be http(s)';
  if (url.username || url.password) return 'webhook URL must not carry credentials (user:password@)';
  if (url.hash) return 'webhook URL must not have a fragment (#)';
  return null;
}

/** A webhook URL a merchant may set, as stored (normalized); null removes it; undefined: refused. */
export function parseWebhookUrl(v: unknown): string | null | undefined {
  if (v === null) return null;
  if (typeof v !== 'string' || webhookUrlProblem(v) !== null) return undefined;
  return new URL(v).toString();
}
