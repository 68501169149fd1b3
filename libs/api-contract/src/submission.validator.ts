import { RetCode, RetMessage, type ErrorEntry } from '@retain/domain';
import { amountToMinor } from './amount.validator';
import { classifyCardAccount, isCardError, type CardInput } from './card-account.validator';
import { parseDateTime } from './date-time.parser';
import { checkField, isPlainObject, isPresent, longerThan, metadataProblems } from './field-rules';
import {
  ADDRESS_FIELDS,
  MAX_TRANSACTIONS_PER_CALL,
  MERCHANT_ID_MAX_LENGTH,
  TRANSACTION_FIELDS,
  type AddressField,
  type FieldSpec,
} from './transaction-fields.table';
import { unsafeTextProblems } from './unsafe-text';

export type { CardInput } from './card-account.validator';

export type NormalizedAddress = Partial<Record<AddressField, string>>;

/** Everything needed to store an accepted transaction; optional fields absent in the input are null. */
export interface NormalizedTransaction {
  id: string;
  amountMinor: bigint;
  currency: string;
  failedAt: Date;
  auth_code: string;
  avs_code: string | null;
  cvn_code: string | null;
  division_number: string;
  payment_network_transaction_id: string | null;
  previous_billing_count: number | null;
  is_network_token: 0 | 1 | null;
  cryptogram: string | null;
  eci_indicator: string | null;
  network_advice_code: string | null;
  billing_descriptor: string | null;
  processor_transaction_id: string | null;
  account: { id: string; external_id: string | null; email: string | null };
  subscription: { id: string; starts: string | null; affiliate: string | null; sub_affiliate: string | null };
  payment_method: {
    id: string;
    account_holder: string | null;
    billing_address: NormalizedAddress | null;
    is_tokenized: boolean;
    primary: number;
  };
  card: CardInput;
  expiration_date: string | null;
  /** Lower-case `account_hash` as sent (masked and tokenized cards); the service computes it for full numbers. */
  account_hash: string | null;
  metadata: Record<string, string>;
}

/**
 * The keys of a rejected item that passed their own checks (null: absent or invalid), so that the
 * checks against stored rows list their failures too (decisions §4: all failures of a transaction).
 */
export interface ItemKeys {
  subscriptionId: string | null;
  accountId: string | null;
  externalId: string | null;
}

export type RejectedItem = { index: number; id: string | null; errors: ErrorEntry[]; keys?: ItemKeys };
export type AcceptedItem = { index: number; id: string; value: NormalizedTransaction };
export type ValidatedItem = RejectedItem | AcceptedItem;

export type BodyError = { code: 'RET400'; message: string };
export type SubmissionValidation = { ok: false; error: BodyError } | { ok: true; items: ValidatedItem[] };

interface CompiledField {
  path: string;
  segments: string[];
  spec: FieldSpec;
  ancestors: string[];
}

// Compiled once at load: the hot loop only indexes arrays and reads properties.
const FIELDS: CompiledField[] = Object.entries(TRANSACTION_FIELDS).map(([path, spec]) => {
  const segments = path.split('.');
  return {
    path,
    segments,
    spec,
    ancestors: segments.slice(0, -1).map((_, i) => segments.slice(0, i + 1).join('.')),
  };
});

const HASH_SPEC: FieldSpec = TRANSACTION_FIELDS['payment_method.credit_card.account_hash'];

/** The parent of the field is absent: required children are reported, others skipped. */
const PARENT_MISSING = Symbol('parent missing');
/** The parent is not an object: its own check reports it, children are skipped. */
const PARENT_INVALID = Symbol('parent invalid');

function lookup(root: Record<string, unknown>, segments: string[]): unknown {
  let cur: Record<string, unknown> = root;
  const last = segments.length - 1;
  for (let i = 0; i < last; i++) {
    const next = cur[segments[i]!];
    if (next === undefined || next === null) return PARENT_MISSING;
    if (!isPlainObject(next)) return PARENT_INVALID;
    cur = next;
  }
  return cur[segments[last]!];
}

const missing = (path: string): ErrorEntry => ({ code: RetCode.RET006, message: RetMessage.missing(path) });
const schema = (path: string, detail: string): ErrorEntry => ({
  code: RetCode.RET009,
  message: RetMessage.schema(path, detail),
});

const badBody = (): SubmissionValidation => ({
  ok: false,
  error: { code: RetCode.RET400, message: RetMessage.invalidParameter('transactions') },
});

/**
 * Primary data validation of `POST /retain/transactions` (decisions §4): the body shape, then
 * every transaction with all its failures listed. Duplicate ids and database checks (RETDUP,
 * RETDUP2, RET003, RET004) are left to the caller.
 */
export function validateSubmission(body: unknown): SubmissionValidation {
  if (!isPlainObject(body)) return badBody();
  const list = body['transactions'];
  if (!Array.isArray(list) || list.length === 0 || list.length > MAX_TRANSACTIONS_PER_CALL) return badBody();
  const items: ValidatedItem[] = new Array(list.length);
  for (let i = 0; i < list.length; i++) items[i] = validateTransaction(list[i], i);
  return { ok: true, items };
}

function validateTransaction(input: unknown, index: number): ValidatedItem {
  if (!isPlainObject(input)) return { index, id: null, errors: [schema('transaction', 'must be an object')] };
  // Text Postgres cannot store, anywhere in the item (known or unknown fields, keys): RET009 here
  // rather than a failed INSERT of the whole batch.
  const unsafe = unsafeTextProblems(input);
  const errors: ErrorEntry[] = unsafe.map(([path, detail]) => schema(path, detail));
  // Paths reported missing or invalid: children of a missing parent and cross-field rules skip them.
  let failed: string[] | null = unsafe.length > 0 ? unsafe.map(([path]) => path) : null;

  const rawId = input['id'];
  const id =
    typeof rawId === 'string' &&
    rawId.length > 0 &&
    !longerThan(rawId, MERCHANT_ID_MAX_LENGTH) &&
    !failed?.includes('id')
      ? rawId
      : null;

  const pm = input['payment_method'];
  const tokenized = isPlainObject(pm) && pm['is_tokenized'] === true;

  for (const f of FIELDS) {
    const value = lookup(input, f.segments);
    if (value === PARENT_INVALID) continue;
    if (unsafe.length > 0 && failed!.includes(f.path)) continue;
    if (value === PARENT_MISSING || !isPresent(f.spec, value)) {
      const required = f.spec.required === true || (f.spec.required === 'unless-tokenized' && !tokenized);
      if (!required) continue;
      // A missing required parent is reported once, not once per required child.
      if (failed !== null && f.ancestors.some((a) => failed!.includes(a))) continue;
      errors.push(missing(f.path));
      (failed ??= []).push(f.path);
      continue;
    }
    const detail = checkField(f.spec, value);
    if (detail !== null) {
      errors.push(schema(f.path, detail));
      (failed ??= []).push(f.path);
    }
  }

  const cross = crossFieldChecks(input, errors, tokenized, failed ?? []);
  if (errors.length > 0 || cross === null) return { index, id, errors, keys: keysOf(input, failed ?? []) };
  return { index, id: id!, value: normalize(input, cross.amountMinor, cross.card) };
}

const SUBSCRIPTION_ID = ['subscription', 'id'];
const ACCOUNT_ID = ['account', 'id'];
const EXTERNAL_ID = ['account', 'external_id'];

/** The keys of a rejected item that passed their own field checks (`failed`: the paths that did not). */
function keysOf(input: Record<string, unknown>, failed: string[]): ItemKeys {
  const key = (segments: string[]): string | null => {
    const v = lookup(input, segments);
    return typeof v === 'string' && v.length > 0 && !failed.includes(segments.join('.')) ? v : null;
  };
  return { subscriptionId: key(SUBSCRIPTION_ID), accountId: key(ACCOUNT_ID), externalId: key(EXTERNAL_ID) };
}

/**
 * Rules spanning several fields, run only on fields that passed their own checks (so one bad value
 * gives one error). Returns null when it added errors.
 */
function crossFieldChecks(
  tx: Record<string, unknown>,
  errors: ErrorEntry[],
  tokenized: boolean,
  failed: string[],
): { amountMinor: bigint; card: CardInput } | null {
  const before = errors.length;
  const ok = (path: string, value: unknown): boolean => value !== undefined && value !== null && !failed.includes(path);

  let amountMinor = 0n;
  const currency = tx['currency'];
  if (ok('amount', tx['amount']) && ok('currency', currency)) {
    const amount = amountToMinor(tx['amount'], currency as string);
    if (amount.ok) amountMinor = amount.minor;
    else errors.push(amount.error);
  }

  const pm = isPlainObject(tx['payment_method']) ? tx['payment_method'] : {};
  if (tx['is_network_token'] === 1 && pm['is_tokenized'] === false) {
    errors.push(schema('payment_method.is_tokenized', 'must be true when is_network_token is 1'));
  }

  let card: CardInput = { kind: 'token' };
  const cc = isPlainObject(pm['credit_card']) ? pm['credit_card'] : null;
  if (cc !== null) {
    const account = cc['account'] ?? undefined;
    // Left blank, the hash is absent (spec CreditCard.account_hash): computed for a full number,
    // optional with tokenization, missing (RET006) beside a masked number.
    const hash = isPresent(HASH_SPEC, cc['account_hash']) ? cc['account_hash'] : undefined;
    const accountOk = account === undefined || !failed.includes('payment_method.credit_card.account');
    const hashOk = hash === undefined || !failed.includes('payment_method.credit_card.account_hash');
    // Without tokenization a missing account is already a RET006.
    if (accountOk && hashOk && (tokenized || account !== undefined)) {
      const result = classifyCardAccount(account as string | undefined, hash as string | undefined, tokenized);
      if (isCardError(result)) errors.push(result);
      else card = result;
    }
  }

  const metadata = tx['metadata'];
  if (isPlainObject(metadata)) {
    for (const [path, detail] of metadataProblems(metadata)) errors.push(schema(path, detail));
  }
  return errors.length === before ? { amountMinor, card } : null;
}

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const obj = (v: unknown): Record<string, unknown> => (isPlainObject(v) ? v : {});

/** Builds the stored shape from a transaction that passed every check. */
function normalize(tx: Record<string, unknown>, amountMinor: bigint, card: CardInput): NormalizedTransaction {
  const account = obj(tx['account']);
  const subscription = obj(tx['subscription']);
  const pm = obj(tx['payment_method']);
  const cc = obj(pm['credit_card']);
  const address = pm['billing_address'];
  const hash = isPresent(HASH_SPEC, cc['account_hash']) ? str(cc['account_hash']) : null;
  return {
    id: tx['id'] as string,
    amountMinor,
    currency: tx['currency'] as string,
    failedAt: parseDateTime(tx['timestamp'] as string)!,
    auth_code: tx['auth_code'] as string,
    avs_code: str(tx['avs_code']),
    cvn_code: str(tx['cvn_code']),
    division_number: tx['division_number'] as string,
    payment_network_transaction_id: str(tx['payment_network_transaction_id']),
    previous_billing_count: typeof tx['previous_billing_count'] === 'number' ? tx['previous_billing_count'] : null,
    is_network_token: tx['is_network_token'] === 0 || tx['is_network_token'] === 1 ? tx['is_network_token'] : null,
    cryptogram: str(tx['cryptogram']),
    eci_indicator: str(tx['eci_indicator']),
    network_advice_code: str(tx['network_advice_code']),
    billing_descriptor: str(tx['billing_descriptor']),
    processor_transaction_id: str(tx['processor_transaction_id']),
    account: { id: account['id'] as string, external_id: str(account['external_id']), email: str(account['email']) },
    subscription: {
      id: subscription['id'] as string,
      starts: str(subscription['starts']),
      affiliate: str(subscription['affiliate']),
      sub_affiliate: str(subscription['sub_affiliate']),
    },
    payment_method: {
      id: pm['id'] as string,
      account_holder: str(pm['account_holder']),
      billing_address: isPlainObject(address) ? pickAddress(address) : null,
      is_tokenized: pm['is_tokenized'] === true,
      primary: typeof pm['primary'] === 'number' ? pm['primary'] : 1,
    },
    card,
    expiration_date: str(cc['expiration_date']),
    account_hash: hash === null ? null : hash.toLowerCase(),
    metadata: isPlainObject(tx['metadata']) ? (tx['metadata'] as Record<string, string>) : {},
  };
}

// Only the known address fields are kept: unknown keys of the input are not stored.
function pickAddress(address: Record<string, unknown>): NormalizedAddress {
  const out: NormalizedAddress = {};
  for (const k of ADDRESS_FIELDS) {
    const v = address[k];
    if (typeof v === 'string') out[k] = v;
  }
  return out;
}
