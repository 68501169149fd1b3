/**
 * Text Postgres cannot store: `text` and `jsonb` refuse NUL (U+0000), and `jsonb` refuses an
 * unpaired UTF-16 surrogate (in `text` the driver writes it as U+FFFD, silently changing it).
 */

// One scan finds candidates; only strings with a NUL or a surrogate look further.
const SUSPECT_RE = /[\u0000\uD800-\uDFFF]/;
const LONE_SURROGATE_RE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Why `s` cannot be stored, or null. */
export function unsafeTextDetail(s: string): string | null {
  if (!SUSPECT_RE.test(s)) return null;
  if (s.includes('\u0000')) return 'must not contain NUL characters';
  return LONE_SURROGATE_RE.test(s) ? 'must be valid Unicode (unpaired surrogate)' : null;
}
