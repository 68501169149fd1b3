import { parseJsonStrictly, scanJsonKeys } from '@retain/domain';

/**
 * A JSON request body read exactly (`parsed` is JSON.parse(text)'s value, already checked for
 * `__proto__`), or null when some object of it has the same key twice, compared decoded
 * (`"plan"` and `"\u0070lan"` are one key): which value was meant is ambiguous.
 *
 * A body with no backslash has no escape, so JSON.parse read it exactly (see parseJson in
 * libs/domain) and duplicates are counted, not scanned: a 1000-item body has ~30,000 keys. Every
 * colon of JSON text outside a string ends a key, and JSON.parse keeps one of each duplicated key,
 * dropping the others with their values; so with no duplicate the text's colons equal the parsed
 * keys plus the colons inside parsed strings, and with one the text has more. A body with a
 * backslash is scanned key by key (scanJsonKeys), and read again by lossless-json when a key is
 * escaped.
 */
export function exactJsonBody(text: string, parsed: unknown): { value: unknown } | null {
  if (!text.includes('\\')) return colonsIn(text) === keysAndStringColons(parsed) ? { value: parsed } : null;
  const keys = scanJsonKeys(text);
  if (keys.duplicateKey) return null;
  return { value: keys.escapedKey ? parseJsonStrictly(text) : parsed };
}

/** The keys of every object in `value`, plus the colons in every key and string (no recursion: any depth). */
function keysAndStringColons(value: unknown): number {
  let n = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') {
      n += colonsIn(v);
    } else if (Array.isArray(v)) {
      for (const e of v) if (typeof e === 'object' || typeof e === 'string') stack.push(e);
    } else if (typeof v === 'object' && v !== null) {
      for (const key of Object.keys(v)) {
        n += 1 + colonsIn(key);
        const e = (v as Record<string, unknown>)[key];
        if (typeof e === 'object' || typeof e === 'string') stack.push(e);
      }
    }
  }
  return n;
}

function colonsIn(s: string): number {
  let n = 0;
  for (let i = s.indexOf(':'); i >= 0; i = s.indexOf(':', i + 1)) n++;
  return n;
}
