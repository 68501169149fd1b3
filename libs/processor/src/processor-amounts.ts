import { currencyExponent } from '@retain/domain';

/**
 * Retain keeps every amount in ISO 4217 minor units (libs/domain money.ts). A processor may count a
 * currency with other decimals: sent unconverted, an amount is charged 100 times too much or too
 * little. It may also take a currency's amounts only in multiples of some of its units. These tables
 * list only the currencies where the processor differs from ISO 4217.
 */
export interface ProcessorCurrencies {
  /** The processor's decimals where they differ from ISO 4217. */
  readonly decimals: Readonly<Record<string, number>>;
  /** Amounts the processor takes only in multiples of this many of its units. */
  readonly multipleOf?: Readonly<Record<string, number>>;
  /**
   * The smallest amount the processor charges in a currency, in ISO minor units (Retain's); a currency
   * absent here has no minimum of its own that we know of.
   */
  readonly minimumCharge?: Readonly<Record<string, number>>;
  /**
   * The most digits the processor takes in an amount (its units), by currency; `*` for every currency
   * not named. A currency absent (and no `*`) has no maximum that we know of.
   */
  readonly maximumDigits?: Readonly<Record<string, number>>;
}

/**
 * Stripe (docs.stripe.com/currencies): MGA is zero-decimal (ISO: 2); ISK stays two-decimal in the API
 * (ISO: 0), whole krónur only (support.stripe.com, "Deprecation of fractional ISK charges"). The
 * three-decimal BHD, JOD, KWD, OMR and TND are sent in thousandths, but PaymentIntents and Refunds
 * "require the least-significant (last) digit to be 0": multiples of 10 (1.005 KWD cannot be charged).
 */
export const STRIPE_CURRENCIES: ProcessorCurrencies = {
  decimals: { ISK: 2, MGA: 0 },
  multipleOf: { BHD: 10, JOD: 10, KWD: 10, OMR: 10, TND: 10 },
  // docs.stripe.com/currencies#minimum-and-maximum-charge-amounts: below these Stripe answers 400
  // `amount_too_small` on every attempt (USD 0.50, GBP 0.30, HUF 175.00, JPY 50 …), here in ISO minor
  // units. Stripe also applies its settlement currency's minimum after converting the charge to it,
  // which depends on the merchant's Stripe account and the day's rate: not known here, so only these
  // currencies' own minimums are checked (a USD 0.50 charge settled in GBP may still be refused).
  minimumCharge: {
    USD: 50,
    AED: 200,
    AUD: 50,
    BGN: 100,
    BRL: 50,
    CAD: 50,
    CHF: 50,
    CZK: 1500,
    DKK: 250,
    EUR: 50,
    GBP: 30,
    HKD: 400,
    HUF: 17500,
    INR: 50,
    JPY: 50,
    MXN: 1000,
    MYR: 200,
    NOK: 300,
    NZD: 50,
    PLN: 200,
    RON: 200,
    SEK: 300,
    SGD: 50,
    THB: 1000,
  },
  // Stripe's API reference (PaymentIntent `amount`): "supports up to eight digits (e.g., a value of
  // 99999999 for a USD charge of $999,999.99)"; above it every attempt is refused. IDR takes twelve.
  maximumDigits: { '*': 8, IDR: 12 },
};

/**
 * Adyen (docs.adyen.com/development-resources/currency-codes): "For CLP, CVE, IDR, and ISK the
 * standard has a different number of decimals": CLP and ISK two (ISO: 0), CVE and IDR none (ISO: 2).
 */
export const ADYEN_CURRENCIES: ProcessorCurrencies = { decimals: { CLP: 2, ISK: 2, CVE: 0, IDR: 0 } };

const TEN = 10n;

/**
 * The processor's units of an amount in ISO minor units; null when the processor cannot express it
 * (fewer decimals there and a fraction here, e.g. 2,500.50 MGA at Stripe; not a multiple it takes,
 * e.g. 1.005 KWD at Stripe).
 */
export function toProcessorUnits(amountMinor: bigint, currency: string, table: ProcessorCurrencies): bigint | null {
  const code = currency.toUpperCase();
  const units = convert(amountMinor, code, table.decimals[code]);
  const multiple = table.multipleOf?.[code];
  if (units === null || multiple === undefined) return units;
  return units % BigInt(multiple) === 0n ? units : null;
}

function convert(amountMinor: bigint, code: string, theirs: number | undefined): bigint | null {
  if (theirs === undefined) return amountMinor;
  const ours = currencyExponent(code);
  if (theirs >= ours) return amountMinor * TEN ** BigInt(theirs - ours);
  const factor = TEN ** BigInt(ours - theirs);
  return amountMinor % factor === 0n ? amountMinor / factor : null;
}

/**
 * An amount the processor reports (a partial authorization's captured part) in ISO minor units;
 * rounded down where the processor has more decimals (never more than it took).
 */
export function fromProcessorUnits(units: bigint, currency: string, table: ProcessorCurrencies): bigint {
  const code = currency.toUpperCase();
  const theirs = table.decimals[code];
  if (theirs === undefined) return units;
  const ours = currencyExponent(code);
  return theirs >= ours ? units / TEN ** BigInt(theirs - ours) : units * TEN ** BigInt(ours - theirs);
}

/** The processor's units of an amount; throws AmountNotExpressible where it has none for it (never sent). */
export function processorUnits(amountMinor: bigint, currency: string, table: ProcessorCurrencies): bigint {
  const units = toProcessorUnits(amountMinor, currency, table);
  if (units === null) throw new AmountNotExpressible(amountMinor, currency);
  return units;
}

/**
 * ISO 4217's fund codes: units of account (Chile's unidad de fomento CLF, Bolivia's Mvdol BOV, the
 * WIR CHE and CHW, Colombia's UVR COU, Mexico's UDI MXV, US next-day dollars USN, Uruguay's UYI and
 * UYW). ISO lists them, so the intake takes them; neither Stripe's supported currencies nor Adyen's
 * currency codes have any of them, so every attempt would be refused. The sandbox takes them.
 */
const FUND_CODES: ReadonlySet<string> = new Set(['BOV', 'CHE', 'CHW', 'CLF', 'COU', 'MXV', 'USN', 'UYI', 'UYW']);

/**
 * Whether the processor can charge this amount (the review refuses one it cannot, RET012): a currency
 * it charges in (not a fund code), it has units for it, and it is neither below the processor's
 * minimum charge in that currency nor longer than its maximum digits (refunds, never above a capture,
 * have no such limits: toProcessorUnits alone decides them).
 */
export function amountFitsProcessor(amountMinor: bigint, currency: string, table: ProcessorCurrencies): boolean {
  const code = currency.toUpperCase();
  if (FUND_CODES.has(code)) return false;
  const minimum = table.minimumCharge?.[code];
  if (minimum !== undefined && amountMinor < BigInt(minimum)) return false;
  const units = toProcessorUnits(amountMinor, code, table);
  if (units === null) return false;
  const digits = table.maximumDigits?.[code] ?? table.maximumDigits?.['*'];
  return digits === undefined || units < TEN ** BigInt(digits);
}

/**
 * Whether the processor a capture was made through can refund this amount of it (it has units for
 * it; refunds, never above the capture, have no minimum or digit limit). `processor`: the capturing
 * account's (`processor_accounts.processor`); null or the sandbox take any ISO amount.
 */
export function processorCanRefund(processor: string | null, amountMinor: bigint, currency: string): boolean {
  const table = processor === 'stripe' ? STRIPE_CURRENCIES : processor === 'adyen' ? ADYEN_CURRENCIES : null;
  return table === null || toProcessorUnits(amountMinor, currency, table) !== null;
}

/** An amount the processor has no units for: never sent (a charge answers a settled error, a refund fails). */
export class AmountNotExpressible extends Error {
  constructor(amountMinor: bigint, currency: string) {
    super(
      `The processor cannot charge or refund ${amountMinor} minor units of ${currency.toUpperCase()} (no such fraction there)`,
    );
    this.name = 'AmountNotExpressible';
  }
}

/**
 * A charge that was never sent (its amount, or a request the account may not make, such as a card
 * number on an account without raw card data): nothing charged under its key (settled, so the attempt
 * ends not charged). Never a decline: no issuer answered, so nothing enters the card's network history.
 */
export function neverSent(e: Error): { outcome: 'error'; message: string; settled: true } {
  return { outcome: 'error', message: e.message, settled: true };
}

/** A refund that was never sent because of its amount: it fails (no processor could make it). */
export function refundAmountRefused(e: AmountNotExpressible): {
  outcome: 'failed';
  processorRefundId: null;
  message: string;
} {
  return { outcome: 'failed', processorRefundId: null, message: e.message };
}
