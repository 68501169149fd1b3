// What the merchant types as a refund amount, read exactly before anything is sent: a positive
// decimal with at most the currency's decimals (the API's own table of exponents), a comma accepted
// as the decimal separator. Anything else is refused on the page. Never Number() on raw input:
// Number("5,50") is NaN, which JSON sends as null.
import { currencyExponent, isIsoCurrency, toMinorUnits } from '../../../libs/domain/src/money';

export type RefundAmount = { ok: true; amount: number | null } | { ok: false; error: string };

/** The amount to send (null: the field is empty, all that can be refunded), or why it cannot be sent. */
export function readRefundAmount(typed: string, currency: string): RefundAmount {
  const text = typed.trim();
  if (text === '') return { ok: true, amount: null };
  // A code the table does not know cannot come from the API; 2 decimals, and the API's answer decides.
  const known = isIsoCurrency(currency);
  const exp = known ? currencyExponent(currency) : 2;
  const example = exp === 0 ? '5' : `5.${'5'.padEnd(exp, '0')}`;
  const m = /^(\d*)(?:([.,])(\d+))?$/.exec(text);
  if (!m || (m[1] === '' && m[2] === undefined)) {
    return {
      ok: false,
      error: `Enter the amount in digits only, with a dot or a comma before the decimals (for example ${example}).`,
    };
  }
  const whole = m[1] || '0';
  const frac = m[3] ?? '';
  if (m[2] === ',' && frac.length === 3) {
    return {
      ok: false,
      error: `"${text}" could hold a thousands separator: write the amount without one (${whole}${frac}, or ${whole}.${frac} for decimals).`,
    };
  }
  if (frac.length > exp) {
    return {
      ok: false,
      error:
        exp === 0
          ? `${currency} amounts have no decimals.`
          : `${currency} amounts have at most ${exp} decimal${exp === 1 ? '' : 's'}.`,
    };
  }
  const minor = BigInt(whole + frac.padEnd(exp, '0'));
  if (minor <= 0n) return { ok: false, error: 'The amount must be greater than 0.' };
  const amount = Number(frac ? `${whole}.${frac}` : whole);
  // The number JSON carries must be read back by the API as exactly these minor units.
  if (minor > BigInt(Number.MAX_SAFE_INTEGER) || (known && toMinorUnits(amount, currency) !== minor)) {
    return { ok: false, error: 'The amount is too large.' };
  }
  return { ok: true, amount };
}

/**
 * An amount as the API answered it (a decimal number), for display with every decimal its currency
 * has (the API's table: KWD 1.005, JPY 1,500); '—' when there is none.
 */
export function money(n: number | null | undefined, currency: string): string {
  if (n === null || n === undefined) return '—';
  const digits = isIsoCurrency(currency) ? currencyExponent(currency) : 2;
  return new Intl.NumberFormat('en-US', {
    style: 'currency',
    currency,
    minimumFractionDigits: digits,
    maximumFractionDigits: digits,
  }).format(n);
}
