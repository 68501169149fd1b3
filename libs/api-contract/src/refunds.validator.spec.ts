import { describe, expect, it } from 'vitest';
import { amountToMinor } from './amount.validator';
import { validateRefunds } from './refunds.validator';

const BAD_BODY = { ok: false, error: { code: 'RET400', message: 'Invalid parameter: refunds' } };
const schemaError = (message: string) => ({ code: 'RET009', message: `Schema validation error: ${message}` });

function items(refunds: unknown[]) {
  const r = validateRefunds({ refunds });
  if (!r.ok) throw new Error('body refused');
  return r.items;
}

describe('validateRefunds: body shape', () => {
  it.each([
    ['null', null],
    ['a string', 'refunds'],
    ['an array', [{ id: 'a' }]],
    ['no refunds', {}],
    ['refunds not an array', { refunds: { id: 'a' } }],
    ['an empty array', { refunds: [] }],
    ['1001 items', { refunds: Array.from({ length: 1001 }, (_, i) => ({ id: `t${i}` })) }],
  ])('refuses %s with RET400', (_name, body) => {
    expect(validateRefunds(body)).toEqual(BAD_BODY);
  });

  it('accepts 1000 items', () => {
    const r = validateRefunds({ refunds: Array.from({ length: 1000 }, (_, i) => ({ id: `t${i}` })) });
    expect(r.ok && r.items.every((i) => 'value' in i)).toBe(true);
  });
});

describe('validateRefunds: items', () => {
  it('accepts an id with or without amount', () => {
    expect(items([{ id: 'a' }, { id: 'b', amount: 5.5 }])).toEqual([
      { index: 0, id: 'a', value: { id: 'a', amount: null } },
      { index: 1, id: 'b', value: { id: 'b', amount: 5.5 } },
    ]);
  });

  it('counts an id in characters: 128 emoji (256 UTF-16 code units) are 128 characters', () => {
    expect(items([{ id: '\u{1F600}'.repeat(128) }])[0]).toHaveProperty('value');
  });

  it.each([
    [{}, { code: 'RET006', message: 'Missing transaction element: id' }],
    [{ id: null }, { code: 'RET006', message: 'Missing transaction element: id' }],
    [{ id: 12 }, schemaError('id must be a string')],
    [{ id: '' }, schemaError('id must not be empty')],
    [{ id: 'x'.repeat(129) }, schemaError('id must be at most 128 characters')],
    [{ id: '\u{1F600}'.repeat(129) }, schemaError('id must be at most 128 characters')],
  ])('rejects %j', (item, error) => {
    expect(items([item])).toEqual([{ index: 0, id: null, errors: [error] }]);
  });

  it.each([
    [0, 'amount must be greater than 0'],
    [-1, 'amount must be greater than 0'],
    ['5', 'amount must be a number'],
    [Infinity, 'amount must be a number'],
    [Number.NaN, 'amount must be a number'],
    // Explicit null is no number (a client's NaN in JSON): never "everything refundable".
    [null, 'amount must be a number'],
  ])('rejects amount %j', (amount, message) => {
    expect(items([{ id: 'a', amount }])).toEqual([{ index: 0, id: 'a', errors: [schemaError(message)] }]);
  });

  it('rejects a non-object item', () => {
    expect(items(['a'])).toEqual([{ index: 0, id: null, errors: [schemaError('refund must be an object')] }]);
  });

  it('lists every failure of an item', () => {
    expect(items([{ amount: -1 }])[0]).toEqual({
      index: 0,
      id: null,
      errors: [
        { code: 'RET006', message: 'Missing transaction element: id' },
        schemaError('amount must be greater than 0'),
      ],
    });
  });

  it('rejects later occurrences of an id with RETDUP, the first proceeds', () => {
    const r = items([{ id: 'a' }, { id: 'b' }, { id: 'a', amount: 1 }, { id: 'a', amount: -1 }]);
    expect(r[0]).toHaveProperty('value');
    expect(r[1]).toHaveProperty('value');
    expect(r[2]).toEqual({
      index: 2,
      id: 'a',
      errors: [{ code: 'RETDUP', message: 'Duplicate transaction within submission' }],
    });
    expect(r[3]).toEqual({
      index: 3,
      id: 'a',
      errors: [
        schemaError('amount must be greater than 0'),
        { code: 'RETDUP', message: 'Duplicate transaction within submission' },
      ],
    });
  });
});

describe('amountToMinor (refund decimals against the transaction currency)', () => {
  it.each([
    [500, 'JPY', 500n],
    [5.5, 'USD', 550n],
    [0.01, 'USD', 1n],
    [1.005, 'KWD', 1005n],
  ])('%d %s -> %d', (amount, currency, minor) => {
    expect(amountToMinor(amount, currency)).toEqual({ ok: true, minor });
  });

  it.each([
    [500.5, 'JPY', 0],
    [5.555, 'USD', 2],
    [1.0005, 'KWD', 3],
  ])('%d %s has too many decimals', (amount, currency, exp) => {
    expect(amountToMinor(amount, currency)).toEqual({
      ok: false,
      error: schemaError(`amount must have at most ${exp} decimal places for ${currency}`),
    });
  });

  it('refuses non-positive and non-numeric amounts and names the given path', () => {
    expect(amountToMinor(0, 'USD')).toEqual({ ok: false, error: schemaError('amount must be greater than 0') });
    expect(amountToMinor('1', 'USD', 'refunds[0].amount')).toEqual({
      ok: false,
      error: schemaError('refunds[0].amount must be a number'),
    });
  });
});
