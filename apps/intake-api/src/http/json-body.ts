/**
 * True when some object of `text` (valid JSON, already parsed) has the same key twice, compared
 * after unescaping (`"plan"` and `"\u0070lan"` are the same key). One pass over the characters;
 * a key set per open object.
 */
export function hasDuplicateKey(text: string): boolean {
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
        const key = escaped ? (JSON.parse(text.slice(start, i + 1)) as string) : text.slice(start + 1, i);
        if (keys.has(key)) return true;
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
  return false;
}
