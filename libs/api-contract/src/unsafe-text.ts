/**
 * Text Postgres cannot store: `text` and `jsonb` refuse NUL (U+0000), and `jsonb` refuses an
 * unpaired UTF-16 surrogate. Such a value, anywhere in a submitted item (known field, unknown field,
 * object key, array element), rejects that item with RET009 instead of failing the whole INSERT.
 */

// One scan finds candidates; only strings with a NUL or a surrogate look further.
const SUSPECT_RE = /[\u0000\uD800-\uDFFF]/;
const LONE_SURROGATE_RE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Deeper than any field of the contract (metadata is 2 levels, the billing address 3). */
export const MAX_NESTING = 16;

/** Why `s` cannot be stored, or null. */
export function unsafeTextDetail(s: string): string | null {
  if (!SUSPECT_RE.test(s)) return null;
  if (s.includes('\u0000')) return 'must not contain NUL characters';
  return LONE_SURROGATE_RE.test(s) ? 'must be valid Unicode (unpaired surrogate)' : null;
}

// A key is named in a message only when it cannot be card data or unprintable text.
const SAFE_KEY_RE = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;
const child = (path: string, key: string): string => {
  if (!SAFE_KEY_RE.test(key)) return path === '' ? 'key' : `${path} key`;
  return path === '' ? key : `${path}.${key}`;
};

/**
 * Every `[path, detail]` of `value` whose text cannot be stored, walking objects and arrays
 * without recursion (so a deeply nested value cannot overflow the stack). Paths are dotted
 * (`payment_method.billing_address.line1`, `metadata.plan`, `extras[1]`), under `prefix`.
 */
export function unsafeTextProblems(value: unknown, prefix = ''): [string, string][] {
  const problems: [string, string][] = [];
  const stack: [unknown, string, number][] = [[value, prefix, 0]];
  while (stack.length > 0) {
    const [v, path, depth] = stack.pop()!;
    if (typeof v === 'string') {
      const detail = unsafeTextDetail(v);
      if (detail !== null) problems.push([path === '' ? 'value' : path, detail]);
      continue;
    }
    if (typeof v !== 'object' || v === null) continue;
    if (depth >= MAX_NESTING) {
      problems.push([path === '' ? 'value' : path, `must not be nested more than ${MAX_NESTING} levels`]);
      continue;
    }
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], `${path}[${i}]`, depth + 1]);
      continue;
    }
    const keys = Object.keys(v);
    // Pushed last to first, so problems come out in the order of the input.
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i]!;
      const keyDetail = unsafeTextDetail(key);
      if (keyDetail !== null) {
        problems.push([path === '' ? 'key' : `${path} key`, keyDetail]);
        continue;
      }
      stack.push([(v as Record<string, unknown>)[key], child(path, key), depth + 1]);
    }
  }
  return problems;
}
