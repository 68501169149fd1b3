/**
 * The writable fields of a submitted Transaction, declared once. The hand-written validator
 * (submission.validator.ts) walks this table and the DTO decorators (contract-field.decorator.ts)
 * are generated from it, so limits and required flags cannot drift between the two.
 * Read-only fields of the spec (vid, submitted_ts, refunds, ...) are not listed: sent by a merchant,
 * they are ignored.
 */
export type FieldKind = 'string' | 'number' | 'integer' | 'boolean' | 'object';

export type FieldFormat =
  | 'iso-currency'
  | 'date-time'
  | 'date-time-local'
  | 'yyyymm'
  | 'email'
  | 'country'
  | 'sha1-hex'
  | 'submission-status'
  | 'advice-code'
  | 'metadata';

export interface FieldSpec {
  readonly kind: FieldKind;
  /** `unless-tokenized`: required when `payment_method.is_tokenized` is not `true`. */
  readonly required?: true | 'unless-tokenized';
  readonly maxLength?: number;
  readonly format?: FieldFormat;
  /** Inclusive bounds of integers. */
  readonly min?: number;
  readonly max?: number;
  /** Numbers must be strictly greater than this (amount > 0). */
  readonly exclusiveMin?: number;
  /**
   * A blank string (empty or only whitespace) is taken as the field left out: only where the spec
   * says the field "may be left blank" (CreditCard.account_hash).
   */
  readonly blankIsAbsent?: true;
}

const INT32_MAX = 2_147_483_647;

// Order matters: a parent object comes before its children (the validator skips the children of a
// missing or malformed parent). Lengths without a spec limit follow the database columns.
export const TRANSACTION_FIELDS = {
  id: { kind: 'string', required: true, maxLength: 128 },
  amount: { kind: 'number', required: true, exclusiveMin: 0 },
  currency: { kind: 'string', required: true, maxLength: 3, format: 'iso-currency' },
  timestamp: { kind: 'string', required: true, maxLength: 64, format: 'date-time' },
  status: { kind: 'string', maxLength: 32, format: 'submission-status' },
  division_number: { kind: 'string', required: true, maxLength: 128 },
  auth_code: { kind: 'string', required: true, maxLength: 64 },
  // decisions §16: the Mastercard Merchant Advice Code of the original decline.
  network_advice_code: { kind: 'string', maxLength: 2, format: 'advice-code' },
  avs_code: { kind: 'string', maxLength: 8 },
  cvn_code: { kind: 'string', maxLength: 8 },
  payment_network_transaction_id: { kind: 'string', maxLength: 128 },
  processor_transaction_id: { kind: 'string', maxLength: 128 },
  previous_billing_count: { kind: 'integer', min: -1, max: INT32_MAX },
  is_network_token: { kind: 'integer', min: 0, max: 1 },
  cryptogram: { kind: 'string', maxLength: 512 },
  eci_indicator: { kind: 'string', maxLength: 16 },
  billing_descriptor: { kind: 'string', maxLength: 255 },
  account: { kind: 'object' },
  'account.id': { kind: 'string', required: true, maxLength: 128 },
  'account.external_id': { kind: 'string', maxLength: 128 },
  'account.email': { kind: 'string', maxLength: 254, format: 'email' },
  subscription: { kind: 'object' },
  'subscription.id': { kind: 'string', required: true, maxLength: 128 },
  'subscription.starts': { kind: 'string', maxLength: 64, format: 'date-time-local' },
  'subscription.affiliate': { kind: 'string', maxLength: 128 },
  'subscription.sub_affiliate': { kind: 'string', maxLength: 128 },
  payment_method: { kind: 'object' },
  'payment_method.id': { kind: 'string', required: true, maxLength: 255 },
  'payment_method.is_tokenized': { kind: 'boolean', required: true },
  'payment_method.account_holder': { kind: 'string', maxLength: 255 },
  'payment_method.primary': { kind: 'integer', min: 0, max: INT32_MAX },
  'payment_method.billing_address': { kind: 'object' },
  'payment_method.billing_address.line1': { kind: 'string', maxLength: 255 },
  'payment_method.billing_address.line2': { kind: 'string', maxLength: 255 },
  'payment_method.billing_address.line3': { kind: 'string', maxLength: 255 },
  'payment_method.billing_address.city': { kind: 'string', maxLength: 64 },
  'payment_method.billing_address.county': { kind: 'string', maxLength: 64 },
  'payment_method.billing_address.district': { kind: 'string', maxLength: 255 },
  'payment_method.billing_address.postal_code': { kind: 'string', maxLength: 255 },
  'payment_method.billing_address.country': { kind: 'string', maxLength: 2, format: 'country' },
  // Spec: credit_card and its expiration are required only when is_tokenized is false.
  'payment_method.credit_card': { kind: 'object', required: 'unless-tokenized' },
  // A compact JWE under an RSA-4096 key stays well below 4096 characters.
  'payment_method.credit_card.account': { kind: 'string', required: 'unless-tokenized', maxLength: 4096 },
  // Spec: "May be left blank when the full number is sent; optional with tokenization." A blank hash
  // beside a masked number is then a missing one (RET006, card-account.validator.ts).
  'payment_method.credit_card.account_hash': { kind: 'string', maxLength: 40, format: 'sha1-hex', blankIsAbsent: true },
  'payment_method.credit_card.expiration_date': {
    kind: 'string',
    required: 'unless-tokenized',
    maxLength: 6,
    format: 'yyyymm',
  },
  metadata: { kind: 'object', format: 'metadata' },
} as const satisfies Record<string, FieldSpec>;

export type TransactionFieldPath = keyof typeof TRANSACTION_FIELDS;

/**
 * Required in the OpenAPI schema: required fields, and objects holding a required field (account,
 * subscription, payment_method). The validator reports the missing children of such an object
 * (`Missing transaction element: account.id`) rather than the object itself.
 */
export function requiredInSchema(path: TransactionFieldPath): boolean {
  const fields: Record<string, FieldSpec> = TRANSACTION_FIELDS;
  if (fields[path]!.required === true) return true;
  return Object.keys(fields).some(
    (p) => p.startsWith(`${path}.`) && !p.slice(path.length + 1).includes('.') && fields[p]!.required === true,
  );
}

export const ADDRESS_FIELDS = [
  'line1',
  'line2',
  'line3',
  'city',
  'county',
  'district',
  'postal_code',
  'country',
] as const;
export type AddressField = (typeof ADDRESS_FIELDS)[number];

/** Metadata limits of the spec; keys with the reserved prefix belong to the service. */
export const METADATA_KEY_MAX_LENGTH = 256;
export const METADATA_VALUE_MAX_LENGTH = 1024;
/**
 * All of one transaction's metadata, keys and values: the spec bounds each entry, not their number, and
 * the metadata is copied into the transaction's every push. Without a bound, one 10 MiB request made
 * pushes the dispatcher could not hold in memory (51 entries of the largest size still fit).
 */
export const METADATA_MAX_TOTAL_LENGTH = 65_536;
export { METADATA_RESERVED_PREFIX } from '@retain/domain';

export const MAX_TRANSACTIONS_PER_CALL = 1000;
export const MAX_REFUNDS_PER_CALL = 1000;
/** Merchant identifiers (transaction id, refund id, cursors, filters): spec max 128. */
export const MERCHANT_ID_MAX_LENGTH = 128;
