import { RetCode, RetMessage, looksLikeCompactJwe, luhnValid, type ErrorEntry } from '@retain/domain';

/** How the card arrived. The clear number lives only in this in-memory value, never in errors. */
export type CardInput =
  | { kind: 'clear'; pan: string }
  | { kind: 'jwe'; jwe: string }
  | { kind: 'masked'; masked: string; accountHash: string }
  | { kind: 'token'; bin?: string };

const ACCOUNT = 'payment_method.credit_card.account';
const ACCOUNT_HASH = 'payment_method.credit_card.account_hash';
const BIN_RE = /^\d{6,8}$/;
// 6-8 digit BIN, a masked middle, the last 4 digits; 12-19 characters in all.
const MASKED_RE = /^\d{6,8}[*Xx]+\d{4}$/;
const SEPARATORS_RE = /[\s-]/g;
const DIGITS_AND_SEPARATORS_RE = /^[\d\s-]+$/;
const FULL_NUMBER_RE = /^\d{12,19}$/;
const LETTER_RE = /[A-Za-z]/;
const DIGIT_RE = /\d/g;
/** Twelve digits in a row once spaces, dashes, dots and slashes are taken out: a card number's length. */
const CARD_RUN_RE = /\d{12,}/;
const RUN_SEPARATORS_RE = /[\s./-]/g;

const schema = (detail: string, path = ACCOUNT): ErrorEntry => ({
  code: RetCode.RET009,
  message: RetMessage.schema(path, detail),
});
const invalidCard = (): ErrorEntry => ({ code: RetCode.RET010, message: RetMessage.invalidCard });

/**
 * Classifies `credit_card.account` (decisions §4 and §10): a BIN with tokenization; otherwise
 *  - a clear number (digits, possibly with spaces or dashes): Luhn and length checked now, RET010;
 *  - a masked number (BIN, masked middle, last 4) with its `account_hash` (without it: RET006);
 *  - anything else is taken as encrypted: the post-submission review decrypts it and answers RET010
 *    in the `validation failed` push when it cannot (a compact JWE or not: only a clear number
 *    gets a synchronous answer).
 * A value without letters holding 12 or more digits (a clear number with other separators), or one
 * that is not a compact JWE and holds 12 digits in a row (a number among letters), is answered RET010
 * at once too, so a card number is never stored as if it were encrypted.
 * `account` and `accountHash` have passed their field checks (type, at most 4096 characters).
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
  if (account.trim() === '') return schema('must not be empty');
  if (DIGITS_AND_SEPARATORS_RE.test(account)) {
    const pan = account.replace(SEPARATORS_RE, '');
    return FULL_NUMBER_RE.test(pan) && luhnValid(pan) ? { kind: 'clear', pan } : invalidCard();
  }
  const compact = account.replace(SEPARATORS_RE, '');
  if (MASKED_RE.test(compact) && compact.length >= 12 && compact.length <= 19) {
    // service-spec: with a masked account "then supply account_hash"; missing, it is a required
    // element missing (decisions §4: RET006 naming the field path).
    return accountHash === undefined
      ? { code: RetCode.RET006, message: RetMessage.missing(ACCOUNT_HASH) }
      : { kind: 'masked', masked: account, accountHash: accountHash.toLowerCase() };
  }
  if (!LETTER_RE.test(account) && (account.match(DIGIT_RE)?.length ?? 0) >= 12) return invalidCard();
  // A card number among letters ("VISA 4111 1111 1111 1111") is not encrypted either (a compact JWE
  // is base64url parts, which this never looks at).
  if (!looksLikeCompactJwe(account) && CARD_RUN_RE.test(account.replace(RUN_SEPARATORS_RE, ''))) return invalidCard();
  return { kind: 'jwe', jwe: account };
}

export const isCardError = (v: CardInput | ErrorEntry): v is ErrorEntry => 'code' in v;
