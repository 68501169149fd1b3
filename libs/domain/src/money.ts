/**
 * Money in integer minor units. ISO 4217 active codes with their exponents; every code not listed
 * in a special exponent set has 2 decimals. Metals and testing codes (XAU, XTS, ...) are excluded:
 * cards are not charged in them.
 */
const ISO_4217 =
  'AED AFN ALL AMD AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BOV BRL BSD BTN BWP BYN BZD ' +
  'CAD CDF CHE CHF CHW CLF CLP CNY COP COU CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP ' +
  'GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW ' +
  'KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN ' +
  'NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD ' +
  'SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH UGX USD USN UYI UYU UYW ' +
  'UZS VED VES VND VUV WST XAF XCD XCG XOF XPF YER ZAR ZMW ZWG';
const EXPONENT_0 = 'BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF XPF';
const EXPONENT_3 = 'BHD IQD JOD KWD LYD OMR TND';
const EXPONENT_4 = 'CLF UYW';

const EXPONENTS: ReadonlyMap<string, number> = (() => {
  const m = new Map<string, number>();
  for (const c of ISO_4217.split(' ')) m.set(c, 2);
  for (const c of EXPONENT_0.split(' ')) m.set(c, 0);
  for (const c of EXPONENT_3.split(' ')) m.set(c, 3);
  for (const c of EXPONENT_4.split(' ')) m.set(c, 4);
  return m;
})();

export const DEFAULT_CURRENCY = 'USD';

export function isIsoCurrency(code: string): boolean {
  return EXPONENTS.has(code);
}

/** Minor-unit exponent of an ISO 4217 currency; throws on an unknown code. */
export function currencyExponent(code: string): number {
  const e = EXPONENTS.get(code);
  if (e === undefined) throw new Error(`Unknown currency ${code}`);
  return e;
}

/**
 * Converts a decimal amount as received in JSON to integer minor units, exactly (no float
 * arithmetic: the shortest decimal representation of the number is parsed as text).
 * Returns null when the amount has more decimals than the currency allows or is not finite.
 */
export function toMinorUnits(amount: number, currency: string): bigint | null {
  if (typeof amount !== 'number' || !Number.isFinite(amount)) return null;
  const exp = currencyExponent(currency);
  let text = String(amount);
  if (/e/i.test(text)) {
    // Exponent notation: very large or very small numbers. Render with enough fixed digits.
    if (Math.abs(amount) >= 1e21) return null;
    text = amount.toFixed(20).replace(/0+$/, '').replace(/\.$/, '');
  }
  const negative = text.startsWith('-');
  if (negative) text = text.slice(1);
  const [whole, frac = ''] = text.split('.');
  if (frac.length > exp) return null;
  const minor = BigInt(whole! + frac.padEnd(exp, '0'));
  return negative ? -minor : minor;
}

/** Number of decimals written in a JSON number (as JavaScript prints it). */
export function decimalPlaces(amount: number): number {
  const text = String(amount);
  const m = /\.(\d+)(?:e([+-]\d+))?$/i.exec(text);
  if (!m) {
    const e = /e-(\d+)$/i.exec(text);
    return e ? Number(e[1]) : 0;
  }
  return Math.max(0, m[1]!.length - (m[2] ? Number(m[2]) : 0));
}

/** Minor units back to the decimal number the API shows (`1999n`, `USD` -> `19.99`). */
export function fromMinorUnits(minor: bigint | number | string, currency: string): number {
  const exp = currencyExponent(currency);
  const v = BigInt(minor);
  const negative = v < 0n;
  const digits = (negative ? -v : v).toString().padStart(exp + 1, '0');
  const text = exp === 0 ? digits : `${digits.slice(0, -exp)}.${digits.slice(-exp)}`;
  return Number((negative ? '-' : '') + text);
}
