import type * as AdyenSdk from '@adyen/api-library';
import type { CheckoutAPI, HttpURLConnectionClient, Types } from '@adyen/api-library';
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
  ADYEN_CURRENCIES,
  AmountNotExpressible,
  amountFitsProcessor,
  neverSent,
  processorUnits,
  refundAmountRefused,
} from './processor-amounts';
import { DEFAULT_NETWORK_TOKEN_ECI, expiryParts, leadingCode, networkOfBrand, retryAfterMs, wireError } from './wire';

let sdk: typeof AdyenSdk | undefined;
/**
 * The Adyen SDK, loaded when the first Adyen adapter is built: importing it took ~250 ms of every
 * app's ~900 ms module load (the webhook dispatcher's too, which never charges), and most
 * deployments have no Adyen account.
 */
function adyenSdk(): typeof AdyenSdk {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return (sdk ??= require('@adyen/api-library') as typeof AdyenSdk);
}

type PaymentRequest = Types.checkout.PaymentRequest;
type PaymentResponse = Types.checkout.PaymentResponse;

/** A merchant's Adyen account (decisions §13 config file). */
export interface AdyenAccountConfig {
  api_key: string;
  merchant_account: string;
  /** Checkout API base with its version, default https://checkout-test.adyen.com/v71. */
  checkout_url?: string;
  /** Full card numbers may be sent (a PCI-compliant account allowed to); otherwise tokens only. */
  raw_card_data?: boolean;
  /**
   * The HMAC key (hex) of the account's standard webhook (notifications) endpoint. With it, Retain
   * verifies the notifications Adyen posts to /v1/retain/processors/adyen/notifications, and a refund
   * Adyen answers `received` stays Processing until its REFUND notification. Without it, `received`
   * is taken as completed (no notification can be trusted).
   */
  hmac_key?: string;
}

export interface AdyenAdapterOptions {
  /** Per-request timeout (ms). A charge that times out is an `error`, resolved by lookup. */
  timeoutMs?: number;
  /** PEM of a private CA to trust (a proxy, or the test fake); the public CAs otherwise. */
  trustedCa?: string;
}

/**
 * Adyen's refusalReasonCode (https://docs.adyen.com/development-resources/refusal-reasons) as ISO
 * 8583, used when the refusal carries no raw network code. Codes not listed (Cancelled, PIN and
 * in-person reasons, AVS) are read as the generic 05 (96 for resultCode Error).
 * - 5 Blocked Card ("blocked, therefore unusable") is 04, pick up card: a hard decline of every
 *   network and Visa category 1 in every dated rule set (57 was read as 05 for Visa until
 *   25 Oct 2026; 62 is a retryable funds code).
 * - 46 "Transaction blocked by Adyen to prevent excessive retry fees" never reached the issuer: the
 *   card's reattempt allowance at this merchant is used up as Adyen counts it (attempts Retain does
 *   not see count too), for a time Retain cannot know (Visa's 30 rolling days, Mastercard's day or
 *   30-day window, or for good after a do-not-retry). Read as 59, the risky class: at most a few
 *   attempts, days apart (Adyen blocks those still over the limit, so they cost no fee), where the
 *   generic 05 retried within hours; a hard code would end the card for good on a decline that
 *   says nothing about the card.
 */
const ADYEN_REFUSAL_CODES: Readonly<Record<string, string>> = {
  '2': '05',
  '3': '01',
  '4': '96',
  '5': '04',
  '6': '54',
  '7': '13',
  '8': '14',
  '9': '91',
  '10': '57',
  '11': '1A',
  '12': '51',
  '14': '59',
  '20': '59',
  '22': '59',
  '23': '57',
  '24': 'N7',
  '25': '62',
  '26': 'R1',
  '27': '05',
  '28': '61',
  '29': '65',
  '31': '59',
  '34': '52',
  '35': '53',
  '38': '1A',
  '46': '59',
};

/**
 * Adyen's refusalReason texts by refusalReasonCode (https://docs.adyen.com/development-resources/refusal-reasons):
 * a notification names the refusal by its text only (its `reason`), a /payments answer by both.
 */
const ADYEN_REFUSAL_REASONS: Readonly<Record<string, string>> = {
  refused: '2',
  referral: '3',
  'acquirer error': '4',
  'blocked card': '5',
  'expired card': '6',
  'invalid amount': '7',
  'invalid card number': '8',
  'issuer unavailable': '9',
  'not supported': '10',
  '3d not authenticated': '11',
  'not enough balance': '12',
  'acquirer fraud': '14',
  fraud: '20',
  'fraud-cancelled': '22',
  'transaction not permitted': '23',
  'cvc declined': '24',
  'restricted card': '25',
  'revocation of auth': '26',
  'declined non generic': '27',
  'withdrawal amount exceeded': '28',
  'withdrawal count exceeded': '29',
  'issuer suspected fraud': '31',
  'no checking account available on card': '34',
  'no savings account available on card': '35',
  'authentication required': '38',
  'transaction blocked by adyen to prevent excessive retry fees': '46',
};

/** What Adyen says about a refusal, from a /payments answer or a standard webhook item. */
export interface AdyenRefusal {
  refusalReasonCode?: string | null;
  /** The refusal text (a webhook item's `reason`). */
  refusalReason?: string | null;
  /** additionalData.refusalReasonRaw: the network's code first ("51 : Insufficient funds"), where enabled. */
  refusalReasonRaw?: string | null;
  /** additionalData.merchantAdviceCode ("03: Do not try again"), where enabled. */
  merchantAdviceCode?: string | null;
  /** The brand (`paymentMethod.brand`, a webhook item's `paymentMethod`, additionalData.cardScheme). */
  brand?: string | null;
}

/**
 * A refusal's codes for the policy: the raw network code where Adyen passes it on, else Adyen's
 * refusal reason (its code, or its text) mapped to the ISO code, else `fallback`; the Mastercard
 * advice; the network. Shared by the charge's answer and the AUTHORISATION webhook, so that a decline
 * resolved by a notification binds the card as the same decline answered at once would.
 */
export function adyenRefusalCodes(
  r: AdyenRefusal,
  fallback: string,
): { responseCode: string; merchantAdviceCode: string | null; network: CardNetwork } {
  const code = r.refusalReasonCode ?? ADYEN_REFUSAL_REASONS[(r.refusalReason ?? '').trim().toLowerCase()];
  return {
    responseCode: leadingCode(r.refusalReasonRaw) ?? (code ? ADYEN_REFUSAL_CODES[code] : undefined) ?? fallback,
    merchantAdviceCode: leadingCode(r.merchantAdviceCode),
    network: networkOfBrand(r.brand),
  };
}

/**
 * Adyen adapter (decisions §13) on Checkout `POST /payments`: a merchant-initiated recurring charge
 * (`shopperInteraction: ContAuth`, `recurringProcessingModel: Subscription`), captured at once
 * (`captureDelayHours: 0`), of a stored payment
 * method (`storedPaymentMethodId` with its `shopperReference`), a network token
 * (`paymentMethod.type: networkToken` with `mpiData.tokenAuthenticationVerificationValue` and
 * `mpiData.eci`) or, for PCI accounts allowed raw card data, the card fields; the original
 * charge's network transaction id as `paymentMethod.networkPaymentReference` (Adyen's name for the
 * `networkTxReference` of the first payment); the attempt's vid as `reference` and
 * `Idempotency-Key`. Refunds by `pspReference`. Checkout has no query by reference: an unknown
 * outcome is resolved by replaying the request under the same key (lookupCharge with `original`).
 */
export class AdyenProcessor implements PaymentProcessor {
  readonly name = 'adyen';
  readonly limits: ProcessorLimits = {
    maxPaymentMethodIdLength: 128,
    // shopperStatement: at most 135 characters of a-z A-Z 0-9 spaces and . , ' _ - ? + * /.
    billingDescriptorPattern: /^[A-Za-z0-9 .,'_?+*/-]{1,135}$/,
    amountFits: (amountMinor, currency) => amountFitsProcessor(amountMinor, currency, ADYEN_CURRENCIES),
  };
  private readonly checkout: CheckoutAPI;
  private readonly base: string;

  constructor(
    private readonly account: AdyenAccountConfig,
    options: AdyenAdapterOptions = {},
  ) {
    const { CheckoutAPI, Client, EnvironmentEnum } = adyenSdk();
    const client = new Client({
      apiKey: account.api_key,
      environment: EnvironmentEnum.TEST,
      connectionTimeoutMillis: options.timeoutMs ?? 30_000,
    });
    if (options.trustedCa) client.httpClient = trustingClient(options.trustedCa);
    this.checkout = new CheckoutAPI(client);
    this.base = (account.checkout_url ?? 'https://checkout-test.adyen.com/v71').replace(/\/+$/, '');
  }

  async charge(req: ChargeRequest): Promise<ChargeResult> {
    let body: PaymentRequest;
    try {
      body = this.request(req);
    } catch (e) {
      // Never sent (an amount the processor has no units for, a request the account may not make):
      // nothing charged, never a decline.
      return neverSent(e as Error);
    }
    try {
      const res = await this.api('PaymentsApi').payments(body, { idempotencyKey: req.idempotencyKey });
      return paymentResult(res);
    } catch (e) {
      return chargeFailure(e);
    }
  }

  async lookupCharge(idempotencyKey: string, original?: ChargeRequest): Promise<ChargeResult | null> {
    if (!original || original.idempotencyKey !== idempotencyKey) {
      return wireError('Adyen has no lookup by reference: replay the original request under its key');
    }
    // Adyen answers a key it has seen with the first response (keys live at least 31 days).
    return this.charge(original);
  }

  async refund(req: RefundRequest): Promise<RefundResult> {
    try {
      const res = await this.api('ModificationsApi').refundCapturedPayment(
        req.processorTransactionId,
        {
          merchantAccount: this.account.merchant_account,
          amount: adyenAmount(req.amountMinor, req.currency),
          reference: req.idempotencyKey,
        },
        { idempotencyKey: req.idempotencyKey },
      );
      if (!res || typeof res !== 'object' || !res.pspReference) throw new Error('Adyen refund answer is not JSON');
      // `received`: accepted, not made. Adyen reports the result in the REFUND notification
      // (success true/false): an account whose notifications Retain verifies (hmac_key) waits for it;
      // one without takes `received` as completed (a failure there is rare, and nothing else would
      // ever settle it).
      return this.account.hmac_key
        ? { outcome: 'pending', processorRefundId: res.pspReference, message: 'Refund received' }
        : { outcome: 'completed', processorRefundId: res.pspReference, message: 'Refund received' };
    } catch (e) {
      if (e instanceof AmountNotExpressible) return refundAmountRefused(e);
      const http = e instanceof adyenSdk().HttpClientException ? e : undefined;
      const code = http?.errorCode;
      // Refused only by Adyen's own validation answer (400, 422 with its JSON error), as a charge is
      // (chargeFailure). 704: a request with this idempotency key is still being processed (two
      // batches racing one refund): no answer yet. 401/403 refuse the API key or its roles, 404 a wrong
      // checkout_url, not the refund: sent again once an operator fixes the account.
      if (http?.apiError && (http.statusCode === 400 || (http.statusCode === 422 && code !== '704'))) {
        return {
          outcome: 'failed',
          processorRefundId: null,
          message: `Refund rejected by Adyen${code ? ` (${code})` : ''}`,
        };
      }
      const err = failure(e);
      throw new ProcessorUnavailableError(err.message, err.outcome === 'error' ? (err.retryAfterMs ?? null) : null);
    }
  }

  async detokenize(): Promise<DetokenizeResult> {
    return { ok: false, message: 'Adyen stored payment methods cannot be detokenized' };
  }

  /**
   * A stored payment method is charged as its `storedPaymentMethodId` with the `shopperReference` it
   * was stored for (https://docs.adyen.com/development-resources/error-codes, 000: "Recurring payments
   * require a shopperReference"): `shopperReference|storedPaymentMethodId`; a bare id can never be
   * charged. A network token is charged as its number (`paymentMethod.type: networkToken`).
   */
  checkToken(token: string, opts: { isNetworkToken?: boolean } = {}): { ok: true } | { ok: false; message: string } {
    if (opts.isNetworkToken) {
      return /^\d{13,19}$/.test(token) ? { ok: true } : { ok: false, message: 'Not a network token number' };
    }
    return /^[^|]{1,256}\|[A-Za-z0-9]{8,64}$/.test(token)
      ? { ok: true }
      : { ok: false, message: 'Not an Adyen shopperReference|storedPaymentMethodId' };
  }

  /** The Checkout /payments body of an attempt. */
  request(req: ChargeRequest): PaymentRequest {
    const inst = req.instrument;
    const ntid = req.networkTransactionId ? { networkPaymentReference: req.networkTransactionId } : {};
    const body: Record<string, unknown> = {
      merchantAccount: this.account.merchant_account,
      amount: adyenAmount(req.amountMinor, req.currency),
      reference: req.idempotencyKey,
      shopperInteraction: 'ContAuth',
      recurringProcessingModel: 'Subscription',
      // An Authorised charge is recorded as Captured: capture it at once, whatever the merchant
      // account's capture setting (manual or delayed capture would only reserve the money).
      captureDelayHours: 0,
    };
    if (req.billingDescriptor) body.shopperStatement = req.billingDescriptor;
    if (inst.kind === 'pan') {
      if (!this.account.raw_card_data) throw new Error('This Adyen account takes stored payment methods only');
      const exp = expiryParts(inst.expiration);
      body.paymentMethod = {
        type: 'scheme',
        number: inst.pan.replace(/[\s-]/g, ''),
        ...(exp ? { expiryMonth: String(exp.month).padStart(2, '0'), expiryYear: String(exp.year) } : {}),
        ...ntid,
      };
    } else if (inst.isNetworkToken) {
      const exp = expiryParts(inst.expiration);
      body.paymentMethod = {
        type: 'networkToken',
        number: inst.token,
        ...(exp ? { expiryMonth: String(exp.month).padStart(2, '0'), expiryYear: String(exp.year) } : {}),
        ...ntid,
      };
      body.mpiData = {
        ...(inst.cryptogram ? { tokenAuthenticationVerificationValue: inst.cryptogram } : {}),
        eci: inst.eci ?? DEFAULT_NETWORK_TOKEN_ECI,
      };
    } else {
      const [shopper, stored] = inst.token.includes('|') ? inst.token.split('|', 2) : [null, inst.token];
      if (shopper) body.shopperReference = shopper;
      body.paymentMethod = { type: 'scheme', storedPaymentMethodId: stored, ...ntid };
    }
    return body as unknown as PaymentRequest;
  }

  /** The SDK's service pointed at the account's checkout_url (the SDK has no setting for it). */
  private api<K extends 'PaymentsApi' | 'ModificationsApi'>(name: K): CheckoutAPI[K] {
    const service = this.checkout[name];
    (service as unknown as { baseUrl: string }).baseUrl = this.base;
    return service;
  }
}

function paymentResult(res: PaymentResponse | string): ChargeResult {
  if (!res || typeof res !== 'object' || !res.resultCode) return wireError('Adyen answer is not the expected JSON');
  const extra = (res.additionalData ?? {}) as Record<string, string>;
  const id = res.pspReference ?? '';
  const network = networkOfBrand(res.paymentMethod?.brand ?? extra.paymentMethod ?? extra.cardScheme);
  const resultCode: string = res.resultCode;
  switch (resultCode) {
    case 'Authorised':
      return { outcome: 'approved', responseCode: '00', processorTransactionId: id, message: 'Authorised' };
    case 'Refused':
    case 'Cancelled':
    case 'Error': {
      const codes = adyenRefusalCodes(
        {
          refusalReasonCode: res.refusalReasonCode ?? null,
          refusalReasonRaw: extra.refusalReasonRaw,
          merchantAdviceCode: extra.merchantAdviceCode,
          brand: res.paymentMethod?.brand ?? extra.paymentMethod ?? extra.cardScheme,
        },
        resultCode === 'Error' ? '96' : '05',
      );
      return {
        outcome: 'declined',
        ...codes,
        processorTransactionId: id,
        message: `${resultCode}${res.refusalReason ? `: ${res.refusalReason}` : ''}`,
      };
    }
    case 'RedirectShopper':
    case 'ChallengeShopper':
    case 'IdentifyShopper':
      // A merchant-initiated charge cannot authenticate the shopper.
      return {
        outcome: 'declined',
        responseCode: '1A',
        merchantAdviceCode: null,
        network,
        processorTransactionId: id,
        message: 'Authentication required',
      };
    default:
      // Received, Pending, PartiallyAuthorised...: no final decision yet.
      return wireError(`Adyen resultCode ${resultCode}`);
  }
}

/**
 * A charge's failure. Adyen refusing the request itself, in its documented error body
 * (https://docs.adyen.com/development-resources/response-handling): 400 "do not repeat the request
 * without first modifying it", 403 "insufficient permission to process request, do not repeat the
 * request" (010 not allowed: the credential lacks the role for this request, such as raw card
 * fields; 901: a merchant account it may not use), 422 request validation error. That is Adyen's
 * answer for this key and nothing was charged: `settled`, so the reconciliation records the attempt
 * not charged and the schedule goes on, where a plain error would replay the same request, and get
 * the same refusal, for ever. Not settled: 401 (the API key itself: the request was never the
 * account's; once the key is fixed, the replay gets the real answer), 422 with errorCode 704 (another
 * request with this key is in progress), 404 and the other 4xx (a wrong checkout_url: Adyen says
 * subsequent calls may succeed), 429, 5xx, timeouts, and a 4xx without Adyen's error body (a proxy's).
 */
function chargeFailure(e: unknown): ChargeResult {
  const result = failure(e);
  if (result.outcome !== 'error' || !(e instanceof adyenSdk().HttpClientException) || !e.apiError) return result;
  const status = e.statusCode;
  const refused = status === 400 || status === 403 || (status === 422 && e.errorCode !== '704');
  return refused ? { ...result, settled: true } : result;
}

function failure(e: unknown): ChargeResult {
  if (e instanceof adyenSdk().HttpClientException) {
    const headers = (e.responseHeaders ?? {}) as Record<string, string | string[] | undefined>;
    if (e.statusCode === 429) return wireError('Adyen rate limit (429)', retryAfterMs(headers['retry-after']));
    return wireError(`Adyen HTTP ${e.statusCode ?? 'error'}${e.errorCode ? ` (${e.errorCode})` : ''}`);
  }
  return wireError('Adyen unreachable or timed out');
}

/** The SDK's HTTP client trusting a private CA (its agent options are not configurable otherwise). */
function trustingClient(ca: string): HttpURLConnectionClient {
  const client = new (adyenSdk().HttpURLConnectionClient)();
  (client as unknown as { agentOptions: { ca: string } }).agentOptions = { ca };
  return client;
}

/** Adyen's `amount` of an amount in ISO minor units; throws AmountNotExpressible where Adyen has none for it. */
function adyenAmount(amountMinor: bigint, currency: string): { value: number; currency: string } {
  return {
    value: Number(processorUnits(amountMinor, currency, ADYEN_CURRENCIES)),
    currency: currency.toUpperCase(),
  };
}
