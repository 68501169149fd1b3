/**
 * Card-network reattempt rules (network-rules.md) as DATED configuration: the rule set in force at
 * an attempt's time applies. When a network changes its rules, add an entry with its effective
 * date; never edit a past entry, so old attempts keep being judged by the rules of their day.
 *
 * How the counts are read (network-limits.ts, README "Retry policy"): per card PER MERCHANT
 * (Mastercard's rule is per merchant; Visa charges its excess-reattempt fees per merchant); only
 * declined attempts count, plus attempts in flight; an approval ends a decline sequence (earlier
 * declines stop counting). Card blocks ("never", "not with this data") do not lapse with the
 * windows; "never" binds the card number for good, "not with this data" lifts when the card data
 * changes.
 */
export interface NetworkRuleSet {
  /** ISO date-time from which this set applies (inclusive). */
  effectiveFrom: string;
  visa: {
    /** Declined attempts per card per merchant in a rolling window (Visa Core Rules: categories 2, 3, 4). */
    maxAttempts: number;
    windowDays: number;
    /** Decline categories by response code (Table 7-2); every code not listed is category 4. */
    categories: { 1: readonly string[]; 2: readonly string[]; 3: readonly string[] };
    /**
     * Codes that issuers sent meaning another code while this set was in force: the code is read as
     * its alias, for the category and for the decline's class (57 arrived as 05 from Oct 2025 until
     * 25 Oct 2026).
     */
    readAs?: Readonly<Record<string, string>>;
    /** Customer- and merchant-initiated attempts are counted apart (since 25 May 2025). */
    citMitApart: boolean;
  };
  /**
   * American Express, Discover and every other network: no published excessive-retry program, so
   * Retain's own rule (network-rules.md): declined attempts per card per merchant in a rolling window.
   */
  others: { maxAttempts: number; windowDays: number };
  /**
   * Fees per excess reattempt, USD minor units (network-rules.md): Visa domestic and interregional,
   * Mastercard (US, since 2025). Amex, Discover and others publish no excessive-retry program.
   */
  fees: { visaDomesticMinor: number; visaInterregionalMinor: number; mastercardMinor: number };
  mastercard: {
    /** Declined attempts per card per merchant in a calendar day (UTC: the networks' processing day). */
    maxDeclinesPerDay: number;
    /**
     * Declined attempts per card per merchant at the same amount in a tumbling window of
     * `sameAmountWindowDays` calendar days, the first window starting on the UTC day of the
     * sequence's first counted decline at that amount.
     */
    maxSameAmount: number;
    sameAmountWindowDays: number;
    /** Merchant Advice Codes after which the card must never be tried again. */
    stopAdviceCodes: readonly string[];
    /** Merchant Advice Codes that forbid a retry until the card or token data changed. */
    newDataAdviceCodes: readonly string[];
    /** Merchant Advice Codes 24-30: no retry before this many hours after the decline. */
    retryAfterHours: Readonly<Record<string, number>>;
  };
}

/** Visa categories as of 25 Oct 2026 (network-rules.md, Table 7-2). */
const VISA_CATEGORIES: NetworkRuleSet['visa']['categories'] = {
  1: ['04', '07', '12', '14', '15', '41', '43', '46', '57', 'R0', 'R1', 'R3'],
  2: [
    ...['03', '19', '39', '51', '52', '53', '59', '61', '62', '65', '75', '78'],
    ...['83', '86', '91', '93', '96', '5C', '9G', 'N3', 'N4', 'Z5'],
  ],
  // 70 and 1A are category 3 in Europe; listing them everywhere is the stricter reading.
  3: ['54', '55', '82', '6P', 'N7', '70', '1A'],
};

/** The categories of an earlier date: `codes` moved out of `category` (back to category 4). */
const without = (
  categories: NetworkRuleSet['visa']['categories'],
  category: 1 | 2 | 3,
  codes: readonly string[],
): NetworkRuleSet['visa']['categories'] => ({
  ...categories,
  [category]: categories[category].filter((c) => !codes.includes(c)),
});

/** Before 25 Oct 2026: 83 was not yet category 2 (so category 4). */
const VISA_CATEGORIES_2025_04 = without(VISA_CATEGORIES, 2, ['83']);
/** Before 11 Apr 2025: 5C and 9G were not yet category 2 either. */
const VISA_CATEGORIES_2025_01 = without(VISA_CATEGORIES_2025_04, 2, ['5C', '9G']);

const MASTERCARD = {
  maxDeclinesPerDay: 10,
  maxSameAmount: 35,
  sameAmountWindowDays: 30,
  // 03, 21, and the "do not try again" of network-rules.md's other MACs (42, 99).
  stopAdviceCodes: ['03', '21', '42', '99'],
  newDataAdviceCodes: ['01', '04'],
  retryAfterHours: { '24': 1, '25': 24, '26': 48, '27': 96, '28': 144, '29': 192, '30': 240 },
};

/** Retain's own rule for American Express, Discover and others, unchanged since the start. */
const OTHERS = { maxAttempts: 20, windowDays: 30 };

/**
 * Excess-reattempt fees. Visa $0.10 domestic; "more cross-border" has no figure before the 0.25 USD
 * interregional fee of 25 Apr 2026, so the domestic figure is used (the lower bound). Mastercard
 * $0.50 since 2025, none published before.
 */
const FEES_2024 = { visaDomesticMinor: 10, visaInterregionalMinor: 10, mastercardMinor: 0 };
const FEES_2025 = { visaDomesticMinor: 10, visaInterregionalMinor: 10, mastercardMinor: 50 };
const FEES_2026_04 = { visaDomesticMinor: 10, visaInterregionalMinor: 25, mastercardMinor: 50 };

/**
 * Newest first. Dates from network-rules.md; "Oct 2025" (when issuers began sending 05 for 57)
 * has no day, so its first day is taken.
 */
export const NETWORK_RULE_SETS: readonly NetworkRuleSet[] = [
  {
    // 57 is category 1 and 83 category 2.
    effectiveFrom: '2026-10-25T00:00:00Z',
    visa: { maxAttempts: 20, windowDays: 30, categories: VISA_CATEGORIES, citMitApart: true },
    mastercard: MASTERCARD,
    others: OTHERS,
    fees: FEES_2026_04,
  },
  {
    // Visa's interregional excess-reattempt fee becomes 0.25 USD (issuers' 57 still arrives as 05).
    effectiveFrom: '2026-04-25T00:00:00Z',
    visa: {
      maxAttempts: 20,
      windowDays: 30,
      categories: VISA_CATEGORIES_2025_04,
      readAs: { '57': '05' },
      citMitApart: true,
    },
    mastercard: MASTERCARD,
    others: OTHERS,
    fees: FEES_2026_04,
  },
  {
    // Issuers' 57 arrives as 05: a 57 of this period is read as the generic 05.
    effectiveFrom: '2025-10-01T00:00:00Z',
    visa: {
      maxAttempts: 20,
      windowDays: 30,
      categories: VISA_CATEGORIES_2025_04,
      readAs: { '57': '05' },
      citMitApart: true,
    },
    mastercard: MASTERCARD,
    others: OTHERS,
    fees: FEES_2025,
  },
  {
    // Customer- and merchant-initiated attempts are counted apart.
    effectiveFrom: '2025-05-25T00:00:00Z',
    visa: { maxAttempts: 20, windowDays: 30, categories: VISA_CATEGORIES_2025_04, citMitApart: true },
    mastercard: MASTERCARD,
    others: OTHERS,
    fees: FEES_2025,
  },
  {
    // 5C and 9G become category 2.
    effectiveFrom: '2025-04-11T00:00:00Z',
    visa: { maxAttempts: 20, windowDays: 30, categories: VISA_CATEGORIES_2025_04, citMitApart: false },
    mastercard: MASTERCARD,
    others: OTHERS,
    fees: FEES_2025,
  },
  {
    effectiveFrom: '2025-01-01T00:00:00Z',
    visa: { maxAttempts: 20, windowDays: 30, categories: VISA_CATEGORIES_2025_01, citMitApart: false },
    mastercard: MASTERCARD,
    others: OTHERS,
    fees: FEES_2025,
  },
  {
    // Before 2025 Visa allowed 15 reattempts in 30 days.
    effectiveFrom: '1970-01-01T00:00:00Z',
    visa: { maxAttempts: 15, windowDays: 30, categories: VISA_CATEGORIES_2025_01, citMitApart: false },
    mastercard: MASTERCARD,
    others: OTHERS,
    fees: FEES_2024,
  },
];

/** The rule set in force at `at`: the newest whose effectiveFrom is not after it. */
/** Each rule set's effectiveFrom as a timestamp, parsed once (ruleSetAt runs for every limit check). */
const effectiveFromOf = (() => {
  const parsed = new WeakMap<NetworkRuleSet, { text: string; ms: number }>();
  return (s: NetworkRuleSet): number => {
    let p = parsed.get(s);
    if (p?.text !== s.effectiveFrom) {
      p = { text: s.effectiveFrom, ms: Date.parse(s.effectiveFrom) };
      parsed.set(s, p);
    }
    return p.ms;
  };
})();

export function ruleSetAt(at: Date, sets: readonly NetworkRuleSet[] = NETWORK_RULE_SETS): NetworkRuleSet {
  let best: NetworkRuleSet | null = null;
  let oldest: NetworkRuleSet | null = null;
  const t = at.getTime();
  for (const s of sets) {
    const from = effectiveFromOf(s);
    if (from <= t && (!best || from > effectiveFromOf(best))) best = s;
    if (!oldest || from < effectiveFromOf(oldest)) oldest = s;
  }
  if (!oldest) throw new Error('no network rule sets configured');
  return best ?? oldest;
}

/** Visa decline category (1-4) of a response code under the rules in force at `at`. */
export function visaDeclineCategory(responseCode: string, at: Date = new Date()): 1 | 2 | 3 | 4 {
  const code = visaCodeAsRead(responseCode, at);
  const c = ruleSetAt(at).visa.categories;
  if (c[1].includes(code)) return 1;
  if (c[2].includes(code)) return 2;
  if (c[3].includes(code)) return 3;
  return 4;
}

/** Response and advice codes are compared trimmed and upper-case ('r1' is 'R1'). */
export const normalizeCode = (code: string | null | undefined): string => (code ?? '').trim().toUpperCase();

/** A Visa response code as the rules in force at `at` read it (see `readAs`), normalized. */
export function visaCodeAsRead(responseCode: string | null | undefined, at: Date = new Date()): string {
  const code = normalizeCode(responseCode);
  return ruleSetAt(at).visa.readAs?.[code] ?? code;
}
