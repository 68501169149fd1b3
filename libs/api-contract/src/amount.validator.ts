import { RetCode, RetMessage, currencyExponent, toMinorUnits, type ErrorEntry } from '@retain/domain';

export type AmountCheck = { ok: true; minor: bigint } | { ok: false; error: ErrorEntry };

// At most 15 significant digits (minor units below 10^15): a JSON number of 16 or more is read as the
// nearest double, which may print otherwise (90000000000000.01 is 90000000000000.02): refused, never
// stored changed. Amounts also stay exact in a JS number (responses convert back with fromMinorUnits).
const MAX_MINOR = 10n ** 15n - 1n;

const schemaError = (path: string, detail: string): AmountCheck => ({
  ok: false,
  error: { code: RetCode.RET009, message: RetMessage.schema(path, detail) },
});

/**
 * A positive amount with no more decimals than `currency` allows, as integer minor units
 * (JPY 0 decimals, USD 2, KWD 3). Used for transaction amounts and, by the refund service once it
 * knows the transaction's currency, for refund amounts. `currency` must be a valid ISO 4217 code.
 */
export function amountToMinor(amount: unknown, currency: string, path = 'amount'): AmountCheck {
  if (typeof amount !== 'number' || !Number.isFinite(amount)) return schemaError(path, 'must be a number');
  if (!(amount > 0)) return schemaError(path, 'must be greater than 0');
  const minor = toMinorUnits(amount, currency);
  if (minor === null) {
    if (amount >= 1e21) return schemaError(path, 'is too large');
    const exp = currencyExponent(currency);
    return schemaError(path, `must have at most ${exp} decimal places for ${currency}`);
  }
  if (minor > MAX_MINOR) return schemaError(path, 'is too large');
  // A positive amount below one minor unit (1e-25 prints as 0.000...): its decimals are too many.
  if (minor <= 0n) {
    return schemaError(path, `must have at most ${currencyExponent(currency)} decimal places for ${currency}`);
  }
  return { ok: true, minor };
}
