import { describe, expect, it } from 'vitest';
import { validTransaction } from '../test/transaction.fixture';
import { amountToMinor } from './amount.validator';
import { parseDateTime } from './date-time.parser';
import { validateRefunds } from './refunds.validator';
import { validateSubmission, type ValidatedItem } from './submission.validator';

// Issue 9, "bad input never costs a batch": text Postgres cannot store (NUL, unpaired surrogates),
// amounts below one minor unit and dates outside 0001-9999 are refused per item (RET009).

function validate(txs: unknown[]): ValidatedItem[] {
  const r = validateSubmission({ transactions: txs });
  if (!r.ok) throw new Error('body refused');
  return r.items;
}

const codes = (item: ValidatedItem): string[] => ('errors' in item ? item.errors.map((e) => e.code) : []);
const messages = (item: ValidatedItem): string =>
  'errors' in item ? item.errors.map((e) => e.message).join(' | ') : '';

function put(tx: Record<string, any>, path: string, value: unknown): Record<string, any> {
  const segs = path.split('.');
  let cur = tx;
  for (const s of segs.slice(0, -1)) cur = cur[s] ??= {};
  cur[segs.at(-1)!] = value;
  return tx;
}

const BAD_TEXT: [string, string][] = [
  ['a NUL', 'ab\u0000c'],
  ['an unpaired high surrogate', 'ab\ud800'],
  ['an unpaired low surrogate', '\udc00ab'],
  ['reversed surrogates', '\udc00\ud800'],
];

const PATHS = [
  'id',
  'auth_code',
  'division_number',
  'currency',
  'timestamp',
  'billing_descriptor',
  'account.id',
  'account.email',
  'subscription.id',
  'subscription.starts',
  'payment_method.id',
  'payment_method.account_holder',
  'payment_method.billing_address.line1',
  'payment_method.billing_address.country',
  'payment_method.credit_card.account',
  'payment_method.credit_card.expiration_date',
  'metadata.plan',
  'unknown_field',
  'account.unknown',
  'payment_method.credit_card.extra.deep',
  'extras.list',
];

describe('text that cannot be stored', () => {
  for (const [what, text] of BAD_TEXT) {
    it.each(PATHS)(`rejects ${what} in %s with RET009, keeping the other items`, (path) => {
      const value = path === 'extras.list' ? ['fine', text] : text;
      const items = validate([validTransaction(1), put(validTransaction(2), path, value), validTransaction(3)]);
      expect('value' in items[0]! && 'value' in items[2]!).toBe(true);
      expect(codes(items[1]!)).toContain('RET009');
      expect(messages(items[1]!)).toMatch(/must not contain NUL|unpaired surrogate/);
    });
  }

  it('rejects a bad metadata key without echoing it, and names the item by index when its id is bad', () => {
    const tx = validTransaction(2);
    tx['metadata'] = { ['4111111111111111\u0000']: 'x' };
    const items = validate([validTransaction(1), tx]);
    expect(codes(items[1]!)).toEqual(['RET009']);
    expect(messages(items[1]!)).not.toContain('4111111111111111');
    const badId = validate([{ ...validTransaction(3), id: 'a\ud800' }])[0]!;
    expect(badId.id).toBeNull();
  });

  it('accepts well-formed astral characters (a surrogate pair) and other unicode', () => {
    const tx = validTransaction(4);
    tx['payment_method'].account_holder = 'Zoë 😀 名前';
    tx['metadata'] = { 'ключ😀': 'значение 😀' };
    expect('value' in validate([tx])[0]!).toBe(true);
  });

  it('refuses nesting deeper than any field of the contract, per item', () => {
    let deep: unknown = 'x';
    for (let i = 0; i < 100_000; i++) deep = [deep];
    const items = validate([validTransaction(1), { ...validTransaction(2), extra: deep }]);
    expect('value' in items[0]!).toBe(true);
    expect(codes(items[1]!)).toEqual(['RET009']);
  });
});

describe('amounts below one minor unit', () => {
  it.each([1e-25, 1e-21, 5e-324, 0.001])('refuses %d USD with RET009 (today it rounds to 0)', (amount) => {
    const r = amountToMinor(amount, 'USD');
    expect(r.ok).toBe(false);
    const items = validate([validTransaction(1), { ...validTransaction(2), amount }]);
    expect('value' in items[0]!).toBe(true);
    expect(codes(items[1]!)).toEqual(['RET009']);
  });

  it('still accepts one minor unit', () => {
    expect(amountToMinor(0.01, 'USD')).toEqual({ ok: true, minor: 1n });
    expect(amountToMinor(1, 'JPY')).toEqual({ ok: true, minor: 1n });
  });
});

describe('dates outside years 0001-9999 after their offset', () => {
  it.each([
    '0000-06-01T00:00:00Z',
    '0001-01-01T00:30:00+01:00',
    '9999-12-31T23:30:00-01:00',
    '9999-12-31T23:59:59.999-00:01',
  ])('refuses %s', (timestamp) => {
    expect(parseDateTime(timestamp)).toBeNull();
    const items = validate([validTransaction(1), { ...validTransaction(2), timestamp }]);
    expect('value' in items[0]!).toBe(true);
    expect(codes(items[1]!)).toEqual(['RET009']);
  });

  it('refuses subscription.starts out of range too', () => {
    const tx = put(validTransaction(2), 'subscription.starts', '0000-01-01T00:00:00');
    expect(codes(validate([tx])[0]!)).toEqual(['RET009']);
  });

  it.each(['0001-01-01T00:00:00Z', '0001-01-01T00:30:00-01:00', '9999-12-31T23:59:59.999Z'])('accepts %s', (t) => {
    expect(parseDateTime(t)).not.toBeNull();
  });
});

describe('refund requests', () => {
  function refundItems(refunds: unknown[]) {
    const r = validateRefunds({ refunds });
    if (!r.ok) throw new Error('body refused');
    return r.items;
  }

  it.each(BAD_TEXT)('rejects %s in a refund id with RET009, keeping the others', (_what, text) => {
    const items = refundItems([{ id: 'a' }, { id: text }, { id: 'b' }]);
    expect('value' in items[0]! && 'value' in items[2]!).toBe(true);
    expect(items[1]).toMatchObject({ id: null, errors: [{ code: 'RET009' }] });
  });

  it('rejects bad text in another field of a refund item', () => {
    const items = refundItems([{ id: 'a', note: 'x\u0000' }]);
    expect(items[0]).toMatchObject({ errors: [{ code: 'RET009' }] });
  });
});
