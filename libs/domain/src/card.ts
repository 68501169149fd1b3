import { createHash } from 'node:crypto';

/** Luhn (mod 10) check of a string of digits. */
export function luhnValid(digits: string): boolean {
  if (!/^\d+$/.test(digits)) return false;
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return sum % 10 === 0;
}

export type CardBrand = 'visa' | 'mastercard' | 'amex' | 'discover' | 'jcb' | 'diners' | 'unionpay' | 'maestro';

/** Brand from the leading digits (IIN ranges), with the lengths each brand issues. */
export function cardBrand(digits: string): CardBrand | null {
  const n2 = Number(digits.slice(0, 2));
  const n4 = Number(digits.slice(0, 4));
  const n6 = Number(digits.slice(0, 6));
  if (digits.startsWith('4')) return 'visa';
  if ((n2 >= 51 && n2 <= 55) || (n4 >= 2221 && n4 <= 2720)) return 'mastercard';
  if (n2 === 34 || n2 === 37) return 'amex';
  const n3 = Number(digits.slice(0, 3));
  // Discover's ranges, 644-649 among them: checked before the broad Maestro range below, which
  // would give those cards Mastercard's limits instead of the 20-in-30-days rule.
  if (
    digits.startsWith('6011') ||
    digits.startsWith('65') ||
    (n3 >= 644 && n3 <= 649) ||
    (n6 >= 622126 && n6 <= 622925)
  )
    return 'discover';
  if (n4 >= 3528 && n4 <= 3589) return 'jcb';
  if (n2 === 36 || n2 === 38 || n2 === 39 || (n4 >= 3000 && n4 <= 3059)) return 'diners';
  if (n2 === 62) return 'unionpay';
  if (n2 === 50 || (n2 >= 56 && n2 <= 69)) return 'maestro';
  return null;
}

const BRAND_LENGTHS: Record<CardBrand, readonly number[]> = {
  visa: [13, 16, 19],
  mastercard: [16],
  amex: [15],
  discover: [16, 17, 18, 19],
  jcb: [16, 17, 18, 19],
  diners: [14, 15, 16, 17, 18, 19],
  unionpay: [16, 17, 18, 19],
  maestro: [12, 13, 14, 15, 16, 17, 18, 19],
};

/** Luhn, a known brand and a length that brand issues. */
export function validCardNumber(digits: string): boolean {
  if (!/^\d{12,19}$/.test(digits) || !luhnValid(digits)) return false;
  const brand = cardBrand(digits);
  return brand !== null && BRAND_LENGTHS[brand].includes(digits.length);
}

/** The spec's `account_hash`: SHA-1 hex of the digits of the full number. */
export function accountHash(cardNumber: string): string {
  return createHash('sha1').update(cardNumber.replace(/\D/g, '')).digest('hex');
}

/** First 6 and last 4 digits, the middle masked (decisions §10). */
export function maskCardNumber(digits: string): string {
  if (digits.length <= 10) return digits.slice(0, 6) + '*'.repeat(Math.max(0, digits.length - 6));
  return digits.slice(0, 6) + '*'.repeat(digits.length - 10) + digits.slice(-4);
}

/** A string that looks like a clear full card number (12-19 digits, spaces or dashes allowed). */
export function looksLikeFullCardNumber(value: string): boolean {
  const digits = value.replace(/[\s-]/g, '');
  return /^\d{12,19}$/.test(digits);
}

/** A compact JWE has five base64url segments separated by dots. */
export function looksLikeCompactJwe(value: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(value);
}

/**
 * Fingerprint of the card data an attempt sends besides the number (the expiry date), for the card
 * blocks of the network rules: a block lifts only when this changes (network-limits.ts). Null when
 * the expiry is unknown (unknown data counts as the same data).
 */
export function cardDataVersion(expiration: string | null | undefined): string | null {
  const exp = (expiration ?? '').replace(/\D/g, '');
  if (!exp) return null;
  return createHash('sha256').update(`card-data:v1:exp:${exp}`).digest('hex').slice(0, 32);
}
