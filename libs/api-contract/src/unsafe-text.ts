import { isNameable, unsafeTextDetail } from '@retain/domain';

/**
 * Text Postgres cannot store (NUL, an unpaired UTF-16 surrogate: unsafeTextDetail in libs/domain),
 * anywhere in a submitted item (known field, unknown field, object key, array element), rejects
 * that item with RET009 instead of failing the whole INSERT.
 */

export { unsafeTextDetail };

/** Deeper than any field of the contract (metadata is 2 levels, the billing address 3). */
export const MAX_NESTING = 16;

/** `account.id`, `extras[1]`, `metadata key` (a key that may not be shown), or `value` for the root. */
function pathOf(prefix: string, trail: (string | number)[]): string {
  let path = prefix;
  for (const seg of trail) {
    if (typeof seg === 'number') path += `[${seg}]`;
    // A key is named only when it cannot be card data or unprintable text (isNameable).
    else if (!isNameable(seg)) return path === '' ? 'key' : `${path} key`;
    else path = path === '' ? seg : `${path}.${seg}`;
  }
  return path === '' ? 'value' : path;
}

/**
 * Every `[path, detail]` of `value` whose text cannot be stored: strings, object keys and array
 * elements at any depth, in input order. Paths are dotted (`payment_method.billing_address.line1`,
 * `metadata.plan`, `extras[1]`) under `prefix`. The walk stops at MAX_NESTING levels (reported), so
 * recursion stays shallow whatever the input; paths are only built for problems found.
 */
export function unsafeTextProblems(value: unknown, prefix = ''): [string, string][] {
  const problems: [string, string][] = [];
  const trail: (string | number)[] = [];
  const visit = (v: unknown, depth: number): void => {
    if (typeof v === 'string') {
      const detail = unsafeTextDetail(v);
      if (detail !== null) problems.push([pathOf(prefix, trail), detail]);
      return;
    }
    if (typeof v !== 'object' || v === null) return;
    if (depth >= MAX_NESTING) {
      problems.push([pathOf(prefix, trail), `must not be nested more than ${MAX_NESTING} levels`]);
      return;
    }
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        trail.push(i);
        visit(v[i], depth + 1);
        trail.pop();
      }
      return;
    }
    const obj = v as Record<string, unknown>;
    for (const key in obj) {
      if (!Object.hasOwn(obj, key)) continue;
      const keyDetail = unsafeTextDetail(key);
      if (keyDetail !== null) {
        const parent = pathOf(prefix, trail);
        problems.push([parent === 'value' ? 'key' : `${parent} key`, keyDetail]);
        continue;
      }
      trail.push(key);
      visit(obj[key], depth + 1);
      trail.pop();
    }
  };
  visit(value, 0);
  return problems;
}
