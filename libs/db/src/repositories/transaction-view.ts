import { LEGACY_POLICY_VERSION, METADATA_RESERVED_PREFIX as RESERVED, fromMinorUnits } from '@retain/domain';
import type { AttemptEntity, RefundEntity, TransactionEntity } from '../entities';

/** The Transaction resource as the API and push notifications show it (spec field names). */
export type TransactionView = Record<string, unknown>;

/**
 * The transaction columns its views read (transactionView, paymentMethodView, attemptView), by
 * property. Reads that only show transactions select these, as their properties, in plain SQL
 * (TRANSACTION_VIEW_COLUMNS): no sealed card data leaves the database, and no entity is built
 * (TypeORM's hydration of the 60 columns was a quarter of a list call's CPU). pg's own parsers give
 * the values TypeORM gives: Date, bigint as string, jsonb through parseJson.
 */
const TRANSACTION_VIEW_FIELDS = {
  id: 'id',
  vid: 'vid',
  merchantTxnId: 'merchant_txn_id',
  failedAt: 'failed_at',
  submittedTs: 'submitted_ts',
  amountMinor: 'amount_minor',
  capturedAmountMinor: 'captured_amount_minor',
  partialAmountMinor: 'partial_amount_minor',
  currency: 'currency',
  status: 'status',
  divisionNumber: 'division_number',
  processorTransactionId: 'processor_transaction_id',
  account: 'account',
  subscription: 'subscription',
  previousBillingCount: 'previous_billing_count',
  paymentMethod: 'payment_method',
  accountHash: 'account_hash',
  expirationDate: 'expiration_date',
  accountUpdated: 'account_updated',
  accountUpdateJwe: 'account_update_jwe',
  metadata: 'metadata',
  nextAttemptAt: 'next_attempt_at',
  nextAttemptPlan: 'next_attempt_plan',
  policyVersion: 'policy_version',
  experimentId: 'experiment_id',
  experimentArm: 'experiment_arm',
  billingDescriptor: 'billing_descriptor',
  authCode: 'auth_code',
  networkAdviceCode: 'network_advice_code',
  avsCode: 'avs_code',
  cvnCode: 'cvn_code',
  authCodeDescription: 'auth_code_description',
  paymentNetworkTransactionId: 'payment_network_transaction_id',
  forcedDeposit: 'forced_deposit',
  isNetworkToken: 'is_network_token',
  eciIndicator: 'eci_indicator',
} as const satisfies { [K in keyof TransactionEntity]?: string };

/** What a transaction's views read of it. */
export type TransactionViewRow = Pick<TransactionEntity, keyof typeof TRANSACTION_VIEW_FIELDS>;

/** The select list of TransactionViewRow, from the transactions table aliased `t`. */
export const TRANSACTION_VIEW_COLUMNS = Object.entries(TRANSACTION_VIEW_FIELDS)
  .map(([property, column]) => `t.${column} AS "${property}"`)
  .join(', ');

/** What a refund's view reads of it, and its transaction. */
export type RefundViewRow = Pick<RefundEntity, 'vid' | 'amountMinor' | 'currency' | 'status' | 'timestamp'>;

/** The select list of RefundViewRow (and transactionId), from the refunds table aliased `r`. */
export const REFUND_VIEW_COLUMNS =
  'r.transaction_id AS "transactionId", r.vid, r.amount_minor AS "amountMinor", r.currency, r.status, r."timestamp"';

const iso = (d: Date | null | undefined): string | null => (d ? new Date(d).toISOString() : null);
const dateOnly = (d: Date | null | undefined): string | null => (d ? new Date(d).toISOString().slice(0, 10) : null);

export function refundView(r: RefundViewRow, merchantTxnId: string): Record<string, unknown> {
  return {
    id: merchantTxnId,
    vid: r.vid,
    amount: fromMinorUnits(r.amountMinor, r.currency),
    status: r.status,
    timestamp: iso(r.timestamp),
  };
}

/**
 * The payment_method of a transaction as the API shows it: the one it charges now (after a
 * fallback: another of the account's payment methods), card number masked. The updated card's
 * full number appears only inside `account_update_jwe`, encrypted to the merchant's key.
 */
export function paymentMethodView(t: TransactionViewRow): Record<string, unknown> {
  const pm = t.paymentMethod;
  return {
    id: pm.id,
    vid: pm.vid,
    account_holder: pm.account_holder ?? null,
    billing_address: pm.billing_address ?? null,
    is_tokenized: pm.is_tokenized,
    type: 'CreditCard',
    primary: pm.primary,
    credit_card: {
      account: pm.card_account_display ?? null,
      account_hash: t.accountHash,
      expiration_date: t.expirationDate,
      account_updated: t.accountUpdated === true,
      ...(t.accountUpdateJwe ? { account_update_jwe: t.accountUpdateJwe } : {}),
    },
  };
}

/** The fields an attempt freezes when it goes out: the payment method it charges. */
export function chargedPaymentMethodFields(t: TransactionViewRow): Record<string, unknown> {
  return { payment_method: paymentMethodView(t), is_network_token: t.isNetworkToken, eci_indicator: t.eciIndicator };
}

/** The merchant-submitted transaction (retry_number 0). */
export function transactionView(t: TransactionViewRow, refunds: readonly RefundViewRow[] = []): TransactionView {
  return {
    vid: t.vid,
    id: t.merchantTxnId,
    timestamp: iso(t.failedAt),
    submitted_ts: iso(t.submittedTs),
    amount: fromMinorUnits(t.amountMinor, t.currency),
    // A partial authorization (decisions §15): what the transaction's capture was approved for, which is
    // also what the merchant keeps and may refund. Its own column: a second capture (refunded at once)
    // adds to captured_amount_minor, never to it. Rows without it: a capture below the amount.
    ...(t.partialAmountMinor
      ? { partial_amount: fromMinorUnits(t.partialAmountMinor, t.currency) }
      : t.capturedAmountMinor && BigInt(t.capturedAmountMinor) < BigInt(t.amountMinor)
        ? { partial_amount: fromMinorUnits(t.capturedAmountMinor, t.currency) }
        : {}),
    currency: t.currency,
    status: t.status,
    division_number: t.divisionNumber,
    retain_transaction_id: null,
    refunds: refunds.map((r) => refundView(r, t.merchantTxnId)),
    processor_transaction_id: t.processorTransactionId,
    account: {
      id: t.account.id,
      vid: t.account.vid,
      external_id: t.account.external_id ?? null,
      email: t.account.email ?? null,
    },
    subscription: {
      id: t.subscription.id,
      starts: t.subscription.starts ?? null,
      affiliate: t.subscription.affiliate ?? null,
      sub_affiliate: t.subscription.sub_affiliate ?? null,
    },
    previous_billing_count: t.previousBillingCount,
    payment_method: paymentMethodView(t),
    metadata: t.metadata,
    next_activity: dateOnly(t.nextAttemptAt),
    retry_plan: t.nextAttemptAt ? (t.nextAttemptPlan ?? null) : null,
    retry_policy: { version: t.policyVersion, experiment_id: t.experimentId, arm: t.experimentArm },
    billing_descriptor: t.billingDescriptor,
    auth_code: t.authCode,
    network_advice_code: t.networkAdviceCode ?? null,
    avs_code: t.avsCode,
    cvn_code: t.cvnCode,
    auth_code_description: t.authCodeDescription,
    payment_network_transaction_id: t.paymentNetworkTransactionId,
    retry_number: 0,
    // Captured without authorization by a forced deposit (service-spec).
    forced_deposit: t.forcedDeposit === true,
    is_network_token: t.isNetworkToken,
    eci_indicator: t.eciIndicator,
  };
}

/** A retry attempt, shown as its own Transaction linked to the submitted one by `id`. */
export function attemptView(t: TransactionViewRow, a: AttemptEntity): TransactionView {
  const { partial_amount: _ofTheTransaction, ...base } = transactionView(t, []);
  return {
    ...base,
    ...(a.partialAmountMinor ? { partial_amount: fromMinorUnits(a.partialAmountMinor, a.currency) } : {}),
    // service-spec Metadata: generated transactions inherit the submitted one's metadata, plus
    // read-only entries of the service under its reserved prefix (a merchant's `retain:` keys are refused).
    metadata: {
      ...(t.metadata ?? {}),
      [`${RESERVED}generated`]: 'retry',
      [`${RESERVED}original_vid`]: t.vid,
      [`${RESERVED}retry_number`]: String(a.retryNumber),
      [`${RESERVED}policy_version`]: t.policyVersion ?? LEGACY_POLICY_VERSION,
      ...(t.experimentArm ? { [`${RESERVED}experiment_arm`]: t.experimentArm } : {}),
    },
    vid: a.vid,
    timestamp: iso(a.processedAt ?? a.scheduledFor),
    amount: fromMinorUnits(a.amountMinor, a.currency),
    currency: a.currency,
    // An attempt whose outcome is not known yet (a processor error, looked up by the reconciliation) has
    // no status of its own: decisions §7 and §16 show it as a failure, 96 `Soft Failure`, until it resolves.
    status: a.status ?? (a.state === 'unknown' ? 'Failed' : 'Processing'),
    retain_transaction_id: a.retainTransactionId,
    processor_transaction_id: a.processorTransactionId,
    next_activity: null,
    retry_plan: a.plan ?? null,
    // decisions §16: a processor error without a response code shows 96 (rows recorded before it was stored).
    auth_code: a.responseCode ?? (a.state === 'error' || a.state === 'unknown' ? '96' : null),
    // decisions §16: an attempt shows its own Mastercard advice code (null when its answer had none),
    // not the one submitted with the original decline.
    network_advice_code: a.merchantAdviceCode ?? null,
    auth_code_description: a.authCodeDescription,
    retry_number: a.retryNumber,
    forced_deposit: a.forcedDeposit === true,
    // The payment method this attempt charged (decisions §15: attempts show the one they used).
    ...(a.paymentMethodView ?? {}),
  };
}
