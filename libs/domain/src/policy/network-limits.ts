import { classifyDecline, normalizeNetwork, type DeclineInput, type Network } from './decline-classifier';
import { normalizeCode, ruleSetAt, type NetworkRuleSet } from './network-rules.config';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/**
 * One earlier attempt on the same card BY THE SAME MERCHANT (the caller scopes the history: both
 * networks count per card per merchant; Visa charges its excess-reattempt fees per merchant).
 */
export interface CardAttempt {
  at: Date;
  amountMinor: bigint;
  /**
   * 'pending': handed to the processor (or about to be) and not recorded yet. It counts like a
   * decline until its outcome is known, so concurrent attempts cannot overrun a limit.
   */
  outcome: 'approved' | 'declined' | 'error' | 'pending';
  responseCode?: string | null;
  merchantAdviceCode?: string | null;
  /**
   * Fingerprint of the card data sent (e.g. a hash of the expiry date): a card block (Visa
   * category 1 or 3, Mastercard MAC 01/03/04/21, hard codes) binds only attempts with the same data.
   * Unknown (not given) counts as the same data; null is data sent without an expiry (a token, whose
   * expiry is optional), which any expiry since changes.
   */
  cardDataVersion?: string | null;
  /**
   * Who initiated it: Retain's retries are merchant-initiated (MIT, the default); a customer's own
   * attempt (CIT) is counted apart from them by Visa since 25 May 2025.
   */
  initiator?: Initiator;
  /**
   * The merchant's own decline of a submitted transaction (not a Retain attempt): it binds the card
   * (a block, a MAC 24-30 delay) but is not counted toward the limits, which count reattempts.
   */
  original?: boolean;
  /**
   * The card's network as the processor named it when this attempt was declined (its card brand):
   * a card known only by a processor's saved payment method id (no BIN) has no network until then.
   */
  network?: Network | string | null;
  /**
   * A forced deposit (service-spec `forced_deposit`): captured without asking the issuer. Its capture
   * is no issuer approval, so it does not restart Visa's count of the card's declines (nor is it one).
   */
  forcedDeposit?: boolean;
  /**
   * When the issuer decided (the attempt's charge: its in-flight mark, the time its charge request
   * carries), where that is earlier than `at` (its outcome recorded later: a lookup of an unknown
   * attempt). A decline is classified by the dated rules in force then (network-rules.config.ts: 57
   * is category 1 only from 25 Oct 2026). Default: `at`.
   */
  decidedAt?: Date;
}

export type Initiator = 'merchant' | 'customer';

export interface CardRef {
  network: Network | string | null | undefined;
  /** Fingerprint of the card data the next attempt would send (see CardAttempt). */
  cardDataVersion?: string | null;
}

export type LimitCheck =
  | { allowed: true }
  | { allowed: false; permanently: true; rule: string }
  | { allowed: false; permanently: false; notBefore: Date; rule: string };

export interface LimitOptions {
  /** RETRY_TIME_SCALE: every window and delay is this many times shorter. */
  timeScale?: number;
  /** Rule sets to choose from by attempt time (default: NETWORK_RULE_SETS), or one fixed set. */
  rules?: NetworkRuleSet | readonly NetworkRuleSet[];
  /** Who initiates the attempt being checked (default: the merchant, as every Retain retry). */
  initiator?: Initiator;
}

/**
 * May an attempt on this card be made at `at` for `amountMinor`? Checked before EVERY attempt,
 * whatever schedule proposed it. A rolling window of W holds the attempts in (at - W, at] (Visa,
 * others, Mastercard's same-amount count); Mastercard's daily count is per calendar day (UTC). The
 * answer for a temporary limit says when the attempt would fit.
 */
export function checkNetworkLimits(
  card: CardRef | Network | string | null | undefined,
  history: readonly CardAttempt[],
  at: Date,
  amountMinor: bigint,
  options: LimitOptions = {},
): LimitCheck {
  const ref: CardRef = typeof card === 'object' && card !== null ? card : { network: card };
  const scale = validScale(options.timeScale);
  const rules = pickRules(options.rules, at);
  const t = at.getTime();
  const past = history.filter((h) => h.at.getTime() <= t).sort((a, b) => a.at.getTime() - b.at.getTime());
  const network = normalizeNetwork(ref.network ?? learnedNetwork(past));

  const block = cardBlock(network, past, ref.cardDataVersion ?? null);
  if (block) return { allowed: false, permanently: true, rule: block };

  // Temporary limits: all that apply are combined, the latest notBefore wins.
  const waits: { notBefore: number; rule: string }[] = [];
  const rolling = (counted: readonly CardAttempt[], max: number, windowMs: number, rule: string) => {
    const inWindow = counted.filter((h) => t - h.at.getTime() < windowMs);
    // The new attempt must fit: allowed while fewer than `max` are in the window.
    if (inWindow.length >= max)
      waits.push({ notBefore: inWindow[inWindow.length - max]!.at.getTime() + windowMs, rule });
  };

  // What counts toward the limits: every attempt that did not approve. Visa's count restarts on an
  // approval (network-rules.md: "processors ... reset the count on an approval"); no other network's
  // does, as the rules state no reset for them. A forced deposit's capture is no issuer approval: it
  // restarts nothing (and, not declined, is not counted either). Processor errors count like declines:
  // a timeout may well have reached the issuer, and compliance must not hang on our not knowing.
  // Attempts still in flight count too, whatever was approved since: they may yet decline. The restart
  // is at the approval's own time (decidedAt): an approval recorded hours later (an unknown outcome
  // looked up) does not wipe out the declines the issuer saw after it.
  const decided = (h: CardAttempt): number => (h.decidedAt ?? h.at).getTime();
  const lastApproval =
    network === 'visa'
      ? past.reduce(
          (t0, h) => (h.outcome === 'approved' && !h.forcedDeposit ? Math.max(t0, decided(h)) : t0),
          -Infinity,
        )
      : -Infinity;
  const counted = past.filter(
    (h) => !h.original && (h.outcome === 'pending' || (h.outcome !== 'approved' && decided(h) > lastApproval)),
  );

  if (network === 'visa') {
    const v = rules.visa;
    const initiator = options.initiator ?? 'merchant';
    rolling(
      v.citMitApart ? counted.filter((h) => (h.initiator ?? 'merchant') === initiator) : counted,
      v.maxAttempts,
      (v.windowDays * DAY) / scale,
      `Visa: at most ${v.maxAttempts} declined attempts per card per merchant in ${v.windowDays} days`,
    );
  }

  if (network !== 'visa' && network !== 'mastercard') {
    const o = rules.others;
    rolling(
      counted,
      o.maxAttempts,
      (o.windowDays * DAY) / scale,
      `${network === 'other' ? 'Other networks' : network === 'amex' ? 'American Express' : 'Discover'}: at most ${o.maxAttempts} declined attempts per card per merchant in ${o.windowDays} days (Retain's rule)`,
    );
  }

  if (network === 'mastercard') {
    const mc = rules.mastercard;
    // Calendar days (UTC, the networks' processing day; scaled like every window): the day's count.
    const dayLength = DAY / scale;
    const dayOf = (ms: number): number => Math.floor(ms / dayLength);
    const today = dayOf(t);
    if (counted.filter((h) => dayOf(h.at.getTime()) === today).length >= mc.maxDeclinesPerDay)
      waits.push({
        notBefore: (today + 1) * dayLength,
        rule: `Mastercard: at most ${mc.maxDeclinesPerDay} declined attempts per card per merchant in a calendar day`,
      });
    // At most N declines at the same amount in a tumbling window of 30 calendar days. Where the
    // network's window starts is not ours to see (and the card's history is read back 31 days, not
    // to the sequence's start), so the count runs over every span of 30 days: then no tumbling
    // window, wherever it starts, ever holds more than N.
    rolling(
      counted.filter((h) => h.amountMinor === amountMinor),
      mc.maxSameAmount,
      (mc.sameAmountWindowDays * DAY) / scale,
      `Mastercard: at most ${mc.maxSameAmount} declined attempts per card per merchant at the same amount in a ${mc.sameAmountWindowDays}-calendar-day window`,
    );
    // MAC 24-30: the issuer named the earliest retry; every such advice still running holds, the
    // merchant's own original decline's too (decisions §16: obeyed from the first attempt).
    for (const h of [...counted, ...past.filter((p) => p.original)]) {
      const mac = normalizeCode(h.merchantAdviceCode);
      const hours = pickRules(options.rules, h.at).mastercard.retryAfterHours[mac];
      if (hours === undefined) continue;
      const notBefore = h.at.getTime() + (hours * HOUR) / scale;
      if (notBefore > t)
        waits.push({ notBefore, rule: `Mastercard advice code ${mac}: not before ${hours} h after the decline` });
    }
  }

  if (waits.length === 0) return { allowed: true };
  const latest = waits.reduce((a, b) => (b.notBefore > a.notBefore ? b : a));
  return {
    allowed: false,
    permanently: false,
    notBefore: new Date(latest.notBefore),
    rule: waits.map((w) => w.rule).join('; '),
  };
}

/**
 * When a submitted transaction's original decline is taken to have happened: the merchant's
 * `timestamp`, but never after the submission (the decline came before the merchant sent it; a
 * timestamp ahead of our clock is the merchant's clock or a mistake). The network rules in force then
 * read its code, in the review and in every plan; the timestamp itself is stored and shown as sent.
 */
export function originalDeclineAt(timestamp: Date | string, submittedAt: Date | string): Date {
  return new Date(Math.min(new Date(timestamp).getTime(), new Date(submittedAt).getTime()));
}

/**
 * The card's history for a check of "may we charge now": an entry dated after `now` counts as made
 * at `now`. checkNetworkLimits leaves out what comes after the checked time (right for a check at a
 * past time, as the fees count, or at a future candidate time, as the planners check), but an entry
 * dated after now is known already: a merchant's original decline recorded at its transaction's
 * timestamp, which may lie ahead of our clock, or another pod's in-flight mark or decline under a
 * clock running a few ms ahead. A block or a mark in flight binds from the moment it is known.
 * The entries keep their order in time (a Visa approval's reset stays where it was).
 */
export function historyAsOf<T extends CardAttempt>(history: readonly T[], now: Date): T[] {
  const t = now.getTime();
  return [...history]
    .sort((a, b) => a.at.getTime() - b.at.getTime())
    .map((h) => (h.at.getTime() > t ? { ...h, at: new Date(t) } : h));
}

/**
 * A card of no known network takes the one its processor named in its latest decline (a saved
 * payment method's brand): its network's rules bind it from then on, its other subscriptions' too.
 */
function learnedNetwork(past: readonly CardAttempt[]): string | null {
  for (let i = past.length - 1; i >= 0; i--) {
    const n = past[i]!.network;
    if (n && normalizeNetwork(n) !== 'other') return n;
  }
  return null;
}

/**
 * Whether a merchant's original decline binds its card, for its transaction's attempts on whichever
 * payment method carries that card: a card block (see CardBlock) or a Mastercard "retry after" (MAC
 * 24-30). Such a decline is kept with the card's history (CardAttempt.original).
 */
export function originalDeclineBindsCard(input: DeclineInput, at: Date): boolean {
  if (classifyDecline(input, at).cardBlock !== null) return true;
  const mac = normalizeCode(input.merchantAdviceCode);
  return (
    normalizeNetwork(input.network) === 'mastercard' && ruleSetAt(at).mastercard.retryAfterHours[mac] !== undefined
  );
}

/**
 * A decline that forbids any further attempt on the card (see CardBlock). "Never" (Visa category 1:
 * "none, ever"; MAC 03/21: "stop for good"; hard codes of other brands: "none after a hard decline")
 * binds the card for good: a new expiry date on the same number does not lift it (a reissued card
 * has a new number, so another fingerprint and its own history). "Not with this data" (Visa category
 * 3, MAC 01/04) binds until the card data changes (a new expiry date, or one where the declined
 * attempt went without any, ...). An approval does not lift
 * either (no attempt is made while they hold), and they do not lapse with time: the caller passes
 * every blocking decline of the card, however old.
 */
function cardBlock(network: Network, past: readonly CardAttempt[], dataVersion: string | null): string | null {
  for (let i = past.length - 1; i >= 0; i--) {
    const h = past[i]!;
    if (h.outcome !== 'declined' || !h.responseCode) continue;
    // Classified by the rules in force when the issuer declined, not when the decline was recorded.
    const c = classifyDecline(
      { network, responseCode: h.responseCode, merchantAdviceCode: h.merchantAdviceCode },
      h.decidedAt ?? h.at,
    );
    if (c.cardBlock === null) continue;
    if (c.cardBlock === 'permanent') return c.reason;
    // Unknown data of the earlier attempt (no version given) counts as the same data. A decline on data
    // sent without an expiry (version null: a token, whose expiry is optional) is lifted by any expiry
    // since, the account updater's: that is changed card data. Without a version now, nothing changed.
    const changed = dataVersion !== null && h.cardDataVersion !== undefined && h.cardDataVersion !== dataVersion;
    if (!changed) return c.reason;
  }
  return null;
}

function pickRules(rules: LimitOptions['rules'], at: Date): NetworkRuleSet {
  if (!rules) return ruleSetAt(at);
  return Array.isArray(rules) ? ruleSetAt(at, rules) : (rules as NetworkRuleSet);
}

export function validScale(timeScale: number | undefined): number {
  const s = timeScale ?? 1;
  if (!Number.isFinite(s) || s <= 0) throw new RangeError(`timeScale must be a positive number, got ${timeScale}`);
  return s;
}
