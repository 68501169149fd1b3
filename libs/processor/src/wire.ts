import type { CardNetwork, ChargeResult } from './processor.port';

/**
 * Shared pieces of the real-processor adapters: the network of a card brand name, ISO 8583 codes for
 * processors' own decline reasons, and the `error` outcome of a failed wire call.
 */

/**
 * Retain's network name for a processor's brand string: Stripe's `visa`, `mastercard`, `amex`, ...;
 * Adyen's brand variants (docs.adyen.com/development-resources/paymentmethodvariant) name a family by
 * its prefix (a rule for `mc` "is applied to all payment instruments under mc, such as mcbusinessdebit
 * and mcdebit"): `mc…` (`mcdebit`, `mccredit`, `mc_applepay`, `mcmaestro`) and `maestro…` are
 * Mastercard; `visa…`, `electron` (Visa Electron) and `vpay` (V PAY) Visa; `amex…` American Express;
 * `discover…` Discover. Others (`jcb`, `diners`, `cup`) have no rules of their own: `other`.
 */
export function networkOfBrand(brand: string | null | undefined): CardNetwork {
  const b = (brand ?? '').trim().toLowerCase();
  if (b.startsWith('visa') || b.startsWith('electron') || b.startsWith('vpay')) return 'visa';
  if (b.startsWith('mc') || b.startsWith('mastercard') || b.startsWith('maestro')) return 'mastercard';
  if (b.startsWith('amex') || b === 'american express') return 'amex';
  if (b.startsWith('discover')) return 'discover';
  return 'other';
}

/**
 * The 2-character network code at the start of a processor's raw text ("51 : Insufficient funds",
 * "N7 : CVV2 failure"). Adyen sends the code with or without its leading zero
 * (https://docs.adyen.com/development-resources/raw-acquirer-responses): a single digit followed by
 * its colon ("7 : Pickup card, special condition") is the code 07. A digit not followed by a colon
 * ("3 attempts ...", a bare "7") is not read as a code.
 */
export function leadingCode(raw: string | null | undefined): string | null {
  const text = raw ?? '';
  const two = /^\s*([0-9A-Z]{2})(?![0-9A-Za-z])/.exec(text);
  if (two) return two[1]!;
  const one = /^\s*(\d)\s*:/.exec(text);
  return one ? `0${one[1]!}` : null;
}

/** Retry-After (seconds or an HTTP date) in ms, or null. */
export function retryAfterMs(value: string | string[] | null | undefined, now = Date.now()): number | null {
  const v = Array.isArray(value) ? value[0] : value;
  if (!v) return null;
  if (/^\d+$/.test(v.trim())) return Number(v.trim()) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/** The port's unknown outcome. The message never carries request data (card numbers, keys). */
export function wireError(message: string, retryAfter: number | null = null): ChargeResult {
  return retryAfter === null ? { outcome: 'error', message } : { outcome: 'error', message, retryAfterMs: retryAfter };
}

/** `YYYYMM` (or `MMYY`, `MM/YY`) as month and 4-digit year. */
export function expiryParts(expiration: string | null | undefined): { month: number; year: number } | null {
  const d = (expiration ?? '').replace(/\D/g, '');
  if (d.length === 6 && (d.startsWith('20') || d.startsWith('19'))) {
    return { year: Number(d.slice(0, 4)), month: Number(d.slice(4)) };
  }
  if (d.length === 4) return { month: Number(d.slice(0, 2)), year: 2000 + Number(d.slice(2)) };
  if (d.length === 6) return { month: Number(d.slice(0, 2)), year: Number(d.slice(2)) };
  return null;
}

/** Default ECI of a merchant-initiated network-token charge without one of its own. */
export const DEFAULT_NETWORK_TOKEN_ECI = '07';
