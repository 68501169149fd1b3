// Digit runs that could be a full card number (12-19 digits, optionally separated), API keys
// and webhook secrets are masked in any text that leaves the process (logs, failed-job rows),
// whatever field or message they hid in.
const PAN_RE = /\b\d(?:[ -]?\d){11,18}\b/g;
// Processor keys first (Stripe `sk_live_…`, `rk_test_…`: only the prefix is kept), then Retain's own
// `rk_` API keys (8 characters kept to tell them apart) and webhook secrets.
const PROCESSOR_KEY_RE = /\b((?:sk|rk)_(?:live|test)_)[A-Za-z0-9]+/g;
const SECRET_RE = /\b(rk_[A-Za-z0-9_-]{8})[A-Za-z0-9_-]+|\b(whsec_)[A-Za-z0-9+/=]+/g;

export function scrubSecrets(line: string): string {
  return line
    .replace(PAN_RE, (m) => {
      const digits = m.replace(/\D/g, '');
      return `${digits.slice(0, 6)}${'*'.repeat(Math.max(0, digits.length - 10))}${digits.slice(-4)}`;
    })
    .replace(PROCESSOR_KEY_RE, '$1[REDACTED]')
    .replace(SECRET_RE, (_m, key: string | undefined, wh: string | undefined) =>
      key ? `${key}[REDACTED]` : `${wh}[REDACTED]`,
    );
}
