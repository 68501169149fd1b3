import { parse as parseLosslessly } from 'lossless-json';

/**
 * JSON text read exactly, whatever the process read before.
 *
 * V8's JSON.parse (Node 24 and 26: nodejs/node#63785, crbug 521080746, open) can decode an object
 * key written with an escape as another key it met before at the same place of an object of the
 * same shape: after `{"h":1,"\\":2}` it reads `{"h":1,"\"":2}` and `{"h":1,"\u00e9":2}` with the
 * key `\`. Merchants' metadata keys are free text, so one merchant's body (or stored row) could
 * change the keys read from another's. JSON.parse is exact for a text with no escaped key (the
 * fast path for nearly every body and row); one with an escaped key is read by lossless-json, a
 * JSON parser in JavaScript, with JSON.parse's rules (plain numbers, the last of duplicate keys
 * wins, `__proto__` an own property).
 */
export function parseJson(text: string): unknown {
  const value: unknown = JSON.parse(text); // syntax errors exactly as JSON.parse reports them
  return text.includes('\\') && scanJsonKeys(text).escapedKey ? parseJsonStrictly(text) : value;
}

/** lossless-json with JSON.parse's results: numbers as numbers, the last duplicate key wins. */
export function parseJsonStrictly(text: string): unknown {
  return parseLosslessly(text, null, { parseNumber: Number, onDuplicateKey: ({ newValue }) => newValue });
}

export interface JsonKeys {
  /** Some object has the same key twice, compared decoded (`"plan"` and `"\u0070lan"` are one key). */
  duplicateKey: boolean;
  /** Some key is written with an escape (JSON.parse may misread it: parseJson). */
  escapedKey: boolean;
}

/**
 * The keys of valid JSON `text`, in one pass over its characters with a key set per open object.
 * It stops at the first duplicate (then escapedKey covers only the text before it).
 */
export function scanJsonKeys(text: string): JsonKeys {
  let escapedKey = false;
  // One entry per open container: the keys seen so far for an object, null for an array.
  const open: (Set<string> | null)[] = [];
  let expectKey = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      const start = i;
      let escaped = false;
      i++;
      for (;;) {
        const d = text.charCodeAt(i);
        if (d === 0x5c /* \ */) {
          escaped = true;
          i += 2;
        } else if (d === 0x22 || Number.isNaN(d)) {
          break;
        } else {
          i++;
        }
      }
      const keys = open[open.length - 1];
      if (expectKey && keys) {
        escapedKey ||= escaped;
        const key = escaped ? (parseJsonStrictly(text.slice(start, i + 1)) as string) : text.slice(start + 1, i);
        if (keys.has(key)) return { duplicateKey: true, escapedKey };
        keys.add(key);
        expectKey = false;
      }
    } else if (c === 0x7b /* { */) {
      open.push(new Set());
      expectKey = true;
    } else if (c === 0x5b /* [ */) {
      open.push(null);
      expectKey = false;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      open.pop();
      expectKey = false;
    } else if (c === 0x2c /* , */) {
      expectKey = open.length > 0 && open[open.length - 1] !== null;
    }
  }
  return { duplicateKey: false, escapedKey };
}
