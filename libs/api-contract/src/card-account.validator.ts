import {
  RetCode,
  RetMessage,
  looksLikeCompactJwe,
  looksLikeFullCardNumber,
  luhnValid,
  type ErrorEntry,
} from '@retain/domain';

/** How the card arrived. The clear number lives only in this in-memory value, never in errors. */
export type CardInput =
  | { kind: 'clear'; pan: string }
  | { kind: 'jwe'; jwe: string }
  | { kind: 'masked'; masked: string; accountHash: string }
  | { kind: 'token'; bin?: string };

const ACCOUNT = 'payment_method.credit_card.account';
const BIN_RE = /^\d{6,8}$/;
// 6-8 digit BIN, a masked middle, the last 4 digits; 12-19 characters in all.
const MASKED_RE = /^\d{6,8}[*Xx]+\d{4}$/;
const SEPARATORS_RE = /[\s-]/g;
const DIGITS_AND_SEPARATORS_RE = /^[\d\s-]+$/;

const schema = (detail: string, path = ACCOUNT): ErrorEntry => ({
  code: RetCode.RET009,
  message: RetMessage.schema(path, detail),
});
const invalidCard = (): ErrorEntry => ({ code: RetCode.RET010, message: RetMessage.invalidCard });

/**
 * Classifies `credit_card.account` (decisions §10): a BIN with tokenization; otherwise a clear
 * number (Luhn-checked now), a compact JWE (decrypted by the post-submission review) or a masked
 * number with its `account_hash`. `account` and `accountHash` have passed their field checks.
 */
export function classifyCardAccount(
  account: string | undefined,
  accountHash: string | undefined,
  tokenized: boolean,
): CardInput | ErrorEntry {
  if (tokenized) {
    if (account === undefined) return { kind: 'token' };
    return BIN_RE.test(account)
      ? { kind: 'token', bin: account }
      : schema('must be the 6-8 digit BIN when payment_method.is_tokenized is true');
  }
  if (account === undefined) return schema('is required when payment_method.is_tokenized is false');
  if (looksLikeFullCardNumber(account)) {
    const pan = account.replace(SEPARATORS_RE, '');
    return luhnValid(pan) ? { kind: 'clear', pan } : invalidCard();
  }
  if (looksLikeCompactJwe(account)) return { kind: 'jwe', jwe: account };
  const compact = account.replace(SEPARATORS_RE, '');
  if (MASKED_RE.test(compact) && compact.length >= 12 && compact.length <= 19) {
    return accountHash === undefined
      ? schema('must be given with a masked account', 'payment_method.credit_card.account_hash')
      : { kind: 'masked', masked: account, accountHash: accountHash.toLowerCase() };
  }
  // Digits of a wrong length or a broken encryption are "not valid or incorrectly encrypted".
  if (DIGITS_AND_SEPARATORS_RE.test(account) || account.includes('.')) return invalidCard();
  return schema('must be a card number, a compact JWE or a masked number');
}

export const isCardError = (v: CardInput | ErrorEntry): v is ErrorEntry => 'code' in v;
