import { createHmac } from 'node:crypto';
import { randomId, WireFake, type FakeResponse, type RecordedRequest } from './fake-server';

/**
 * A local Adyen Checkout API written from Adyen's public reference
 * (https://docs.adyen.com/api-explorer/Checkout/71): HTTPS, JSON bodies, `X-API-Key`;
 * `POST /v{n}/payments` answering `resultCode` Authorised / Refused with `refusalReason`,
 * `refusalReasonCode` and, in `additionalData`, `refusalReasonRaw` (the raw network response) and
 * `merchantAdviceCode` (Mastercard), `networkTxReference` on approvals; `POST
 * /v{n}/payments/{pspReference}/refunds` answering 201 `status: received`; idempotency per
 * https://docs.adyen.com/development-resources/api-idempotency (a key seen before returns the first
 * response, not processed again, echoing the `Idempotency-Key` header); errors as
 * `{status, errorCode, message, errorType, pspReference}`
 * (https://docs.adyen.com/development-resources/error-codes). Raw card fields are refused (403,
 * errorCode 010) unless the account may send them. Capture per
 * https://docs.adyen.com/online-payments/capture: an authorised payment is captured after the
 * merchant account's capture delay (immediate by default; `manual` or a delay in hours are account
 * settings), unless the request's `captureDelayHours` ("the delay between the authorisation and
 * scheduled auto-capture, in hours", at most 672) sets it for that payment.
 */
export interface AdyenRefusal {
  refusalReason: string;
  refusalReasonCode: string;
  /**
   * The raw network response, e.g. `51 : Insufficient funds`; Adyen sends the code with or without
   * its leading zero (`7 : Pickup card, special condition`), and passes it on as it came.
   */
  refusalReasonRaw?: string;
  /** e.g. `03: Do not try again` */
  merchantAdviceCode?: string;
  /** The card's brand variant (default: from the number); null: the answer names no brand. */
  brand?: string | null;
}

/**
 * `Received`: Adyen took the payment but has no decision yet (asynchronous processing); the outcome
 * comes later in an AUTHORISATION notification (`notification`).
 */
type Outcome = 'Authorised' | 'Received' | AdyenRefusal;

/**
 * 4111... and 5555...4444 are Adyen test cards (approved); the refusals stand in for Adyen's
 * test triggers, with the same numbers as the Stripe fake so the contract scenarios match.
 */
const TEST_CARDS: Record<string, Outcome> = {
  '4111111111111111': 'Authorised',
  '5555555555554444': 'Authorised',
  '4000000000000002': { refusalReason: 'Refused', refusalReasonCode: '2', refusalReasonRaw: '05 : Do not honor' },
  '4000000000009995': {
    refusalReason: 'Not enough balance',
    refusalReasonCode: '12',
    refusalReasonRaw: '51 : Insufficient funds',
  },
  '4000000000000069': { refusalReason: 'Expired Card', refusalReasonCode: '6', refusalReasonRaw: '54 : Expired card' },
};

interface StoredPayment {
  body: Record<string, unknown>;
  response: Record<string, unknown>;
  refunded: number;
  /** Captured at authorisation (a capture delay of 0 hours); otherwise only reserved on the card. */
  captured: boolean;
}

export class AdyenFake extends WireFake {
  rawCardDataAllowed = false;
  /** The merchant account's capture setting (Customer Area): immediate, manual, or a delay in hours. */
  captureDelay: 'immediate' | 'manual' | number = 'immediate';
  readonly payments = new Map<string, StoredPayment>();
  readonly refunds: Record<string, unknown>[] = [];
  private readonly scripted = new Map<string, Outcome>();
  private readonly idempotency = new Map<string, FakeResponse | null>();
  private readonly rejections: { status: number; errorCode: string; message: string; errorType: string }[] = [];

  constructor(
    readonly apiKey = 'AQE_fake_retain_key',
    readonly merchantAccount = 'RetainTestECOM',
  ) {
    super(true);
  }

  /** The storedPaymentMethodId, card or token number answers `outcome`. */
  script(idOrNumber: string, outcome: Outcome): void {
    this.scripted.set(idOrNumber, outcome);
  }

  /**
   * A request with this idempotency key is being processed (another caller's, still in flight): a
   * request with the key gets 422 `704` until `finishInProgress`.
   */
  markInProgress(key: string): void {
    this.idempotency.set(key, null);
  }

  /**
   * The next request is refused with this error, in Adyen's documented error body
   * (https://docs.adyen.com/development-resources/error-codes), as Adyen answers a request it cannot
   * process (e.g. 400 `000` "Unable to parse message"); stored under its idempotency key like any answer.
   */
  rejectNext(e: { status: number; errorCode: string; message: string; errorType: string }): void {
    this.rejections.push(e);
  }

  /** The in-flight request of `markInProgress` ended without an answer stored: the key is free again. */
  finishInProgress(key: string): void {
    if (this.idempotency.get(key) === null) this.idempotency.delete(key);
  }

  authorised(): StoredPayment[] {
    return [...this.payments.values()].filter((p) => p.response.resultCode === 'Authorised');
  }

  protected parseBody(raw: string): Record<string, unknown> {
    return JSON.parse(raw) as Record<string, unknown>;
  }

  protected errorBody(status: number): unknown {
    return status === 429
      ? { status: 429, errorCode: '429', message: 'Too many requests', errorType: 'validation' }
      : { status: 500, errorCode: '000', message: 'Internal server error', errorType: 'internal' };
  }

  protected handle(req: RecordedRequest): FakeResponse {
    if (req.headers['x-api-key'] !== this.apiKey) {
      return error(401, '000', 'HTTP Status Response - Unauthorized', 'security');
    }
    if (req.method !== 'POST') return error(405, '000', 'Method not allowed', 'validation');
    // A path that is no endpoint is answered before any operation, so before its idempotency key.
    if (!/^\/v\d+\/payments(\/[^/]+\/refunds)?$/.test(req.path)) {
      return error(404, '000', `Not found: ${req.path}`, 'validation');
    }
    const key = req.headers['idempotency-key'];
    if (typeof key === 'string' && key) {
      if (key.length > 64) return error(422, '000', 'Idempotency key exceeds 64 characters', 'validation');
      if (this.idempotency.has(key)) {
        const first = this.idempotency.get(key);
        if (!first) return error(422, '704', 'request already processed or in progress', 'validation');
        return first;
      }
      this.idempotency.set(key, null);
      const response = this.route(req);
      const stored = { ...response, headers: { ...(response.headers ?? {}), 'Idempotency-Key': key } };
      this.idempotency.set(key, stored);
      return stored;
    }
    return this.route(req);
  }

  private route(req: RecordedRequest): FakeResponse {
    const rejection = this.rejections.shift();
    if (rejection) return error(rejection.status, rejection.errorCode, rejection.message, rejection.errorType);
    if (/^\/v\d+\/payments$/.test(req.path)) return this.pay(req.body);
    const m = /^\/v\d+\/payments\/([^/]+)\/refunds$/.exec(req.path);
    if (m) return this.refund(m[1]!, req.body);
    return error(404, '000', `Not found: ${req.path}`, 'validation');
  }

  private pay(b: Record<string, unknown>): FakeResponse {
    if (b.merchantAccount !== this.merchantAccount) {
      return error(403, '901', 'Invalid Merchant Account', 'security');
    }
    const amount = b.amount as { value?: unknown; currency?: unknown } | undefined;
    if (
      !amount ||
      !Number.isInteger(amount.value) ||
      typeof amount.currency !== 'string' ||
      !/^[A-Z]{3}$/.test(amount.currency)
    ) {
      return error(422, '100', 'Required field amount is not provided or invalid', 'validation');
    }
    if (typeof b.reference !== 'string' || !b.reference)
      return error(422, '130', 'Required field reference is missing', 'validation');
    const pm = b.paymentMethod as Record<string, string> | undefined;
    if (!pm) return error(422, '14_012', 'Required object paymentMethod is not provided', 'validation');
    // A stored payment method is charged with the shopperReference it was stored for
    // (https://docs.adyen.com/development-resources/error-codes, 000: "Recurring payments require a
    // shopperReference").
    if (pm.storedPaymentMethodId && !b.shopperReference) {
      return error(422, '000', 'Recurring payments require a shopperReference', 'validation');
    }
    if (pm.type === 'scheme' && pm.number && !this.rawCardDataAllowed) {
      return error(403, '010', 'Not allowed', 'security');
    }
    const key = pm.storedPaymentMethodId ?? pm.number;
    if (!key) return error(422, '129', 'Required field paymentMethod.number is not provided', 'validation');
    const delay = b.captureDelayHours;
    if (delay !== undefined && (!Number.isInteger(delay) || (delay as number) < 0 || (delay as number) > 672)) {
      return error(422, '000', 'Invalid captureDelayHours', 'validation');
    }
    const outcome = this.scripted.get(key) ?? TEST_CARDS[key] ?? 'Authorised';
    const scriptedBrand = typeof outcome === 'object' ? outcome.brand : undefined;
    const brand = scriptedBrand === null ? null : scriptedBrand || brandOf(key);
    const pspReference = randomId(16).toUpperCase();
    const base = {
      pspReference,
      merchantReference: b.reference,
      amount,
      paymentMethod: { type: 'scheme', ...(brand === null ? {} : { brand }) },
    };
    const response: Record<string, unknown> =
      outcome === 'Received'
        ? { pspReference, merchantReference: b.reference, resultCode: 'Received' }
        : outcome === 'Authorised'
          ? {
              ...base,
              resultCode: 'Authorised',
              additionalData: {
                networkTxReference: `MCC${randomId(10)}`,
                authCode: '084613',
                refusalReasonRaw: 'AUTHORISED',
              },
            }
          : {
              ...base,
              resultCode: 'Refused',
              refusalReason: outcome.refusalReason,
              refusalReasonCode: outcome.refusalReasonCode,
              additionalData: {
                ...(outcome.refusalReasonRaw ? { refusalReasonRaw: outcome.refusalReasonRaw } : {}),
                ...(outcome.merchantAdviceCode ? { merchantAdviceCode: outcome.merchantAdviceCode } : {}),
              },
            };
    const captureHours = delay ?? (this.captureDelay === 'immediate' ? 0 : this.captureDelay);
    const captured = outcome === 'Authorised' && captureHours === 0;
    this.payments.set(pspReference, { body: b, response, refunded: 0, captured });
    return { status: 200, body: response };
  }

  private refund(psp: string, b: Record<string, unknown>): FakeResponse {
    const payment = this.payments.get(psp);
    if (!payment || payment.response.resultCode !== 'Authorised') {
      return error(422, '167', 'Original pspReference required for this operation', 'validation');
    }
    if (b.merchantAccount !== this.merchantAccount) return error(403, '901', 'Invalid Merchant Account', 'security');
    const amount = b.amount as { value: number; currency: string };
    const paid = (payment.response.amount as { value: number }).value;
    if (!amount || !Number.isInteger(amount.value) || amount.value + payment.refunded > paid) {
      return error(422, '137', 'Invalid amount specified', 'validation');
    }
    payment.refunded += amount.value;
    const refund = {
      merchantAccount: this.merchantAccount,
      paymentPspReference: psp,
      pspReference: randomId(16).toUpperCase(),
      reference: b.reference,
      status: 'received',
      amount,
    };
    this.refunds.push(refund);
    return { status: 201, body: refund };
  }
}

/** A standard webhook item's fields (https://docs.adyen.com/api-explorer/Webhooks/1). */
export interface AdyenNotificationFields {
  eventCode: string;
  success: boolean;
  pspReference: string;
  originalReference?: string;
  merchantReference?: string;
  amount: { value: number; currency: string };
  reason?: string;
  /** The payment method's brand as the item names it (`mc`, `visa`, ...). */
  paymentMethod?: string;
  /** additionalData fields the merchant has enabled (Customer Area > Additional data), e.g. refusalReasonRaw, merchantAdviceCode. */
  additionalData?: Record<string, string>;
}

/**
 * A standard webhook body as Adyen posts it, each item signed with `hmacKey` (hex) as Adyen documents
 * (https://docs.adyen.com/development-resources/webhooks/secure-webhooks/verify-hmac-signatures, "build
 * your own solution"): the values of pspReference, originalReference, merchantAccountCode,
 * merchantReference, amount value, amount currency, eventCode and success, in that order, an absent
 * one as the empty string, joined with ":"; HMAC-SHA256 keyed by the key's bytes (hex-decoded),
 * Base64, in `additionalData.hmacSignature`.
 */
export function adyenNotification(
  merchantAccount: string,
  hmacKey: string,
  items: readonly AdyenNotificationFields[],
): Record<string, unknown> {
  return {
    live: 'false',
    notificationItems: items.map((f) => {
      const success = f.success ? 'true' : 'false';
      const signed = [
        f.pspReference,
        f.originalReference ?? '',
        merchantAccount,
        f.merchantReference ?? '',
        String(f.amount.value),
        f.amount.currency,
        f.eventCode,
        success,
      ].join(':');
      const hmacSignature = createHmac('sha256', Buffer.from(hmacKey, 'hex')).update(signed, 'utf8').digest('base64');
      return {
        NotificationRequestItem: {
          additionalData: { ...f.additionalData, hmacSignature },
          amount: f.amount,
          eventCode: f.eventCode,
          eventDate: new Date().toISOString().replace(/\.\d{3}Z$/, '+00:00'),
          merchantAccountCode: merchantAccount,
          ...(f.merchantReference !== undefined ? { merchantReference: f.merchantReference } : {}),
          ...(f.originalReference !== undefined ? { originalReference: f.originalReference } : {}),
          ...(f.paymentMethod !== undefined ? { paymentMethod: f.paymentMethod } : {}),
          pspReference: f.pspReference,
          reason: f.reason ?? '',
          success,
        },
      };
    }),
  };
}

function error(status: number, errorCode: string, message: string, errorType: string): FakeResponse {
  return { status, body: { status, errorCode, message, errorType, pspReference: randomId(16).toUpperCase() } };
}

function brandOf(n: string): string {
  if (/^4/.test(n)) return 'visa';
  if (/^(5[1-5]|2[2-7])/.test(n)) return 'mc';
  if (/^3[47]/.test(n)) return 'amex';
  return 'visa';
}
