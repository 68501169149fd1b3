import { AuthCodeDescription } from '../statuses';
import { normalizeCode, ruleSetAt, visaCodeAsRead, visaDeclineCategory } from './network-rules.config';

/** Card network as the policy sees it; anything unknown is 'other' (ISO groups only). */
export type Network = 'visa' | 'mastercard' | 'amex' | 'discover' | 'other';

/** ISO 8583 response-code group of a decline (network-rules.md, "ISO 8583 response codes, grouped"). */
export type DeclineGroup = 'funds' | 'generic' | 'technical' | 'risky' | 'data' | 'hard' | 'auth';

/**
 * How long the next attempt should wait:
 * - technical: the processor or issuer was down; it comes back within hours;
 * - funds: the customer lacks money or limit; retry when money arrives (paydays, start of month);
 * - generic: the issuer said no without saying why; spread the attempts out;
 * - risky: the issuer suspects something; few attempts, widely spaced;
 * - never: no retry with the data we have.
 */
export type WaitClass = 'technical' | 'funds' | 'generic' | 'risky' | 'never';

/**
 * What a decline means for later attempts on the same CARD (not only this transaction):
 * - permanent: never again on this card number (Visa category 1, Mastercard MAC 03/21, hard codes of
 *   any brand, 1A / 70 of American Express, Discover and others), whatever its expiry date;
 * - new-card-data: not again with the same card data (Visa category 3, MAC 01/04).
 */
export type CardBlock = 'permanent' | 'new-card-data' | null;

export interface DeclineInput {
  network: Network | string | null | undefined;
  responseCode: string;
  merchantAdviceCode?: string | null;
}

export interface DeclineClassification {
  description: AuthCodeDescription;
  retryable: boolean;
  waitClass: WaitClass;
  group: DeclineGroup;
  cardBlock: CardBlock;
  /** Visa decline category, for Visa cards only. */
  visaCategory: 1 | 2 | 3 | 4 | null;
  reason: string;
}

const GROUPS: readonly (readonly [DeclineGroup, readonly string[]])[] = [
  ['funds', ['51', '61', '65', '62', '78']],
  ['generic', ['05', '01', '02']],
  ['technical', ['19', '91', '92', '96']],
  ['risky', ['59', '63', '83']],
  ['data', ['54', '55', '82', 'N7', '6P']],
  ['hard', ['14', '04', '07', '41', '43', '46', '15', '12', '57', 'R0', 'R1', 'R3']],
  ['auth', ['1A', '70']],
];

/** ISO group of a response code; every code not listed is a generic soft decline. */
export function declineGroup(responseCode: string): DeclineGroup {
  const code = normalizeCode(responseCode);
  return GROUPS.find(([, codes]) => codes.includes(code))?.[0] ?? 'generic';
}

/**
 * Brand names as stored or reported (card brand, processor network) to the network whose rules
 * apply. Maestro is a Mastercard brand and follows Mastercard's rules (advice codes, limits).
 */
export const normalizeNetwork = (network: string | null | undefined): Network => {
  const n = (network ?? '').trim().toLowerCase();
  if (n === 'maestro') return 'mastercard';
  return n === 'visa' || n === 'mastercard' || n === 'amex' || n === 'discover' ? n : 'other';
};

const SOFT_WAIT: Record<DeclineGroup, WaitClass> = {
  funds: 'funds',
  generic: 'generic',
  technical: 'technical',
  risky: 'risky',
  data: 'never',
  hard: 'never',
  auth: 'never',
};

/**
 * Classifies a processor decline into the spec's `Soft Failure` / `Hard Failure`, whether and when
 * to retry, and what it means for the card. Network rules come first (they are binding), then the
 * ISO group decides the wait. `at` selects the dated rule set (the decline's time).
 */
export function classifyDecline(input: DeclineInput, at: Date = new Date()): DeclineClassification {
  const network = normalizeNetwork(input.network);
  // A Visa code is read as the rules of its day read it (57 arrived as 05 until 25 Oct 2026).
  const code = network === 'visa' ? visaCodeAsRead(input.responseCode, at) : normalizeCode(input.responseCode);
  const mac = input.merchantAdviceCode ? normalizeCode(input.merchantAdviceCode) : null;
  const rules = ruleSetAt(at);
  const group = declineGroup(code);
  const visaCategory = network === 'visa' ? visaDeclineCategory(code, at) : null;
  const result = (
    retryable: boolean,
    waitClass: WaitClass,
    cardBlock: CardBlock,
    reason: string,
  ): DeclineClassification => ({
    description: retryable ? AuthCodeDescription.Soft : AuthCodeDescription.Hard,
    retryable,
    waitClass,
    group,
    cardBlock,
    visaCategory,
    reason,
  });

  if (network === 'mastercard' && mac) {
    if (rules.mastercard.stopAdviceCodes.includes(mac))
      return result(false, 'never', 'permanent', `Mastercard advice code ${mac}: do not try again`);
    if (rules.mastercard.newDataAdviceCodes.includes(mac))
      return result(
        false,
        'never',
        'new-card-data',
        `Mastercard advice code ${mac}: retry only with updated card data`,
      );
  }
  if (visaCategory === 1 || group === 'hard')
    return result(false, 'never', 'permanent', `response ${code}: the issuer will never approve this card`);
  if (visaCategory === 3 || group === 'data')
    return result(false, 'never', 'new-card-data', `response ${code}: card data must change before a retry`);
  // A merchant-initiated retry cannot run 3-D Secure; only the customer can fix this. American
  // Express, Discover and others: "none after a hard decline" (network-rules.md), so it blocks the card
  // for good like their other hard declines. Visa's is category 3 above; Mastercard's stops the
  // transaction (its blocks are its advice codes').
  if (group === 'auth')
    return result(
      false,
      'never',
      network === 'mastercard' ? null : 'permanent',
      `response ${code}: customer authentication needed`,
    );
  const wait = SOFT_WAIT[group];
  const advice = network === 'mastercard' && mac ? `, advice code ${mac}` : '';
  return result(true, wait, null, `response ${code}${advice}: ${group} decline, retry later`);
}

/**
 * A decline the account updater may cure: a data-quality one (Visa category 3, MAC 01/04, ISO data
 * codes), never authentication needed (1A/70: only the customer can authenticate, new data or not).
 */
export const updaterMayCure = (c: DeclineClassification): boolean =>
  c.cardBlock === 'new-card-data' && c.group !== 'auth';

/**
 * A decline that ends its payment method for the customer's account: a permanent card block, or
 * authentication needed (no merchant-initiated retry can pass it, whatever the network).
 */
export const endsPaymentMethod = (c: DeclineClassification): boolean =>
  c.cardBlock === 'permanent' || c.group === 'auth';

/**
 * A decline that ends the card for the customer's account, not only its payment method: every
 * payment method of the account carrying the same card (another payment_method.id, its network
 * token) ends with it. Authentication needed (1A/70): no merchant-initiated retry can pass it on any
 * of them, and the card's history holds it only as a Visa category 3 (lifted by new card data) or an
 * American Express / Discover / other block; a Mastercard's 1A/70 leaves no block there.
 */
export const endsCardForAccount = (c: DeclineClassification): boolean => c.group === 'auth';

/** A processor error (timeout, 5xx): no decision was made; retry within hours. */
export function classifyProcessorError(): DeclineClassification {
  return {
    description: AuthCodeDescription.Soft,
    retryable: true,
    waitClass: 'technical',
    group: 'technical',
    cardBlock: null,
    visaCategory: null,
    reason: 'processor error: no decision, retry within hours',
  };
}
