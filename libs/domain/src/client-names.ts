/**
 * Names a client chose (query parameters, object keys of a body) are shown in an error message
 * only when they cannot carry a card number or unprintable text (decisions §10): a plain word of
 * ASCII letters, digits, `_`, `-` and `:` (`retain:x`), starting with a letter or `_`, at most 64
 * characters, with no run of 12 or more digits once those separators are left out
 * (`x4111_1111_1111_1111` is not shown). Every message naming such a name goes through here; the
 * others say a neutral word instead (`query`, `metadata key`).
 */
const PLAIN_WORD_RE = /^[A-Za-z_][A-Za-z0-9_:-]{0,63}$/;
const CARD_LIKE_RE = /\d{12,}/;

export function isNameable(name: string): boolean {
  return PLAIN_WORD_RE.test(name) && !CARD_LIKE_RE.test(name.replace(/[_:-]/g, ''));
}

/** `name` when it may be shown (isNameable), else `neutral`. */
export function nameOr(name: string, neutral: string): string {
  return isNameable(name) ? name : neutral;
}
