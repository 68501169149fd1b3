/**
 * The payment processor port. The sandbox implements it today; a real processor adapter
 * implements the same interface later. Nothing outside libs/processor may depend on which
 * implementation is behind it.
 */
export type CardNetwork = 'visa' | 'mastercard' | 'amex' | 'discover' | 'other';

export type PaymentInstrument =
  | { kind: 'pan'; pan: string; expiration?: string | null }
  | {
      kind: 'token';
      /**
       * The processor's saved payment method (Stripe `pm_...`, optionally `cus_...|pm_...`; Adyen
       * `storedPaymentMethodId`, optionally `shopperReference|id`), or the network token itself
       * (DPAN) when `isNetworkToken`.
       */
      token: string;
      isNetworkToken: boolean;
      cryptogram?: string | null;
      /** Network tokens: the token's expiry (`YYYYMM`) and the ECI sent with the cryptogram. */
      expiration?: string | null;
      eci?: string | null;
    };

export interface ChargeRequest {
  /** Stable per attempt (the attempt's vid): the same key never charges twice. */
  idempotencyKey: string;
  /** 1-based retry attempt number of this transaction. */
  attemptNumber: number;
  amountMinor: bigint;
  currency: string;
  instrument: PaymentInstrument;
  /** Decline code of the original failed charge the merchant submitted (its auth_code). */
  originalResponseCode: string;
  divisionNumber: string;
  networkTransactionId?: string | null;
  billingDescriptor?: string | null;
  /** The (possibly simulated) time of the attempt. */
  at: Date;
  /**
   * When the original charge failed (the submitted transaction's timestamp). Optional; the sandbox's
   * recovery model measures how long a decline has lasted from it.
   */
  originalFailedAt?: Date | null;
  /** A forced deposit: capture without authorization (only for processors with `forcedDeposits`). */
  forcedDeposit?: boolean;
}

export type ChargeResult =
  | {
      outcome: 'approved';
      responseCode: string;
      processorTransactionId: string;
      message: string;
      /** What was captured when the issuer approved less than asked (a partial authorization); absent: all of it. */
      amountMinor?: bigint;
    }
  | {
      outcome: 'declined';
      responseCode: string;
      /** Mastercard Merchant Advice Code, when the network returned one (e.g. '03'). */
      merchantAdviceCode?: string | null;
      network: CardNetwork;
      processorTransactionId: string;
      message: string;
    }
  /**
   * Technical failure: the processor did not give a decision (timeout, reset, 5xx, 429, a body that
   * is not the expected JSON). The charge may have gone through: resolve it with lookupCharge.
   */
  | {
      outcome: 'error';
      message: string;
      /** The processor asked to slow down (429 Retry-After, in ms): slow this merchant's attempts. */
      retryAfterMs?: number | null;
      /**
       * Set only by a lookup: the processor's own record for this key is this error, so nothing was
       * charged under it. Without it, an `error` from a lookup means the lookup itself got no answer
       * (the charge may still have gone through) and the attempt stays unknown.
       */
      settled?: boolean;
      /**
       * The processor answered with its stored answer to an earlier request under this key (Stripe's
       * `Idempotent-Replayed`), an error such as a 500 it keeps for 24 h: this request ran nothing, and
       * no request under the key will while the processor keeps it. From a lookup that replayed the
       * request it also says no charge was found under the key: the caller reads it as "no charge found"
       * (like null), counted from the latest request that really went out, never from this replay
       * (AttemptService.lookUp).
       */
      storedAnswer?: boolean;
    };

export interface RefundRequest {
  idempotencyKey: string;
  processorTransactionId: string;
  amountMinor: bigint;
  currency: string;
}

export type RefundResult =
  | {
      outcome: 'completed';
      processorRefundId: string;
      message: string;
      /**
       * The processor may still fail this refund later (Stripe: a card refund can move from `succeeded`
       * to `failed`): it is read again with refundStatus for a bounded time (REFUND_RECHECK_WINDOW_MS).
       */
      mayStillFail?: boolean;
    }
  /**
   * Accepted for processing; the processor reports the result later (Adyen's `received` on an account
   * that receives its notifications: the REFUND notification settles it). The refund stays Processing.
   */
  | { outcome: 'pending'; processorRefundId: string; message: string }
  | { outcome: 'failed'; processorRefundId: string | null; message: string };

export type DetokenizeResult = { ok: true; pan: string } | { ok: false; message: string };

export interface ProcessorLimits {
  /** Longest payment method id (token) the processor accepts. */
  maxPaymentMethodIdLength: number;
  /** Allowed billing descriptor text. */
  billingDescriptorPattern: RegExp;
  /**
   * Whether the processor can charge this amount in its own units (ISO minor units here; see
   * processor-amounts.ts). Absent: every amount in ISO units fits.
   */
  amountFits?(amountMinor: bigint, currency: string): boolean;
}

export interface PaymentProcessor {
  readonly name: string;
  readonly limits: ProcessorLimits;
  charge(req: ChargeRequest): Promise<ChargeResult>;
  /**
   * Outcome of an earlier charge by idempotency key; null when the processor never received it.
   * Used when an attempt's outcome is unknown (timeout, crash after the call). An `error` result
   * means the outcome is still unknown (ask again later). Processors without a query by reference
   * (Adyen) can only resolve it by replaying the request under the same key, which their
   * idempotency answers with the first response and never charges twice: pass `original` (the
   * attempt's ChargeRequest, same key) for them; without it such an adapter answers `error`.
   */
  lookupCharge(idempotencyKey: string, original?: ChargeRequest): Promise<ChargeResult | null>;
  /**
   * A refund the processor did not answer (timeout, 5xx, 429) throws ProcessorUnavailableError:
   * retry it with the same idempotency key.
   */
  refund(req: RefundRequest): Promise<RefundResult>;
  /**
   * A refund's state now, by the processor's refund id (processors whose `completed` answers say
   * `mayStillFail`): `completed`, `pending` (not final), or `failed` with the processor's reason.
   * Throws ProcessorUnavailableError when the processor does not answer. Absent: never read again.
   */
  refundStatus?(processorRefundId: string): Promise<RefundResult>;
  detokenize(token: string): Promise<DetokenizeResult>;
  /**
   * Processors whose tokens cannot be detokenized (Stripe, Adyen: `detokenize` always answers
   * ok:false) say here whether a token has the form of one of their saved payment methods; the
   * review uses it instead of detokenize when present. `isNetworkToken`: the token is the network
   * token itself (DPAN), charged as its number.
   */
  checkToken?(token: string, opts?: { isNetworkToken?: boolean }): { ok: true } | { ok: false; message: string };
  /**
   * Whether a capture has settled (the processor paid it out in its settlement batch) as of `at`.
   * Absent: the adapter does not report settlement, and its transactions stay `Captured`.
   */
  /** The processor accepts forced deposits (captures without authorization); absent: it does not. */
  readonly forcedDeposits?: boolean;
  settlementOf?(charge: { processorTransactionId: string; capturedAt: Date }, at: Date): Promise<'settled' | 'pending'>;
}

export const PAYMENT_PROCESSOR = Symbol('PAYMENT_PROCESSOR');

/** The processor did not answer a refund (or another call without an `error` outcome). */
export class ProcessorUnavailableError extends Error {
  constructor(
    message: string,
    /** 429 Retry-After in ms, when the processor gave one. */
    readonly retryAfterMs: number | null = null,
  ) {
    super(message);
    this.name = 'ProcessorUnavailableError';
  }
}
