import type Stripe from 'stripe';
import { classifyDecline, type DeclineInput } from '@retain/domain';
import {
  ProcessorUnavailableError,
  type CardNetwork,
  type ChargeRequest,
  type ChargeResult,
  type DetokenizeResult,
  type PaymentProcessor,
  type ProcessorLimits,
  type RefundRequest,
  type RefundResult,
} from './processor.port';
import {
  AmountNotExpressible,
  STRIPE_CURRENCIES,
  amountFitsProcessor,
  fromProcessorUnits,
  neverSent,
  processorUnits,
  refundAmountRefused,
} from './processor-amounts';
import { DEFAULT_NETWORK_TOKEN_ECI, expiryParts, networkOfBrand, retryAfterMs, wireError } from './wire';

let sdk: typeof Stripe | undefined;
/**
 * The Stripe SDK, loaded when the first Stripe adapter is built (as the Adyen SDK is): its import took
 * ~100 ms of CPU at every app start, and deployments without a Stripe account never use it.
 */
function stripeSdk(): typeof Stripe {
  if (!sdk) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const mod = require('stripe') as typeof Stripe & { default?: typeof Stripe };
    sdk = mod.default ?? mod;
  }
  return sdk;
}

/** A merchant's Stripe account (decisions §13 config file). */
export interface StripeAccountConfig {
  secret_key: string;
  /** Default https://api.stripe.com; tests and proxies point it elsewhere. */
  api_base?: string;
  /** Full card numbers may be sent (the account is allowed to); otherwise tokens only. */
  raw_card_data?: boolean;
  /**
   * Stripe enabled `payment_method_options[card][mit_exemption]` on the account (a gated parameter,
   * on request): the original charge's network transaction id is sent with each charge. Otherwise it
   * is not (Stripe keeps the network transaction id of a card saved with it).
   */
  mit_exemption?: boolean;
}

export interface StripeAdapterOptions {
  /** Per-request timeout (ms). A charge that times out is an `error`, resolved by lookup. */
  timeoutMs?: number;
  /** Where the adapter's warnings go (the app's logger); default: a process warning. Never given a secret. */
  warn?: (fields: Record<string, unknown>, msg: string) => void;
  /** What names the account in a warning (its id, merchant and division; never its key). */
  logContext?: Record<string, unknown>;
}

/** Metadata key of the attempt's vid on every PaymentIntent: what lookupCharge searches. */
export const STRIPE_KEY_METADATA = 'retain_attempt';
/** Metadata key of a refund's idempotency key on every Refund: what a resent refund looks for first. */
export const STRIPE_REFUND_METADATA = 'retain_refund';

/**
 * Stripe's decline_code (https://docs.stripe.com/declines/codes) as the ISO 8583 code the retry
 * policy knows, used when the network's own code (network_decline_code) is absent.
 */
const STRIPE_DECLINE_CODES: Readonly<Record<string, string>> = {
  insufficient_funds: '51',
  do_not_honor: '05',
  generic_decline: '05',
  call_issuer: '05',
  expired_card: '54',
  lost_card: '41',
  stolen_card: '43',
  pickup_card: '04',
  restricted_card: '62',
  fraudulent: '59',
  merchant_blacklist: '59',
  incorrect_number: '14',
  invalid_number: '14',
  invalid_account: '14',
  invalid_amount: '13',
  card_velocity_exceeded: '65',
  withdrawal_count_limit_exceeded: '65',
  card_not_supported: '57',
  transaction_not_allowed: '57',
  currency_not_supported: '57',
  not_permitted: '57',
  revocation_of_all_authorizations: 'R3',
  revocation_of_authorization: 'R1',
  stop_payment_order: 'R0',
  try_again_later: '91',
  issuer_not_available: '91',
  processing_error: '96',
  authentication_required: '1A',
};

/**
 * Stripe adapter (decisions §13): every charge is a merchant-initiated, off-session PaymentIntent
 * created and confirmed in one call (`confirm=true`, `off_session=recurring`) with the attempt's vid as
 * Idempotency-Key and as metadata, the original customer-initiated charge's network transaction id
 * in `payment_method_options[card][mit_exemption][network_transaction_id]` only for accounts
 * configured `"mit_exemption": true` (a gated Stripe parameter, absent from the public OpenAPI spec
 * and the SDK's types, that Stripe enables per account on request; should Stripe refuse it all the same
 * as an unknown parameter, the request is sent once more without it under the same key, and a warning
 * says so once per account),
 * a saved PaymentMethod (`cus_...|pm_...`, or a bare `pm_...` sent with the Customer Stripe says it
 * is attached to: `GET /v1/payment_methods/{id}` first), a network token with its cryptogram
 * and ECI, or, for accounts allowed raw card data, the card number in `payment_method_data`.
 */
export class StripeProcessor implements PaymentProcessor {
  readonly name = 'stripe';
  readonly limits: ProcessorLimits = {
    maxPaymentMethodIdLength: 255,
    // Stripe's statement_descriptor_suffix: at most 22 characters, no < > \ ' " *.
    billingDescriptorPattern: /^[A-Za-z0-9 .&-]{1,22}$/,
    amountFits: (amountMinor, currency) => amountFitsProcessor(amountMinor, currency, STRIPE_CURRENCIES),
  };
  private readonly stripe: Stripe;
  private readonly warn: (fields: Record<string, unknown>, msg: string) => void;
  /** The account was flagged `mit_exemption` but Stripe refused the parameter: said once. */
  private mitExemptionRefusedSaid = false;
  /**
   * The Customer of each bare `pm_…` read from Stripe that has one (attached PaymentMethods only: an
   * attachment never moves, where a loose PaymentMethod may be attached later), newest last.
   */
  private readonly customerOfPaymentMethod = new Map<string, string>();

  constructor(
    private readonly account: StripeAccountConfig,
    private readonly options: StripeAdapterOptions = {},
  ) {
    this.warn = options.warn ?? ((fields, msg) => process.emitWarning(`${msg} ${JSON.stringify(fields)}`));
    const base = new URL(account.api_base ?? 'https://api.stripe.com');
    this.stripe = new (stripeSdk())(account.secret_key, {
      host: base.hostname,
      port: base.port || (base.protocol === 'http:' ? 80 : 443),
      protocol: base.protocol === 'http:' ? 'http' : 'https',
      timeout: options.timeoutMs ?? 30_000,
      // Retries are the retry worker's business (with the same key): one call, one answer here.
      maxNetworkRetries: 0,
      telemetry: false,
    });
  }

  async charge(req: ChargeRequest): Promise<ChargeResult> {
    let params: Record<string, unknown>;
    try {
      params = this.params(req);
    } catch (e) {
      // Never sent (an amount the processor has no units for, a request the account may not make):
      // nothing charged, never a decline.
      return neverSent(e as Error);
    }
    // A bare `pm_…`: Stripe refuses a PaymentMethod attached to a Customer without that Customer
    // (400), so its Customer is read first. One Stripe no longer has (404) is settled not charged.
    const bare = barePaymentMethod(req);
    let customer: string | null = null;
    if (bare) {
      try {
        customer = await this.customerOf(bare);
      } catch (e) {
        return chargeErrorResult(e);
      }
      if (customer) params = this.params(req, { customer });
    }
    try {
      return intentResult(await this.createIntent(params, req.idempotencyKey));
    } catch (e) {
      if (!hasMitExemption(params) || !mitExemptionRefused(e)) return chargeErrorResult(e);
    }
    // Flagged, but Stripe has not enabled the parameter on the account. A request that failed
    // validation leaves no result under its key ("no idempotent result is saved":
    // docs.stripe.com/api/idempotent_requests): the same request without it, under the same key.
    this.sayMitExemptionRefused();
    try {
      const again = this.params(req, { mitExemption: false, ...(customer ? { customer } : {}) });
      return intentResult(await this.createIntent(again, req.idempotencyKey));
    } catch (e) {
      return chargeErrorResult(e);
    }
  }

  /** The Customer a PaymentMethod is attached to (`GET /v1/payment_methods/{id}`), null when none. */
  private async customerOf(paymentMethod: string): Promise<string | null> {
    const known = this.customerOfPaymentMethod.get(paymentMethod);
    if (known) return known;
    const pm = await this.stripe.paymentMethods.retrieve(paymentMethod);
    const customer = typeof pm.customer === 'string' ? pm.customer : (pm.customer?.id ?? null);
    if (customer) {
      if (this.customerOfPaymentMethod.size >= CUSTOMER_CACHE_SIZE) {
        this.customerOfPaymentMethod.delete(this.customerOfPaymentMethod.keys().next().value!);
      }
      this.customerOfPaymentMethod.set(paymentMethod, customer);
    }
    return customer;
  }

  private createIntent(params: Record<string, unknown>, idempotencyKey: string): Promise<Stripe.PaymentIntent> {
    return this.stripe.paymentIntents.create(params as unknown as Stripe.PaymentIntentCreateParams, {
      idempotencyKey,
    });
  }

  private sayMitExemptionRefused(): void {
    if (this.mitExemptionRefusedSaid) return;
    this.mitExemptionRefusedSaid = true;
    this.warn(
      { ...this.options.logContext, processor: 'stripe', param: MIT_EXEMPTION_PARAM },
      'Stripe refused payment_method_options[card][mit_exemption] as an unknown parameter: the account is configured ' +
        'with "mit_exemption": true but Stripe has not enabled it; charges are sent without the network transaction ' +
        'id. Ask Stripe to enable it, or set the account again without "mit_exemption".',
    );
  }

  async lookupCharge(idempotencyKey: string, original?: ChargeRequest): Promise<ChargeResult | null> {
    const replayable = original !== undefined && original.idempotencyKey === idempotencyKey;
    // A failed Search (not available to every account, e.g. in India; or down) decides nothing: the
    // replay below still answers, and "not charged" is then concluded only from the Customer's list.
    let searchFailed: unknown = null;
    try {
      // Search is eventually consistent (Stripe: usually searchable within a minute): a PaymentIntent
      // found is final; none found is only trusted when there is no original to replay.
      const found = await this.stripe.paymentIntents.search({
        query: `metadata['${STRIPE_KEY_METADATA}']:'${idempotencyKey.replace(/'/g, "\\'")}'`,
        limit: 1,
      });
      const pi = found.data[0];
      if (pi) return intentResult(pi);
    } catch (e) {
      if (!replayable) return errorResult(e);
      searchFailed = e;
    }
    // Replaying under the same key returns Stripe's stored response, or makes this attempt's
    // one charge if the first request never arrived.
    if (!original || !replayable) return null;
    const replayed = await this.charge(original);
    if (replayed.outcome !== 'error' || !replayed.storedAnswer || replayed.settled) return replayed;
    // Stripe answered with the error it saved for the first request under this key (a 500 once the
    // endpoint began executing: replayed for 24 h). No replay can charge under the key, and none can
    // learn more: the PaymentIntent the first request may have made is the answer. The search above
    // lags (under a minute, up to an hour in an outage: such a 500 may be one); the Customer's
    // PaymentIntents are a list, read after write.
    const customer = await this.customerOfRequest(original).catch(() => null);
    if (customer) {
      try {
        // Every page (a customer's charges since may fill more than one), back to well before the
        // first request: Stripe replays a saved answer for 24 h only.
        const since = Math.floor(Date.now() / 1000) - STORED_ANSWER_LOOKBACK_S;
        const pi = await findInList(
          this.stripe.paymentIntents.list({ customer, limit: 100, created: { gte: since } }),
          (x) => x.metadata?.[STRIPE_KEY_METADATA] === idempotencyKey,
        );
        if (pi) return intentResult(pi);
      } catch (e) {
        return errorResult(e);
      }
      // No PaymentIntent found: not charged, once the search has had its time (the caller's clock
      // counts from the first request, not from this replay).
      return replayed;
    }
    return searchFailed ? errorResult(searchFailed) : replayed;
  }

  /** The Customer of a charge's saved PaymentMethod (`cus_…|pm_…`, or a bare `pm_…` attached to one), else null. */
  private async customerOfRequest(req: ChargeRequest): Promise<string | null> {
    const inst = req.instrument;
    if (inst.kind !== 'token' || inst.isNetworkToken) return null;
    if (inst.token.includes('|')) return inst.token.split('|', 2)[0]!;
    const bare = barePaymentMethod(req);
    return bare ? this.customerOf(bare) : null;
  }

  async refund(req: RefundRequest): Promise<RefundResult> {
    try {
      const amount = Number(processorUnits(req.amountMinor, req.currency, STRIPE_CURRENCIES));
      // Stripe may prune an idempotency key once it is 24 hours old and then makes the refund again
      // (docs.stripe.com/api/idempotent_requests), while an unanswered refund is resent by the next
      // day's batch: the intent's refunds are read first (a list, not the lagging search) and one made
      // under this key is the answer.
      const earlier = await findInList(
        this.stripe.refunds.list({ payment_intent: req.processorTransactionId, limit: 100 }),
        (r) => r.metadata?.[STRIPE_REFUND_METADATA] === req.idempotencyKey,
      );
      const r =
        earlier ??
        (await this.stripe.refunds.create(
          {
            payment_intent: req.processorTransactionId,
            amount,
            metadata: { [STRIPE_REFUND_METADATA]: req.idempotencyKey },
          },
          { idempotencyKey: req.idempotencyKey },
        ));
      const result = refundResultOf(r);
      // Not final yet ("for credit card refunds, this can be pending, succeeded, or failed"): the refund
      // stays Processing, and the next batch reads this same refund again (found by its key above).
      if (result.outcome === 'pending')
        throw new ProcessorUnavailableError(`Stripe refund ${r.id} is ${r.status}`, null);
      return result;
    } catch (e) {
      if (e instanceof ProcessorUnavailableError) throw e;
      if (e instanceof AmountNotExpressible) return refundAmountRefused(e);
      // A refusal of the refund itself fails it. 401/403 refuse the account's key or its permissions:
      // nothing was decided about the refund, which is sent again once an operator fixes the account.
      if (
        e instanceof stripeSdk().errors.StripeError &&
        isDecision(e) &&
        e.statusCode !== 401 &&
        e.statusCode !== 403
      ) {
        return { outcome: 'failed', processorRefundId: null, message: `Refund rejected: ${e.code ?? e.type}` };
      }
      const err = errorResult(e);
      throw new ProcessorUnavailableError(err.message, err.outcome === 'error' ? (err.retryAfterMs ?? null) : null);
    }
  }

  /**
   * A refund read again by its id (`GET /v1/refunds/:id`): Stripe's refund `status` can move from
   * `pending`, or from `succeeded` for some methods, to `failed` (with `failure_reason`) or `canceled`.
   */
  async refundStatus(processorRefundId: string): Promise<RefundResult> {
    let r: Stripe.Refund;
    try {
      r = await this.stripe.refunds.retrieve(processorRefundId);
    } catch (e) {
      const err = errorResult(e);
      throw new ProcessorUnavailableError(err.message, err.outcome === 'error' ? (err.retryAfterMs ?? null) : null);
    }
    return refundResultOf(r);
  }

  /** Stripe never gives card numbers back: tokens are charged as they are (see checkToken). */
  async detokenize(): Promise<DetokenizeResult> {
    return { ok: false, message: 'Stripe payment methods cannot be detokenized' };
  }

  /**
   * A saved payment method (`pm_…`, `cus_…|pm_…`), charged as `payment_method` (with its Customer,
   * read from Stripe for a bare `pm_…` attached to one); a network token (the
   * DPAN's digits, `is_network_token`), charged as `payment_method_data[card][network_token]`. Digits
   * sent as a payment method id are refused by Stripe on every attempt: the review says so at once.
   */
  checkToken(token: string, opts: { isNetworkToken?: boolean } = {}): { ok: true } | { ok: false; message: string } {
    if (opts.isNetworkToken) {
      return /^\d{13,19}$/.test(token) ? { ok: true } : { ok: false, message: 'Not a network token number' };
    }
    return /^(cus_[A-Za-z0-9]+\|)?(pm|card|src)_[A-Za-z0-9_]+$/.test(token)
      ? { ok: true }
      : { ok: false, message: 'Not a Stripe PaymentMethod id' };
  }

  /**
   * The form parameters of the PaymentIntent (the SDK encodes them as Stripe's nested form). The
   * network transaction id only where the account is flagged `mit_exemption` (and `opts` does not
   * leave it out).
   */
  params(req: ChargeRequest, opts: { mitExemption?: boolean; customer?: string } = {}): Record<string, unknown> {
    const card: Record<string, unknown> = {};
    const p: Record<string, unknown> = {
      amount: Number(processorUnits(req.amountMinor, req.currency, STRIPE_CURRENCIES)),
      currency: req.currency.toLowerCase(),
      confirm: true,
      // Every charge is merchant-initiated and recurring (decisions §13): Stripe's cadence, not `true`.
      off_session: 'recurring',
      payment_method_types: ['card'],
      metadata: { [STRIPE_KEY_METADATA]: req.idempotencyKey },
    };
    if (req.billingDescriptor) p.statement_descriptor_suffix = req.billingDescriptor;
    const inst = req.instrument;
    if (inst.kind === 'pan') {
      if (!this.account.raw_card_data) throw new Error('This Stripe account takes tokenized payment methods only');
      const exp = expiryParts(inst.expiration);
      p.payment_method_data = {
        type: 'card',
        card: { number: inst.pan.replace(/[\s-]/g, ''), ...(exp ? { exp_month: exp.month, exp_year: exp.year } : {}) },
      };
    } else if (inst.isNetworkToken) {
      const exp = expiryParts(inst.expiration);
      p.payment_method_data = {
        type: 'card',
        card: {
          ...(exp ? { exp_month: exp.month, exp_year: exp.year } : {}),
          network_token: { number: inst.token, ...(exp ? { exp_month: exp.month, exp_year: exp.year } : {}) },
        },
      };
      card.network_token = {
        ...(inst.cryptogram ? { cryptogram: inst.cryptogram } : {}),
        electronic_commerce_indicator: inst.eci ?? DEFAULT_NETWORK_TOKEN_ECI,
      };
    } else {
      const [customer, pm] = inst.token.includes('|') ? inst.token.split('|', 2) : [opts.customer, inst.token];
      if (customer) p.customer = customer;
      p.payment_method = pm;
    }
    const mitExemption = opts.mitExemption ?? this.account.mit_exemption === true;
    if (mitExemption && req.networkTransactionId) {
      card.mit_exemption = { network_transaction_id: req.networkTransactionId };
    }
    if (Object.keys(card).length > 0) p.payment_method_options = { card };
    return p;
  }
}

/**
 * A Stripe refund's state as the port's answer: `succeeded` is final for now, not for good (a card
 * refund can still move to `failed`: mayStillFail, read again by refundStatus); `pending` and
 * `requires_action` are not final; anything else failed, with its status and Stripe's `failure_reason`
 * (never card data).
 */
function refundResultOf(r: Stripe.Refund): RefundResult {
  if (r.status === 'succeeded') {
    return { outcome: 'completed', processorRefundId: r.id, message: 'Refunded', mayStillFail: true };
  }
  if (r.status === 'pending' || r.status === 'requires_action') {
    return { outcome: 'pending', processorRefundId: r.id, message: `Refund ${r.status}` };
  }
  const reason = r.failure_reason ? ` (${r.failure_reason})` : '';
  return { outcome: 'failed', processorRefundId: r.id, message: `Refund ${r.status ?? 'failed'}${reason}` };
}

function declined(responseCode: string, mac: string | null, network: CardNetwork, id: string): ChargeResult {
  return {
    outcome: 'declined',
    responseCode,
    merchantAdviceCode: mac,
    network,
    processorTransactionId: id,
    message: 'Declined',
  };
}

function intentResult(pi: Stripe.PaymentIntent): ChargeResult {
  if (pi.status === 'succeeded' || pi.status === 'requires_capture') {
    // A partial authorization (request_partial_authorization): the intent received less than its amount.
    const received = pi.amount_received ?? 0;
    const partial = pi.status === 'succeeded' && received > 0 && received < pi.amount;
    return {
      outcome: 'approved',
      responseCode: '00',
      processorTransactionId: pi.id,
      message: 'Approved',
      ...(partial ? { amountMinor: fromProcessorUnits(BigInt(received), pi.currency, STRIPE_CURRENCIES) } : {}),
    };
  }
  const err = pi.last_payment_error;
  if (pi.status === 'requires_payment_method' || pi.status === 'canceled' || pi.status === 'requires_action') {
    if (!err && pi.status === 'requires_action') {
      return { ...declined('1A', null, 'other', pi.id), message: 'Authentication required' };
    }
    return cardDecline(err ?? {}, pi.id);
  }
  // processing, requires_confirmation: no decision yet.
  return wireError(`Stripe PaymentIntent ${pi.status}`);
}

interface StripeDeclineFields {
  code?: string | null;
  decline_code?: string | null;
  advice_code?: string | null;
  network_decline_code?: string | null;
  network_advice_code?: string | null;
  message?: string | null;
  payment_method?: { card?: { brand?: string | null } | null } | null;
}

function cardDecline(e: StripeDeclineFields, id: string): ChargeResult {
  const reason = e.decline_code ?? e.code ?? 'generic_decline';
  const network = networkOfBrand(e.payment_method?.card?.brand);
  const merchantAdviceCode = e.network_advice_code || null;
  const code = e.network_decline_code || STRIPE_DECLINE_CODES[reason] || '05';
  const advice = e.advice_code || null;
  return {
    outcome: 'declined',
    responseCode: advisedCode({ network, responseCode: code, merchantAdviceCode }, advice, !!e.network_decline_code),
    merchantAdviceCode,
    network,
    processorTransactionId: id,
    message: `Declined (${reason}${advice ? `, ${advice}` : ''})`,
  };
}

/**
 * Stripe's `advice_code` (docs.stripe.com/declines/card, "retrying issuer declines"): how to proceed
 * with an issuer's decline. The policy reads an attempt by its response code and the network's
 * Mastercard advice code wherever it reads it (the card's history and limits, the next plan), so the
 * advice becomes the code, and only where the network's answer does not already say as much or more:
 * - `do_not_try_again`: never again on this card. Unless the answer already blocks the card for good,
 *   the code is 46 (closed account: Visa category 1, a hard code of every network).
 * - `confirm_card_data`: not again with the same card data (the account updater first). Unless the
 *   answer already stops, the code is 6P (verification data failed: Visa category 3, a data-quality
 *   code of every network).
 * - `try_again_later`: soft. Without a network decline code, a stop read from Stripe's decline_code
 *   alone is 91 (Stripe's own `try_again_later` decline code); the network's own code is kept.
 */
function advisedCode(decline: DeclineInput, advice: string | null, networkCode: boolean): string {
  if (!advice) return decline.responseCode;
  const c = classifyDecline(decline);
  if (advice === 'do_not_try_again' && c.cardBlock !== 'permanent') return ADVICE_STOP_CODE;
  if (advice === 'confirm_card_data' && c.retryable) return ADVICE_CARD_DATA_CODE;
  if (advice === 'try_again_later' && !c.retryable && !networkCode) return STRIPE_DECLINE_CODES.try_again_later!;
  return decline.responseCode;
}

const ADVICE_STOP_CODE = '46';
const ADVICE_CARD_DATA_CODE = '6P';

/** Bare PaymentMethods whose Customer an adapter keeps (oldest forgotten first). */
const CUSTOMER_CACHE_SIZE = 10_000;

/** The PaymentMethod of a saved `pm_…` sent without its Customer (`cus_…|`), else null. */
function barePaymentMethod(req: ChargeRequest): string | null {
  const inst = req.instrument;
  if (inst.kind !== 'token' || inst.isNetworkToken) return null;
  return /^pm_/.test(inst.token) ? inst.token : null;
}

const MIT_EXEMPTION_PARAM = 'payment_method_options[card][mit_exemption]';

function hasMitExemption(params: Record<string, unknown>): boolean {
  const options = params.payment_method_options as { card?: { mit_exemption?: unknown } } | undefined;
  return options?.card?.mit_exemption !== undefined;
}

/** Stripe's refusal of the gated parameter on an account that does not have it (400 `parameter_unknown`). */
function mitExemptionRefused(e: unknown): boolean {
  return (
    e instanceof stripeSdk().errors.StripeInvalidRequestError &&
    e.statusCode === 400 &&
    e.code === 'parameter_unknown' &&
    (e.param ?? '').startsWith(MIT_EXEMPTION_PARAM)
  );
}

/** How far back a stored-answer lookup lists a Customer's PaymentIntents: twice Stripe's 24 h replay. */
const STORED_ANSWER_LOOKBACK_S = 48 * 3600;

/**
 * The first item of a Stripe list that matches, read page by page (the SDK's auto-pagination follows
 * `starting_after`): a list answers 100 items at most a page, newest first.
 */
async function findInList<T>(list: AsyncIterable<T>, match: (item: T) => boolean): Promise<T | undefined> {
  for await (const item of list) if (match(item)) return item;
  return undefined;
}

/** A Stripe answer that is a decision (4xx but 429/409), not a failure of the wire. */
function isDecision(e: InstanceType<typeof Stripe.errors.StripeError>): boolean {
  const s = e.statusCode ?? 0;
  return s >= 400 && s < 500 && s !== 429 && s !== 409 && e.type !== 'StripeIdempotencyError';
}

/**
 * A charge's failure. Stripe refusing the request itself as invalid (400 or 404
 * `invalid_request_error`: no such PaymentMethod, an amount under its minimum, ...) is its answer for
 * this key, and nothing was charged: `settled`, so the reconciliation records the attempt not charged
 * and the schedule goes on, where a plain error would keep it unknown for ever (every replay gets the
 * same refusal). Not settled: 401/403 (the account's key or permissions; once an operator fixes them,
 * the attempt's lookup gets the real answer), 409 and idempotency errors (another request with the key
 * is in progress or differs), 429 and 5xx.
 */
function chargeErrorResult(e: unknown): ChargeResult {
  const result = errorResult(e);
  if (
    result.outcome === 'error' &&
    e instanceof stripeSdk().errors.StripeInvalidRequestError &&
    (e.statusCode === 400 || e.statusCode === 404)
  )
    return { ...result, settled: true };
  return result;
}

function errorResult(e: unknown): ChargeResult {
  if (e instanceof stripeSdk().errors.StripeCardError) {
    const raw = e.raw as StripeDeclineFields & { payment_intent?: { id?: string } };
    return cardDecline(raw, raw.payment_intent?.id ?? e.payment_intent?.id ?? '');
  }
  if (e instanceof stripeSdk().errors.StripeRateLimitError) {
    const h = (e.headers ?? {}) as Record<string, string>;
    return wireError('Stripe rate limit (429)', retryAfterMs(h['retry-after']));
  }
  if (e instanceof stripeSdk().errors.StripeConnectionError) return wireError('Stripe unreachable or timed out');
  if (e instanceof stripeSdk().errors.StripeError) {
    const message = `Stripe ${e.statusCode ?? ''} ${e.type}${e.code ? ` ${e.code}` : ''}`.replace(/\s+/g, ' ');
    // The answer Stripe saved for an earlier request under the key, replayed: this request ran nothing.
    const headers = (e.headers ?? {}) as Record<string, string>;
    if (headers['idempotent-replayed'] === 'true') return { outcome: 'error', message, storedAnswer: true };
    return wireError(message);
  }
  return wireError('Stripe call failed');
}
