import { randomId, WireFake, type FakeResponse, type RecordedRequest } from './fake-server';

/**
 * A local Stripe written from Stripe's public API reference (https://docs.stripe.com/api):
 * `POST /v1/payment_intents` (form-encoded, `Authorization: Bearer sk_...`), `GET
 * /v1/payment_intents/search?query=metadata['k']:'v'` (eventually consistent: `searchLagMs`), `GET
 * /v1/payment_intents?customer=cus_…` (a list: no lag), `GET /v1/payment_intents/:id`, `POST
 * /v1/refunds`, `GET /v1/refunds/:id`, `GET /v1/payment_methods/:id`, `POST /v1/payment_methods/:id/attach`; idempotency per https://docs.stripe.com/api/idempotent_requests (the same key
 * replays the stored status and body with `Idempotent-Replayed: true`; other parameters under a
 * used key: 400 `idempotency_error`; a key still in progress: 409); card declines as 402
 * `card_error` with `decline_code`, `advice_code`, `network_decline_code`, `network_advice_code` and the
 * PaymentIntent (https://docs.stripe.com/declines/codes). Outcomes follow Stripe's test cards and
 * PaymentMethods (https://docs.stripe.com/testing); `script()` adds others.
 */
export interface StripeDecline {
  decline_code: string;
  network_decline_code?: string;
  network_advice_code?: string;
  /**
   * Stripe's own advice (docs.stripe.com/api/errors: "a short string indicating how to proceed with an
   * error if the issuer provides one"): `do_not_try_again`, `try_again_later`, `confirm_card_data`.
   */
  advice_code?: 'do_not_try_again' | 'try_again_later' | 'confirm_card_data';
  /** Card brand of the PaymentMethod (default: from the number or pm name). */
  brand?: string;
}

type Outcome = 'succeeded' | StripeDecline;

const TEST_CARDS: Record<string, Outcome> = {
  pm_card_visa: 'succeeded',
  pm_card_mastercard: 'succeeded',
  pm_card_amex: 'succeeded',
  '4242424242424242': 'succeeded',
  '5555555555554444': 'succeeded',
  pm_card_chargeDeclined: { decline_code: 'generic_decline', network_decline_code: '05' },
  '4000000000000002': { decline_code: 'generic_decline', network_decline_code: '05' },
  pm_card_chargeDeclinedInsufficientFunds: { decline_code: 'insufficient_funds', network_decline_code: '51' },
  '4000000000009995': { decline_code: 'insufficient_funds', network_decline_code: '51' },
  pm_card_chargeDeclinedExpiredCard: { decline_code: 'expired_card', network_decline_code: '54' },
  '4000000000000069': { decline_code: 'expired_card', network_decline_code: '54' },
  pm_card_chargeDeclinedLostCard: { decline_code: 'lost_card', network_decline_code: '41' },
  '4000000000009987': { decline_code: 'lost_card', network_decline_code: '41' },
  pm_card_authenticationRequired: { decline_code: 'authentication_required' },
  '4000002760003184': { decline_code: 'authentication_required' },
};

interface StoredIntent {
  pi: Record<string, unknown>;
  amountRefunded: number;
  /**
   * The request's `off_session` as sent (`true`, `one_off`, `recurring`; null when absent): Stripe takes
   * it but does not show it on the PaymentIntent (docs.stripe.com/api/payment_intents/create).
   */
  offSession: string | null;
}

interface IdempotentEntry {
  params: string;
  path: string;
  response: FakeResponse | null; // null: in progress
}

export class StripeFake extends WireFake {
  /** Whether the account may send raw card numbers (Stripe gates it per account). */
  rawCardDataAllowed = false;
  /**
   * Whether the account may send `payment_method_options[card][mit_exemption]` (the original charge's
   * network transaction id): a gated parameter Stripe enables per account on request. Off, as at
   * Stripe: a request carrying it is refused as an unknown parameter (400 `parameter_unknown`).
   */
  mitExemptionEnabled = false;
  /** PaymentIntents by id. */
  readonly intents = new Map<string, StoredIntent>();
  readonly refunds: Record<string, unknown>[] = [];
  private readonly scripted = new Map<string, Outcome>();
  /**
   * PaymentMethod ids Stripe no longer has (detached, deleted): a charge gets 400 `resource_missing`,
   * `GET /v1/payment_methods/:id` 404 `resource_missing`.
   */
  readonly missing = new Set<string>();
  /**
   * The Customer each attached PaymentMethod belongs to (`attach()`, `POST /v1/payment_methods/:id/attach`).
   * A PaymentIntent naming an attached PaymentMethod without its Customer is refused (400).
   */
  private readonly owners = new Map<string, string>();
  private readonly idempotency = new Map<string, IdempotentEntry>();
  /**
   * How long a new PaymentIntent stays out of search results (docs.stripe.com/api/payment_intents/search:
   * "Don't use search in read-after-write flows ... data is searchable in less than a minute.
   * Occasionally, propagation ... can be up to an hour behind during outages"). Lists have no lag.
   */
  searchLagMs = 0;
  /** When each PaymentIntent was made (ms), for the search lag. */
  private readonly madeAt = new Map<string, number>();
  /**
   * The next PaymentIntent creations under an Idempotency-Key that begin executing and then fail with a
   * 500 `api_error`, and whether the PaymentIntent was made (and charged) before the failure.
   */
  private readonly executingFailures: ('none' | 'succeeded')[] = [];

  constructor(readonly secretKey = 'sk_test_fake_retain') {
    super(false);
  }

  /**
   * Forgets every idempotency key, as Stripe may once a key is 24 hours old ("we generate a new request
   * if a key is reused after the original is pruned": docs.stripe.com/api/idempotent_requests).
   */
  pruneIdempotency(): void {
    this.idempotency.clear();
  }

  /**
   * Status of the refunds made from now on: `pending` until `settleRefund` (docs.stripe.com/api/refunds/object:
   * "For credit card refunds, this can be pending, succeeded, or failed").
   */
  refundStatus: 'succeeded' | 'pending' = 'succeeded';

  /**
   * A refund reaches another status: a pending one its final status, or a succeeded one `failed` after
   * all, with Stripe's `failure_reason` (docs.stripe.com/api/refunds/object: `lost_or_stolen_card`,
   * `expired_or_canceled_card`, `charge_for_pending_refund_disputed`, `declined`, `insufficient_funds`,
   * `merchant_request`, `unknown`). A failed refund gives its amount back to the PaymentIntent.
   */
  settleRefund(id: string, status: 'succeeded' | 'failed' | 'canceled', failureReason?: string): void {
    const r = this.refunds.find((x) => x.id === id);
    if (!r) return;
    if ((status === 'failed' || status === 'canceled') && r.status !== 'failed' && r.status !== 'canceled') {
      const stored = this.intents.get(r.payment_intent as string);
      if (stored) stored.amountRefunded -= r.amount as number;
    }
    r.status = status;
    if (status === 'failed') r.failure_reason = failureReason ?? 'unknown';
  }

  /**
   * The next `count` `POST /v1/payment_intents` under an Idempotency-Key begin executing, then fail with
   * a 500 `api_error`. Unlike an injected `5xx` (answered before anything runs), the result is saved
   * under the key and replayed (with `Idempotent-Replayed: true`) for as long as Stripe keeps the key:
   * "Stripe saves the status code and body of the first request made with a given idempotency key after
   * endpoint execution begins. Retries with the same key return the saved response, including 500
   * errors" (docs.stripe.com/api/idempotent_requests). `made`: `succeeded` when the PaymentIntent was
   * created and charged before the failure, `none` when nothing was.
   */
  failExecuting(count = 1, made: 'none' | 'succeeded' = 'none'): void {
    for (let i = 0; i < count; i++) this.executingFailures.push(made);
  }

  /** The PaymentMethod is attached to the Customer (as a SetupIntent or `setup_future_usage` leaves it). */
  attach(pm: string, customer: string): void {
    this.owners.set(pm, customer);
  }

  /** The PaymentMethod id or card number answers `outcome`. */
  script(pmOrNumber: string, outcome: Outcome): void {
    this.scripted.set(pmOrNumber, outcome);
  }

  /** PaymentIntents that succeeded (money taken), e.g. to prove one charge per key. */
  succeeded(): Record<string, unknown>[] {
    return [...this.intents.values()].map((s) => s.pi).filter((pi) => pi.status === 'succeeded');
  }

  protected parseBody(raw: string): Record<string, unknown> {
    return parseStripeForm(raw);
  }

  protected errorBody(status: number): unknown {
    return status === 429
      ? {
          error: {
            type: 'invalid_request_error',
            code: 'rate_limit',
            message: 'Too many requests made to the API too quickly',
          },
        }
      : { error: { type: 'api_error', message: 'An unknown error occurred' } };
  }

  protected handle(req: RecordedRequest): FakeResponse {
    if (req.headers.authorization !== `Bearer ${this.secretKey}`) {
      return err(401, { type: 'invalid_request_error', message: 'Invalid API Key provided: sk_****' });
    }
    if (req.method === 'GET') return this.get(req);
    const key = req.headers['idempotency-key'];
    if (typeof key !== 'string' || !key) return this.post(req);
    const params = stableParams(req.body);
    const seen = this.idempotency.get(key);
    if (seen) {
      if (!seen.response) {
        return err(409, {
          type: 'idempotency_error',
          code: 'idempotency_key_in_use',
          message: 'There is currently another in-progress request using this Idempotent Key.',
        });
      }
      if (seen.params !== params || seen.path !== req.path) {
        return err(400, {
          type: 'idempotency_error',
          message: `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${key}' if you meant to execute a different request.`,
        });
      }
      return { ...seen.response, headers: { ...(seen.response.headers ?? {}), 'Idempotent-Replayed': 'true' } };
    }
    const entry: IdempotentEntry = { params, path: req.path, response: null };
    this.idempotency.set(key, entry);
    const failing = req.path === '/v1/payment_intents' ? this.executingFailures.shift() : undefined;
    let response = this.post(req);
    if (failing === 'none' && response.status === 200) {
      // Began executing, failed before the PaymentIntent was made: nothing charged, the 500 saved.
      this.intents.delete((response.body as { id: string }).id);
    }
    if (failing !== undefined && response.status === 200) {
      response = { status: 500, body: this.errorBody(500) };
    }
    // Stripe saves the result of a request that began executing (validation failures are not saved).
    if (response.status === 400 && !(response.body as { error: { payment_intent?: unknown } }).error.payment_intent) {
      this.idempotency.delete(key);
    } else {
      entry.response = { ...response, headers: { ...(response.headers ?? {}), 'Idempotency-Key': key } };
    }
    return response;
  }

  private get(req: RecordedRequest): FakeResponse {
    if (req.path === '/v1/refunds') {
      // GET /v1/refunds?payment_intent=pi_…&limit=n: the intent's refunds, newest first (a list, not search).
      const pi = req.query.get('payment_intent');
      const all = this.refunds.filter((r) => pi === null || r.payment_intent === pi).reverse();
      return { status: 200, body: listPage(all, req.query, '/v1/refunds') };
    }
    const refundPath = /^\/v1\/refunds\/([^/]+)$/.exec(req.path);
    if (refundPath) {
      // GET /v1/refunds/:id (docs.stripe.com/api/refunds/retrieve).
      const r = this.refunds.find((x) => x.id === decodeURIComponent(refundPath[1]!));
      if (!r) return err(404, { type: 'invalid_request_error', code: 'resource_missing', message: 'No such refund' });
      return { status: 200, body: r };
    }
    if (req.path === '/v1/payment_intents/search') {
      const query = req.query.get('query') ?? '';
      const m = /^metadata\['([^']+)'\]:'((?:[^'\\]|\\.)*)'$/.exec(query.trim());
      if (!m) return err(400, { type: 'invalid_request_error', message: `Invalid search query: ${query}` });
      const [, k, v] = m;
      const value = v!.replace(/\\'/g, "'");
      const data = [...this.intents.values()]
        .map((s) => s.pi)
        .filter((pi) => Date.now() - (this.madeAt.get(pi.id as string) ?? 0) >= this.searchLagMs)
        .filter((pi) => (pi.metadata as Record<string, string>)[k!] === value);
      return {
        status: 200,
        body: { object: 'search_result', data, has_more: false, next_page: null, url: '/v1/payment_intents/search' },
      };
    }
    if (req.path === '/v1/payment_intents') {
      // GET /v1/payment_intents?customer=cus_…&limit=n (docs.stripe.com/api/payment_intents/list): newest
      // first, read after write (no search lag).
      const customer = req.query.get('customer');
      const createdGte = req.query.get('created[gte]');
      const all = [...this.intents.values()]
        .map((s) => s.pi)
        .filter((pi) => customer === null || pi.customer === customer)
        .filter((pi) => createdGte === null || (pi.created as number) >= Number(createdGte))
        .reverse();
      return { status: 200, body: listPage(all, req.query, '/v1/payment_intents') };
    }
    const pmPath = /^\/v1\/payment_methods\/([^/]+)$/.exec(req.path);
    if (pmPath) {
      const id = decodeURIComponent(pmPath[1]!);
      if (!this.paymentMethodExists(id)) return noSuchPaymentMethod(404, id);
      return { status: 200, body: this.paymentMethodObject(id) };
    }
    const m = /^\/v1\/payment_intents\/([^/]+)$/.exec(req.path);
    const stored = m ? this.intents.get(m[1]!) : undefined;
    if (!stored)
      return err(404, { type: 'invalid_request_error', code: 'resource_missing', message: 'No such payment_intent' });
    return { status: 200, body: stored.pi };
  }

  private post(req: RecordedRequest): FakeResponse {
    if (req.path === '/v1/payment_intents') return this.createIntent(req.body);
    if (req.path === '/v1/refunds') return this.createRefund(req.body);
    const attach = /^\/v1\/payment_methods\/([^/]+)\/attach$/.exec(req.path);
    if (attach) return this.attachPaymentMethod(decodeURIComponent(attach[1]!), req.body);
    return err(404, { type: 'invalid_request_error', message: `Unrecognized request URL (POST: ${req.path})` });
  }

  private createIntent(b: Record<string, unknown>): FakeResponse {
    // An unknown parameter is refused before anything else is read.
    const options = b.payment_method_options as { card?: Record<string, unknown> } | undefined;
    if (options?.card?.mit_exemption !== undefined && !this.mitExemptionEnabled) {
      return err(400, {
        type: 'invalid_request_error',
        code: 'parameter_unknown',
        param: 'payment_method_options[card][mit_exemption]',
        message: 'Received unknown parameter: payment_method_options[card][mit_exemption]',
        doc_url: 'https://stripe.com/docs/error-codes/parameter-unknown',
      });
    }
    const amount = Number(b.amount);
    if (!Number.isInteger(amount) || amount < 1) {
      return err(400, {
        type: 'invalid_request_error',
        code: 'parameter_invalid_integer',
        param: 'amount',
        message: 'Invalid integer',
      });
    }
    if (typeof b.currency !== 'string' || !/^[a-z]{3}$/.test(b.currency)) {
      return err(400, { type: 'invalid_request_error', param: 'currency', message: 'Invalid currency' });
    }
    if (b.currency === 'isk' && amount % 100 !== 0) return wholeKronurOnly();
    if (THREE_DECIMAL.includes(b.currency) && amount % 10 !== 0) return lastDigitNotZero(b.currency);
    // off_session: a boolean or the cadence of a merchant-initiated charge (`one_off`, `recurring`).
    if (b.off_session !== undefined && !OFF_SESSION.includes(b.off_session as string)) {
      return err(400, {
        type: 'invalid_request_error',
        param: 'off_session',
        message: `Invalid off_session: must be one of ${OFF_SESSION.join(', ')}`,
      });
    }
    if (b.off_session !== undefined && b.confirm !== 'true') {
      return err(400, {
        type: 'invalid_request_error',
        param: 'off_session',
        message: 'off_session can only be used with confirm=true',
      });
    }
    const pmd = b.payment_method_data as { type?: string; card?: Record<string, unknown> } | undefined;
    const card = pmd?.card;
    const networkToken = card?.network_token as Record<string, string> | undefined;
    if (card?.number && !this.rawCardDataAllowed) {
      return err(400, {
        type: 'invalid_request_error',
        message:
          'Sending credit card numbers directly to the Stripe API is generally unsafe. To continue processing use Stripe.js, the Stripe mobile bindings, or Stripe Elements.',
      });
    }
    const pmKey =
      (b.payment_method as string | undefined) ?? (card?.number as string | undefined) ?? networkToken?.number;
    if (!pmKey) {
      return err(400, {
        type: 'invalid_request_error',
        message: 'You must provide a payment_method or payment_method_data',
      });
    }
    if (typeof b.payment_method === 'string' && !this.paymentMethodExists(b.payment_method)) {
      return noSuchPaymentMethod(400, b.payment_method);
    }
    const owner = typeof b.payment_method === 'string' ? this.owners.get(b.payment_method) : undefined;
    if (owner && b.customer === undefined) {
      // An attached PaymentMethod is used with its Customer only.
      return err(400, {
        type: 'invalid_request_error',
        param: 'payment_method',
        message: `The \`payment_method\` parameter supplied ${b.payment_method as string} belongs to the Customer ${owner}. Please include the Customer in the \`customer\` parameter on the PaymentIntent.`,
      });
    }
    const outcome = this.scripted.get(pmKey) ?? TEST_CARDS[pmKey] ?? 'succeeded';
    const brand = (typeof outcome === 'object' && outcome.brand) || brandOf(pmKey);
    const pmId = typeof b.payment_method === 'string' ? b.payment_method : `pm_${randomId()}`;
    const paymentMethod = {
      id: pmId,
      object: 'payment_method',
      type: 'card',
      card: { brand, last4: pmKey.slice(-4), networks: { available: [brand] } },
      customer: owner ?? (b.customer as string) ?? null,
    };
    const offSession = (b.off_session as string | undefined) ?? null;
    const id = `pi_${randomId()}`;
    const chargeId = `ch_${randomId()}`;
    const pi: Record<string, unknown> = {
      id,
      object: 'payment_intent',
      amount,
      amount_received: 0,
      currency: b.currency,
      customer: b.customer ?? null,
      livemode: false,
      metadata: (b.metadata as Record<string, string>) ?? {},
      payment_method: pmId,
      payment_method_types: ['card'],
      statement_descriptor_suffix: b.statement_descriptor_suffix ?? null,
      created: Math.floor(Date.now() / 1000),
      latest_charge: chargeId,
      last_payment_error: null,
      status: 'succeeded',
    };
    this.madeAt.set(id, Date.now());
    if (outcome === 'succeeded') {
      pi.amount_received = amount;
      this.intents.set(id, { pi, amountRefunded: 0, offSession });
      return { status: 200, body: pi, headers: { 'Request-Id': `req_${randomId(14)}` } };
    }
    const error = {
      type: 'card_error',
      code: outcome.decline_code === 'authentication_required' ? 'authentication_required' : 'card_declined',
      decline_code: outcome.decline_code,
      ...(outcome.network_decline_code ? { network_decline_code: outcome.network_decline_code } : {}),
      ...(outcome.network_advice_code ? { network_advice_code: outcome.network_advice_code } : {}),
      ...(outcome.advice_code ? { advice_code: outcome.advice_code } : {}),
      message: 'Your card was declined.',
      charge: chargeId,
      doc_url: 'https://docs.stripe.com/error-codes/card-declined',
      payment_method: paymentMethod,
    };
    pi.status = 'requires_payment_method';
    pi.last_payment_error = error;
    this.intents.set(id, { pi, amountRefunded: 0, offSession });
    return err(402, { ...error, payment_intent: pi });
  }

  private paymentMethodExists(id: string): boolean {
    return /^(pm|card|src)_/.test(id) && !this.missing.has(id);
  }

  /** A card PaymentMethod as `GET /v1/payment_methods/:id` answers it (docs.stripe.com/api/payment_methods/object). */
  private paymentMethodObject(id: string): Record<string, unknown> {
    const outcome = this.scripted.get(id) ?? TEST_CARDS[id];
    const brand = (typeof outcome === 'object' && outcome.brand) || brandOf(id);
    return {
      id,
      object: 'payment_method',
      type: 'card',
      billing_details: {
        address: { city: null, country: null, line1: null, line2: null, postal_code: null, state: null },
        email: null,
        name: null,
        phone: null,
      },
      card: {
        brand,
        checks: { address_line1_check: null, address_postal_code_check: null, cvc_check: null },
        country: 'US',
        exp_month: 12,
        exp_year: new Date().getUTCFullYear() + 3,
        funding: 'credit',
        last4: TEST_LAST4[brand] ?? '4242',
        networks: { available: [brand], preferred: null },
      },
      created: Math.floor(Date.now() / 1000),
      customer: this.owners.get(id) ?? null,
      livemode: false,
      metadata: {},
    };
  }

  private attachPaymentMethod(id: string, b: Record<string, unknown>): FakeResponse {
    if (!this.paymentMethodExists(id)) return noSuchPaymentMethod(404, id);
    if (typeof b.customer !== 'string' || !b.customer) {
      return err(400, {
        type: 'invalid_request_error',
        param: 'customer',
        message: 'Missing required param: customer.',
      });
    }
    const owner = this.owners.get(id);
    if (owner && owner !== b.customer) {
      return err(400, {
        type: 'invalid_request_error',
        message: 'The payment method you provided has already been attached to a customer.',
      });
    }
    this.owners.set(id, b.customer);
    return { status: 200, body: this.paymentMethodObject(id) };
  }

  private createRefund(b: Record<string, unknown>): FakeResponse {
    const stored = typeof b.payment_intent === 'string' ? this.intents.get(b.payment_intent) : undefined;
    if (!stored) {
      return err(400, {
        type: 'invalid_request_error',
        code: 'resource_missing',
        param: 'payment_intent',
        message: `No such payment_intent: '${String(b.payment_intent)}'`,
      });
    }
    if (stored.pi.status !== 'succeeded') {
      return err(400, {
        type: 'invalid_request_error',
        message: 'This PaymentIntent does not have a successful charge to refund.',
      });
    }
    const remaining = (stored.pi.amount as number) - stored.amountRefunded;
    const amount = b.amount === undefined ? remaining : Number(b.amount);
    if (remaining <= 0) {
      return err(400, {
        type: 'invalid_request_error',
        code: 'charge_already_refunded',
        message: 'Charge has already been refunded.',
      });
    }
    if (stored.pi.currency === 'isk' && amount % 100 !== 0) return wholeKronurOnly();
    const currency = stored.pi.currency as string;
    if (THREE_DECIMAL.includes(currency) && amount % 10 !== 0) return lastDigitNotZero(currency);
    if (amount > remaining) {
      return err(400, {
        type: 'invalid_request_error',
        code: 'amount_too_large',
        param: 'amount',
        message: `Refund amount (${amount}) is greater than unrefunded amount on charge (${remaining})`,
      });
    }
    stored.amountRefunded += amount;
    const refund = {
      id: `re_${randomId()}`,
      object: 'refund',
      amount,
      currency: stored.pi.currency,
      payment_intent: stored.pi.id,
      charge: stored.pi.latest_charge,
      status: this.refundStatus,
      failure_reason: null,
      metadata: (b.metadata as Record<string, string>) ?? {},
      created: Math.floor(Date.now() / 1000),
    };
    this.refunds.push(refund);
    return { status: 200, body: refund };
  }
}

/**
 * Stripe keeps ISK two-decimal in its API but takes whole krónur only (support.stripe.com, "Deprecation
 * of fractional ISK charges and refunds", from 14 April 2023).
 */
function wholeKronurOnly(): FakeResponse {
  return err(400, {
    type: 'invalid_request_error',
    code: 'invalid_charge_amount_no_decimal_compatible',
    param: 'amount',
    message:
      'Invalid amount. Currency ISK has become effectively zero-decimal and charged amounts must be evenly divisible by 100.',
  });
}

/**
 * Three-decimal currencies (docs.stripe.com/currencies): the API takes their amounts in thousandths for
 * PaymentIntents and Refunds, but "these API calls require the least-significant (last) digit to be 0"
 * (5.124 KWD must be sent as 5120 or 5130).
 */
const THREE_DECIMAL = ['bhd', 'jod', 'kwd', 'omr', 'tnd'];

/** `off_session` (docs.stripe.com/api/payment_intents/create): `true`/`false`, or `one_off` / `recurring`. */
const OFF_SESSION = ['true', 'false', 'one_off', 'recurring'];

function lastDigitNotZero(currency: string): FakeResponse {
  return err(400, {
    type: 'invalid_request_error',
    code: 'invalid_charge_amount',
    param: 'amount',
    message: `Invalid amount. Amounts in ${currency.toUpperCase()} must have 0 as their last digit (rounded to the nearest ten).`,
  });
}

/** The last 4 digits of Stripe's test card of each brand (docs.stripe.com/testing). */
const TEST_LAST4: Record<string, string> = { visa: '4242', mastercard: '4444', amex: '8431', discover: '1117' };

/** A PaymentMethod Stripe does not have: 404 when it is the path's resource, 400 as a charge's parameter. */
function noSuchPaymentMethod(status: 400 | 404, id: string): FakeResponse {
  return err(status, {
    type: 'invalid_request_error',
    code: 'resource_missing',
    param: 'payment_method',
    message: `No such PaymentMethod: '${id}'`,
  });
}

function err(status: number, error: Record<string, unknown>): FakeResponse {
  return {
    status,
    body: { error: { ...error, request_log_url: `https://dashboard.stripe.com/test/logs/req_${randomId(14)}` } },
  };
}

function brandOf(pmOrNumber: string): string {
  if (pmOrNumber.startsWith('pm_card_')) {
    const b = pmOrNumber.slice(8).toLowerCase();
    if (['visa', 'mastercard', 'amex', 'discover'].includes(b)) return b;
    return 'visa';
  }
  if (/^4/.test(pmOrNumber)) return 'visa';
  if (/^(5[1-5]|2[2-7])/.test(pmOrNumber)) return 'mastercard';
  if (/^3[47]/.test(pmOrNumber)) return 'amex';
  if (/^6/.test(pmOrNumber)) return 'discover';
  return 'unknown';
}

/** Stripe's form encoding (`a[b][c]=v`, `list[0]=x`) as nested objects and arrays. */
export function parseStripeForm(raw: string): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  for (const [fullKey, value] of new URLSearchParams(raw)) {
    const parts = fullKey.split('[').map((p, i) => (i === 0 ? p : p.replace(/\]$/, '')));
    let node: Record<string, unknown> = root;
    parts.forEach((part, i) => {
      if (i === parts.length - 1) node[part] = value;
      else node = (node[part] ??= {}) as Record<string, unknown>;
    });
  }
  return arrays(root) as Record<string, unknown>;
}

function arrays(v: unknown): unknown {
  if (!v || typeof v !== 'object') return v;
  const o = v as Record<string, unknown>;
  const keys = Object.keys(o);
  if (keys.length > 0 && keys.every((k, i) => k === String(i))) return keys.map((k) => arrays(o[k]));
  return Object.fromEntries(keys.map((k) => [k, arrays(o[k])]));
}

function stableParams(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableParams).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${k}:${stableParams((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

/**
 * One page of a list endpoint (docs.stripe.com/api/pagination): newest first, `limit` 1-100 (default
 * 10), `starting_after` an object id whose followers make the page, `has_more` when more follow.
 */
function listPage(all: Record<string, unknown>[], query: URLSearchParams, url: string): Record<string, unknown> {
  const limit = Math.min(Math.max(Number(query.get('limit') ?? 10), 1), 100);
  const after = query.get('starting_after');
  const from = after === null ? 0 : all.findIndex((x) => x.id === after) + 1;
  const rest = all.slice(from);
  return { object: 'list', data: rest.slice(0, limit), has_more: rest.length > limit, url };
}
