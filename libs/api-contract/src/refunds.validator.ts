import { RetCode, RetMessage, type ErrorEntry } from '@retain/domain';
import { isPlainObject, longerThan } from './field-rules';
import type { BodyError } from './submission.validator';
import { MAX_REFUNDS_PER_CALL, MERCHANT_ID_MAX_LENGTH } from './transaction-fields.table';
import { unsafeTextProblems } from './unsafe-text';

/** A refund request item; `amount` null = omitted: everything refundable. Decimals are checked by the caller. */
export interface NormalizedRefundRequest {
  id: string;
  amount: number | null;
}

export type RejectedRefund = { index: number; id: string | null; errors: ErrorEntry[] };
export type AcceptedRefund = { index: number; id: string; value: NormalizedRefundRequest };
export type ValidatedRefund = RejectedRefund | AcceptedRefund;
export type RefundsValidation = { ok: false; error: BodyError } | { ok: true; items: ValidatedRefund[] };

const schema = (path: string, detail: string): ErrorEntry => ({
  code: RetCode.RET009,
  message: RetMessage.schema(path, detail),
});

/**
 * Primary validation of `POST /retain/refunds` (decisions §8): 1..1000 items of `{id, amount?}`;
 * a later occurrence of an id already seen in the call is RETDUP. Whether `amount` has valid
 * decimals depends on the transaction's currency: the caller checks it with `amountToMinor`.
 */
export function validateRefunds(body: unknown): RefundsValidation {
  const list = isPlainObject(body) ? body['refunds'] : undefined;
  if (!Array.isArray(list) || list.length === 0 || list.length > MAX_REFUNDS_PER_CALL) {
    return { ok: false, error: { code: RetCode.RET400, message: RetMessage.invalidParameter('refunds') } };
  }
  const seen = new Set<string>();
  const items: ValidatedRefund[] = new Array(list.length);
  for (let index = 0; index < list.length; index++) {
    const item: unknown = list[index];
    if (!isPlainObject(item)) {
      items[index] = { index, id: null, errors: [schema('refund', 'must be an object')] };
      continue;
    }
    // Text Postgres cannot store (NUL, unpaired surrogates), in any field: RET009 for this item.
    const unsafe = unsafeTextProblems(item);
    const errors: ErrorEntry[] = unsafe.map(([path, detail]) => schema(path, detail));
    const rawId = item['id'];
    let id: string | null = null;
    // An id that cannot be stored is reported above; the item is then named by its index.
    const idUnsafe = unsafe.some(([path]) => path === 'id');
    if (idUnsafe) id = null;
    else if (rawId === undefined || rawId === null)
      errors.push({ code: RetCode.RET006, message: RetMessage.missing('id') });
    else if (typeof rawId !== 'string') errors.push(schema('id', 'must be a string'));
    else if (rawId.length === 0) errors.push(schema('id', 'must not be empty'));
    else if (longerThan(rawId, MERCHANT_ID_MAX_LENGTH)) {
      errors.push(schema('id', `must be at most ${MERCHANT_ID_MAX_LENGTH} characters`));
    } else id = rawId;

    // `amount` is optional, and a number when present (service-spec): an explicit null is not one. It
    // is what JSON makes of a client's NaN, so it must never read as "everything refundable".
    const amount = item['amount'];
    if (amount !== undefined) {
      if (typeof amount !== 'number' || !Number.isFinite(amount)) errors.push(schema('amount', 'must be a number'));
      else if (!(amount > 0)) errors.push(schema('amount', 'must be greater than 0'));
    }

    // The first occurrence proceeds (even if invalid itself); later ones are duplicates.
    if (id !== null) {
      if (seen.has(id)) errors.push({ code: RetCode.RETDUP, message: RetMessage.duplicateInSubmission });
      seen.add(id);
    }
    items[index] =
      errors.length > 0
        ? { index, id, errors }
        : { index, id: id!, value: { id: id!, amount: typeof amount === 'number' ? amount : null } };
  }
  return { ok: true, items };
}
