import { RetCode } from '@retain/domain';
import { describe, expect, it } from 'vitest';
import { tokenizedTransaction, validTransaction } from '../test/transaction.fixture';
import { TRANSACTION_FIELDS, type FieldSpec } from './transaction-fields.table';
import {
  validateSubmission,
  type AcceptedItem,
  type NormalizedTransaction,
  type RejectedItem,
  type ValidatedItem,
} from './submission.validator';

const BAD_BODY = { ok: false, error: { code: 'RET400', message: 'Invalid parameter: transactions' } };

function one(tx: unknown): ValidatedItem {
  const r = validateSubmission({ transactions: [tx] });
  if (!r.ok) throw new Error('body refused');
  return r.items[0]!;
}

function accepted(tx: unknown): NormalizedTransaction {
  const item = one(tx);
  if (!('value' in item)) throw new Error(`rejected: ${JSON.stringify(item.errors)}`);
  return item.value;
}

function errorsOf(tx: unknown): { code: string; message: string }[] {
  const item = one(tx);
  if (!('errors' in item)) throw new Error('accepted');
  return item.errors;
}

/** Sets a dotted path, creating parents; `undefined` deletes it. */
function set(tx: Record<string, any>, path: string, value: unknown): Record<string, any> {
  const segs = path.split('.');
  let cur = tx;
  for (const s of segs.slice(0, -1)) cur = cur[s] ??= {};
  if (value === undefined) delete cur[segs.at(-1)!];
  else cur[segs.at(-1)!] = value;
  return tx;
}

const withField = (path: string, value: unknown, base = validTransaction()) => set(base, path, value);
const schemaError = (message: string) => ({ code: RetCode.RET009, message: `Schema validation error: ${message}` });
const missingError = (path: string) => ({ code: RetCode.RET006, message: `Missing transaction element: ${path}` });

describe('validateSubmission: body shape', () => {
  it.each([
    ['null', null],
    ['a string', 'transactions'],
    ['a number', 42],
    ['an array', [validTransaction()]],
    ['no transactions', {}],
    ['transactions not an array', { transactions: { 0: validTransaction() } }],
    ['transactions null', { transactions: null }],
    ['an empty array', { transactions: [] }],
  ])('refuses %s with RET400', (_name, body) => {
    expect(validateSubmission(body)).toEqual(BAD_BODY);
  });

  it('refuses 1001 items and accepts 1000', () => {
    const items = (n: number) => Array.from({ length: n }, (_, i) => validTransaction(i));
    expect(validateSubmission({ transactions: items(1001) })).toEqual(BAD_BODY);
    const r = validateSubmission({ transactions: items(1000) });
    expect(r.ok && r.items.every((i) => 'value' in i)).toBe(true);
  });

  it('rejects an element that is not an object, keeping the others', () => {
    const r = validateSubmission({ transactions: [validTransaction(1), 'x', null, [1]] });
    if (!r.ok) throw new Error('body refused');
    expect(r.items.map((i) => i.index)).toEqual([0, 1, 2, 3]);
    expect('value' in r.items[0]!).toBe(true);
    for (const item of r.items.slice(1)) {
      expect(item).toEqual({ index: item.index, id: null, errors: [schemaError('transaction must be an object')] });
    }
  });
});

describe('validateSubmission: accepted transaction', () => {
  it('normalizes everything needed to store the row', () => {
    const v = accepted(validTransaction(7));
    expect(v).toMatchObject({
      id: 'txn_7',
      amountMinor: 1999n,
      currency: 'USD',
      failedAt: new Date('2026-11-20T10:15:30.123Z'),
      auth_code: '51',
      avs_code: 'Y',
      cvn_code: 'M',
      division_number: 'div-1',
      previous_billing_count: 3,
      is_network_token: null,
      cryptogram: null,
      account: { id: 'acct_7', external_id: 'ext_7', email: 'customer7@example.com' },
      subscription: { id: 'sub_7', starts: '2025-01-01T00:00:00', affiliate: 'aff', sub_affiliate: 'sub-aff' },
      payment_method: {
        id: 'pm_7',
        account_holder: 'Jane Doe',
        is_tokenized: false,
        primary: 1,
        billing_address: {
          line1: '1 Main Street',
          city: 'Springfield',
          district: 'IL',
          postal_code: '62701',
          country: 'US',
        },
      },
      card: { kind: 'clear', pan: '4111111111111111' },
      expiration_date: '202812',
      account_hash: null,
      metadata: { plan: 'gold', source: 'billing-run-42' },
    });
  });

  it('gives the item id for accepted and rejected items', () => {
    const r = validateSubmission({ transactions: [validTransaction(1), withField('amount', 0, validTransaction(2))] });
    if (!r.ok) throw new Error('body refused');
    expect(r.items.map((i) => i.id)).toEqual(['txn_1', 'txn_2']);
  });

  it('reads a zone offset into UTC', () => {
    expect(accepted(withField('timestamp', '2026-11-20T12:00:00+02:00')).failedAt.toISOString()).toBe(
      '2026-11-20T10:00:00.000Z',
    );
  });

  it('treats null optional fields as absent and defaults primary to 1', () => {
    const tx = validTransaction();
    tx['avs_code'] = null;
    tx['metadata'] = null;
    tx['payment_method'].primary = null;
    tx['payment_method'].billing_address = null;
    const v = accepted(tx);
    expect(v.avs_code).toBeNull();
    expect(v.metadata).toEqual({});
    expect(v.payment_method.primary).toBe(1);
    expect(v.payment_method.billing_address).toBeNull();
  });

  it('ignores read-only fields sent by the merchant, whatever their value', () => {
    const tx = validTransaction();
    Object.assign(tx, {
      vid: 12,
      submitted_ts: 'yesterday',
      partial_amount: -3,
      retain_transaction_id: {},
      refunds: 'none',
      next_activity: 5,
      auth_code_description: 'Soft',
      retry_number: 'x',
      forced_deposit: 'no',
    });
    tx['payment_method'].type = 'Check';
    tx['payment_method'].vid = 1;
    tx['payment_method'].credit_card.account_updated = 'maybe';
    tx['account'].vid = [];
    expect(one(tx)).toHaveProperty('value');
  });

  it('keeps only known address fields', () => {
    const v = accepted(withField('payment_method.billing_address.planet', 'Mars'));
    expect(v.payment_method.billing_address).not.toHaveProperty('planet');
  });
});

describe('validateSubmission: required elements (RET006)', () => {
  const required = [
    'id',
    'amount',
    'currency',
    'timestamp',
    'auth_code',
    'division_number',
    'subscription.id',
    'account.id',
    'payment_method.id',
    'payment_method.is_tokenized',
    'payment_method.credit_card',
    'payment_method.credit_card.account',
    'payment_method.credit_card.expiration_date',
  ];

  it.each(required)('reports a missing %s with its path', (path) => {
    expect(errorsOf(withField(path, undefined))).toEqual([missingError(path)]);
  });

  it.each(required)('reports a null %s as missing', (path) => {
    expect(errorsOf(withField(path, null))).toEqual([missingError(path)]);
  });

  it('reports the required children of an absent parent, once each', () => {
    expect(errorsOf(withField('payment_method', undefined))).toEqual([
      missingError('payment_method.id'),
      missingError('payment_method.is_tokenized'),
      missingError('payment_method.credit_card'),
    ]);
    expect(errorsOf(withField('subscription', undefined))).toEqual([missingError('subscription.id')]);
    expect(errorsOf(withField('account', undefined))).toEqual([missingError('account.id')]);
  });

  it('does not require the card account and expiration when tokenized', () => {
    const tx = tokenizedTransaction();
    tx['payment_method'].credit_card = {};
    expect(accepted(tx).card).toEqual({ kind: 'token' });
  });

  it('does not require credit_card when tokenized (spec: only when is_tokenized is false)', () => {
    for (const absent of [undefined, null]) {
      const v = accepted(withField('payment_method.credit_card', absent, tokenizedTransaction()));
      expect(v.card).toEqual({ kind: 'token' });
      expect(v.expiration_date).toBeNull();
      expect(v.account_hash).toBeNull();
    }
  });

  it('lists every failure of one transaction, in table order', () => {
    const tx = {
      id: 'bad_1',
      amount: 10.001,
      currency: 'USD',
      timestamp: '2026-11-20 10:00',
      status: 'Captured',
      auth_code: '05',
      avs_code: 'TOO-LONG-AVS',
      is_network_token: 2,
      account: { id: 'a', email: 'not-an-email' },
      subscription: {},
      payment_method: {
        id: 'pm',
        is_tokenized: false,
        billing_address: { country: 'XX' },
        credit_card: { account: '4111111111111112', expiration_date: '202813' },
      },
      metadata: { 'retain:internal': 'x' },
    };
    expect(errorsOf(tx)).toEqual([
      schemaError('timestamp must be an ISO 8601 date-time with time zone (YYYY-MM-DDThh:mm:ssZ)'),
      schemaError('status must be Failed'),
      missingError('division_number'),
      schemaError('avs_code must be at most 8 characters'),
      schemaError('is_network_token must be 0 or 1'),
      schemaError('account.email must be an email address'),
      missingError('subscription.id'),
      schemaError('payment_method.billing_address.country must be an ISO 3166-1 alpha-2 country code'),
      schemaError('payment_method.credit_card.expiration_date must be in the format YYYYMM'),
      schemaError('amount must have at most 2 decimal places for USD'),
      { code: RetCode.RET010, message: 'Credit card number is not valid or incorrectly encrypted' },
      schemaError('metadata.retain:internal uses the reserved prefix retain:'),
    ]);
  });
});

describe('validateSubmission: types, lengths and formats (RET009)', () => {
  const limited = Object.entries(TRANSACTION_FIELDS as Record<string, FieldSpec>).filter(
    ([path, spec]) => spec.maxLength !== undefined && path !== 'payment_method.credit_card.account',
  );

  it.each(limited)('limits %s to its max length', (path, spec) => {
    const errors = errorsOf(withField(path, 'x'.repeat(spec.maxLength! + 1)));
    expect(errors).toEqual([schemaError(`${path} must be at most ${spec.maxLength} characters`)]);
  });

  it('accepts strings of exactly the max length', () => {
    const tx = validTransaction();
    set(tx, 'id', 'i'.repeat(128));
    set(tx, 'account.external_id', 'e'.repeat(128));
    set(tx, 'payment_method.account_holder', 'h'.repeat(255));
    set(tx, 'payment_method.billing_address.city', 'c'.repeat(64));
    set(tx, 'subscription.sub_affiliate', 's'.repeat(128));
    set(tx, 'avs_code', 'Y:detail');
    expect(one(tx)).toHaveProperty('value');
  });

  it('counts characters, not UTF-16 code units: 128 emoji are 128 characters, 129 are too many', () => {
    const tx = validTransaction();
    set(tx, 'id', '\u{1F600}'.repeat(128));
    set(tx, 'account.external_id', '\u{1F600}'.repeat(128));
    expect(one(tx)).toHaveProperty('value');
    expect(errorsOf(withField('account.external_id', '\u{1F600}'.repeat(129)))).toEqual([
      schemaError('account.external_id must be at most 128 characters'),
    ]);
  });

  it('limits the card account length too', () => {
    expect(errorsOf(withField('payment_method.credit_card.account', 'x'.repeat(4097)))).toEqual([
      schemaError('payment_method.credit_card.account must be at most 4096 characters'),
    ]);
  });

  it.each([
    ['id', 42, 'id must be a string'],
    ['id', '', 'id must not be empty'],
    ['amount', '19.99', 'amount must be a number'],
    ['amount', 0, 'amount must be greater than 0'],
    ['amount', -5, 'amount must be greater than 0'],
    ['currency', 'usd', 'currency must be an ISO 4217 currency code'],
    ['currency', 'XYZ', 'currency must be an ISO 4217 currency code'],
    ['currency', 840, 'currency must be a string'],
    [
      'timestamp',
      '2026-11-20T10:15:30',
      'timestamp must be an ISO 8601 date-time with time zone (YYYY-MM-DDThh:mm:ssZ)',
    ],
    [
      'timestamp',
      '2026-02-30T10:15:30Z',
      'timestamp must be an ISO 8601 date-time with time zone (YYYY-MM-DDThh:mm:ssZ)',
    ],
    [
      'timestamp',
      '2026-11-20T24:00:00Z',
      'timestamp must be an ISO 8601 date-time with time zone (YYYY-MM-DDThh:mm:ssZ)',
    ],
    ['timestamp', 1732280000, 'timestamp must be a string'],
    ['status', 'Captured', 'status must be Failed'],
    ['previous_billing_count', -2, 'previous_billing_count must be between -1 and 2147483647'],
    ['previous_billing_count', 1.5, 'previous_billing_count must be an integer'],
    ['previous_billing_count', '3', 'previous_billing_count must be an integer'],
    ['is_network_token', true, 'is_network_token must be an integer'],
    ['is_network_token', 2, 'is_network_token must be 0 or 1'],
    ['account', 'acct_1', 'account must be an object'],
    ['account.email', 'jane@', 'account.email must be an email address'],
    ['subscription', [], 'subscription must be an object'],
    ['subscription.starts', '2025-01-01', 'subscription.starts must be an ISO 8601 date-time (YYYY-MM-DDThh:mm:ss)'],
    ['subscription.starts', 'soon', 'subscription.starts must be an ISO 8601 date-time (YYYY-MM-DDThh:mm:ss)'],
    ['payment_method.is_tokenized', 'false', 'payment_method.is_tokenized must be a boolean'],
    ['payment_method.is_tokenized', 0, 'payment_method.is_tokenized must be a boolean'],
    ['payment_method.primary', 'yes', 'payment_method.primary must be an integer'],
    ['payment_method.billing_address', 'Main St', 'payment_method.billing_address must be an object'],
    [
      'payment_method.billing_address.country',
      'us',
      'payment_method.billing_address.country must be an ISO 3166-1 alpha-2 country code',
    ],
    [
      'payment_method.billing_address.country',
      'XX',
      'payment_method.billing_address.country must be an ISO 3166-1 alpha-2 country code',
    ],
    [
      'payment_method.billing_address.country',
      'USA',
      'payment_method.billing_address.country must be at most 2 characters',
    ],
    ['payment_method.credit_card', '4111111111111111', 'payment_method.credit_card must be an object'],
    [
      'payment_method.credit_card.expiration_date',
      '202813',
      'payment_method.credit_card.expiration_date must be in the format YYYYMM',
    ],
    [
      'payment_method.credit_card.expiration_date',
      '202800',
      'payment_method.credit_card.expiration_date must be in the format YYYYMM',
    ],
    [
      'payment_method.credit_card.expiration_date',
      '2028-1',
      'payment_method.credit_card.expiration_date must be in the format YYYYMM',
    ],
    [
      'payment_method.credit_card.expiration_date',
      202812,
      'payment_method.credit_card.expiration_date must be a string',
    ],
    [
      'payment_method.credit_card.account_hash',
      'abc',
      'payment_method.credit_card.account_hash must be 40 hexadecimal characters',
    ],
    [
      'payment_method.credit_card.account_hash',
      'g'.repeat(40),
      'payment_method.credit_card.account_hash must be 40 hexadecimal characters',
    ],
    ['metadata', ['a'], 'metadata must be an object'],
  ])('%s = %j -> RET009', (path, value, message) => {
    expect(errorsOf(withField(path, value))).toEqual([schemaError(message)]);
  });

  it.each([
    ['timestamp', '2026-11-20T10:15:30Z'],
    ['timestamp', '2026-11-20T10:15:30.123456-05:00'],
    ['timestamp', '2024-02-29T00:00:00+0530'],
    ['subscription.starts', '2025-01-01T00:00:00'],
    ['subscription.starts', '2025-01-01T00:00:00.5'],
    ['subscription.starts', '2025-01-01T00:00:00+01:00'],
    ['previous_billing_count', -1],
    ['is_network_token', 0],
    ['payment_method.billing_address.country', 'GB'],
    ['status', 'Failed'],
    ['status', undefined],
    ['currency', 'EUR'],
  ])('%s = %j is accepted', (path, value) => {
    expect(one(withField(path, value))).toHaveProperty('value');
  });
});

describe('validateSubmission: amount decimals per currency', () => {
  const amountOf = (amount: number, currency: string) => one(Object.assign(validTransaction(), { amount, currency }));

  it.each([
    [100, 'JPY', 100n],
    [19.99, 'USD', 1999n],
    [20, 'USD', 2000n],
    [0.01, 'USD', 1n],
    [1.234, 'KWD', 1234n],
    [1.2, 'KWD', 1200n],
  ])('%d %s -> %d minor units', (amount, currency, minor) => {
    expect((amountOf(amount, currency) as AcceptedItem).value.amountMinor).toBe(minor);
  });

  it.each([
    [100.5, 'JPY', 0],
    [19.999, 'USD', 2],
    [1.2345, 'KWD', 3],
  ])('%d %s has too many decimals', (amount, currency, exp) => {
    expect((amountOf(amount, currency) as RejectedItem).errors).toEqual([
      schemaError(`amount must have at most ${exp} decimal places for ${currency}`),
    ]);
  });

  it('does not check decimals against an invalid currency (one error only)', () => {
    expect((amountOf(1.2345, 'ABC') as RejectedItem).errors).toEqual([
      schemaError('currency must be an ISO 4217 currency code'),
    ]);
  });

  it('refuses amounts too large to keep exact', () => {
    expect((amountOf(1e300, 'USD') as RejectedItem).errors).toEqual([schemaError('amount is too large')]);
    // 16 significant digits: the JSON number 90000000000000.01 is the double 90000000000000.02 (refused,
    // never stored changed); 15 always read back as sent.
    expect((amountOf(90000000000000.01, 'USD') as RejectedItem).errors).toEqual([schemaError('amount is too large')]);
    expect(amountOf(9999999999999.99, 'USD')).not.toHaveProperty('errors');
  });
});

describe('validateSubmission: card account', () => {
  const card = (cc: Record<string, unknown>, pm: Record<string, unknown> = {}) => {
    const tx = validTransaction();
    tx['payment_method'] = { id: 'pm', is_tokenized: false, ...pm, credit_card: { expiration_date: '202812', ...cc } };
    return tx;
  };

  it('accepts a clear number with spaces or dashes, keeping digits only', () => {
    expect(accepted(card({ account: '5555-5555-5555-4444' })).card).toEqual({ kind: 'clear', pan: '5555555555554444' });
  });

  it('rejects a clear number failing Luhn with RET010', () => {
    expect(errorsOf(card({ account: '4111111111111112' }))).toEqual([
      { code: 'RET010', message: 'Credit card number is not valid or incorrectly encrypted' },
    ]);
  });

  it('rejects digits of an impossible length with RET010', () => {
    expect(errorsOf(card({ account: '41111111111' }))[0]!.code).toBe('RET010');
    expect(errorsOf(card({ account: '41111111111111111111' }))[0]!.code).toBe('RET010');
  });

  it('accepts a compact JWE as is', () => {
    const jwe = 'eyJhbGciOiJSU0EtT0FFUC0yNTYiLCJlbmMiOiJBMjU2R0NNIn0.a2V5.aXY.Y2lwaGVy.dGFn';
    expect(accepted(card({ account: jwe })).card).toEqual({ kind: 'jwe', jwe });
  });

  // decisions §4: only a clear number is answered synchronously; anything else is taken as
  // encrypted and the post-submission review answers RET010 in the `validation failed` push.
  it.each(['eyJhbGciOi.abc', 'x.y', 'garbage', 'visa ending 1111', 'a.b.c', 'eyJ.a.b.c.d.e.f', '****'])(
    'takes %j as encrypted, left to the post-submission review',
    (account) => {
      expect(accepted(card({ account })).card).toEqual({ kind: 'jwe', jwe: account });
    },
  );

  it('answers a clear number with other separators RET010 at once, never storing it as encrypted', () => {
    expect(errorsOf(card({ account: '4111.1111.1111.1111' }))[0]!.code).toBe('RET010');
    expect(errorsOf(card({ account: '4111/1111/1111/1111' }))[0]!.code).toBe('RET010');
  });

  // A card number inside text is not encrypted either: stored as a JWE, it would sit in clear until
  // the review rejects it.
  it.each(['VISA 4111111111111111', '4111111111111111 exp 12/29', 'card: 4111-1111-1111-1111', 'pan=411111111111'])(
    'answers %j (a card number among letters) RET010 at once, never storing it as encrypted',
    (account) => {
      expect(errorsOf(card({ account }))[0]!.code).toBe('RET010');
    },
  );

  it('rejects an empty account and one over 4096 characters with RET009', () => {
    expect(errorsOf(card({ account: '  ' }))).toEqual([
      schemaError('payment_method.credit_card.account must not be empty'),
    ]);
    expect(errorsOf(card({ account: 'e'.repeat(4097) }))).toEqual([
      schemaError('payment_method.credit_card.account must be at most 4096 characters'),
    ]);
  });

  it('accepts a masked number only with account_hash', () => {
    const hash = 'A'.repeat(40);
    expect(accepted(card({ account: '411111******1111', account_hash: hash })).card).toEqual({
      kind: 'masked',
      masked: '411111******1111',
      accountHash: 'a'.repeat(40),
    });
    expect(accepted(card({ account: '41111111XXXX1111', account_hash: hash })).card.kind).toBe('masked');
    // service-spec CreditCard.account: with a masked account "then supply account_hash"; a required
    // element missing is RET006 naming its path (decisions §4).
    expect(errorsOf(card({ account: '411111******1111' }))).toEqual([
      missingError('payment_method.credit_card.account_hash'),
    ]);
    expect(errorsOf(card({ account: '411111******1111', account_hash: null }))).toEqual([
      missingError('payment_method.credit_card.account_hash'),
    ]);
    // Left blank it is missing too (the spec lets it be blank only beside a full number or a token).
    for (const blank of ['', '   ']) {
      expect(errorsOf(card({ account: '411111******1111', account_hash: blank }))).toEqual([
        missingError('payment_method.credit_card.account_hash'),
      ]);
    }
  });

  // service-spec CreditCard.account_hash: "May be left blank when the full number is sent".
  it.each(['', ' '])('takes an account_hash left blank (%j) beside a full number as absent', (blank) => {
    const v = accepted(card({ account: '4111111111111111', account_hash: blank }));
    expect(v.card).toEqual({ kind: 'clear', pan: '4111111111111111' });
    expect(v.account_hash).toBeNull();
    expect(accepted(card({ account: 'aaa.bbb.ccc.ddd.eee', account_hash: blank })).card.kind).toBe('jwe');
  });

  it('rejects a number that is not a string with RET009', () => {
    expect(errorsOf(card({ account: 4111111111111111 }))).toEqual([
      schemaError('payment_method.credit_card.account must be a string'),
    ]);
  });

  describe('tokenized', () => {
    const tokenized = (cc: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
      Object.assign(card(cc, { id: 'tok_sandbox_1111', is_tokenized: true }), extra);

    it.each(['411111', '4111111', '41111111'])('accepts the BIN %s', (bin) => {
      expect(accepted(tokenized({ account: bin })).card).toEqual({ kind: 'token', bin });
    });

    it.each(['41111', '411111111', '4111111111111111', '4111-11'])('rejects %s as BIN', (account) => {
      expect(errorsOf(tokenized({ account }))).toEqual([
        schemaError(
          'payment_method.credit_card.account must be the 6-8 digit BIN when payment_method.is_tokenized is true',
        ),
      ]);
    });

    it('keeps the account_hash of a tokenized card', () => {
      expect(accepted(tokenized({ account: '411111', account_hash: 'B'.repeat(40) })).account_hash).toBe(
        'b'.repeat(40),
      );
    });

    it('takes an account_hash left blank as absent ("optional with tokenization")', () => {
      expect(accepted(tokenized({ account: '411111', account_hash: '' })).account_hash).toBeNull();
      expect(accepted(tokenized({ account_hash: '' })).card).toEqual({ kind: 'token' });
    });

    it('accepts a network token with its BIN, no expiration, and a cryptogram', () => {
      const v = accepted(
        tokenized(
          { account: '411111', expiration_date: undefined },
          { is_network_token: 1, cryptogram: 'AgAAAAAABk4DWZ4C28yUQAAAAAA=', eci_indicator: '05' },
        ),
      );
      expect(v).toMatchObject({ is_network_token: 1, cryptogram: 'AgAAAAAABk4DWZ4C28yUQAAAAAA=', eci_indicator: '05' });
      expect(v.card).toEqual({ kind: 'token', bin: '411111' });
    });

    it('refuses a network token with a full number', () => {
      expect(errorsOf(tokenized({ account: '4111111111111111' }, { is_network_token: 1 }))).toHaveLength(1);
    });
  });

  it('refuses a network token that is not tokenized', () => {
    const tx = Object.assign(card({ account: '4111111111111111' }), { is_network_token: 1 });
    expect(errorsOf(tx)).toEqual([schemaError('payment_method.is_tokenized must be true when is_network_token is 1')]);
  });
});

describe('validateSubmission: metadata', () => {
  const meta = (metadata: Record<string, unknown>) => withField('metadata', metadata);

  it('accepts keys of 256 and values of 1024 characters', () => {
    expect(accepted(meta({ ['k'.repeat(256)]: 'v'.repeat(1024) })).metadata).toEqual({
      ['k'.repeat(256)]: 'v'.repeat(1024),
    });
  });

  it('rejects longer keys and values, non-string values and the reserved prefix, one error each', () => {
    expect(
      errorsOf(meta({ ['k'.repeat(257)]: 'v', long: 'v'.repeat(1025), n: 1, flag: true, 'retain:x': 'v', ok: 'fine' })),
    ).toEqual([
      schemaError('metadata key must be at most 256 characters'),
      schemaError('metadata.long must be at most 1024 characters'),
      schemaError('metadata.n must be a string'),
      schemaError('metadata.flag must be a string'),
      schemaError('metadata.retain:x uses the reserved prefix retain:'),
    ]);
  });

  it('caps the metadata of one transaction at 65,536 characters in all (keys and values): it is copied into every push', () => {
    const entries = (n: number) =>
      Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`.padEnd(256, 'k'), 'v'.repeat(1024)]));
    // 51 entries of 1,280 characters: 65,280, accepted; one more: 66,560, refused as a whole.
    expect(accepted(meta(entries(51))).metadata).toEqual(entries(51));
    expect(errorsOf(meta(entries(52)))).toEqual([schemaError('metadata must be at most 65536 characters in all')]);
  });

  it('accepts keys that only contain the prefix later on', () => {
    expect(one(meta({ 'x-retain:': 'v', Retain: 'v' }))).toHaveProperty('value');
  });
});

describe('validateSubmission: card numbers never appear in error messages', () => {
  const PANS = ['4111111111111111', '4111111111111112', '5555555555554444', '4000000000000002'];

  it('for every kind of failure around card data', () => {
    const cases: Record<string, any>[] = [];
    for (const pan of PANS) {
      const spaced = pan.replace(/(\d{4})(?=\d)/g, '$1 ');
      cases.push(withField('payment_method.credit_card.account', pan.slice(0, -1) + ((Number(pan.at(-1)) + 1) % 10)));
      cases.push(withField('payment_method.credit_card.account', spaced + 'x'));
      cases.push(withField('payment_method.credit_card.account', pan + '.'));
      cases.push(withField('payment_method.credit_card.account', pan + '0000'));
      cases.push(withField('payment_method.credit_card.account', pan, tokenizedTransaction()));
      cases.push(
        Object.assign(validTransaction(), {
          is_network_token: 1,
          payment_method: { id: pan, is_tokenized: false, credit_card: { account: pan, expiration_date: pan } },
        }),
      );
      cases.push(withField('payment_method.credit_card.account_hash', pan));
      cases.push(withField('payment_method.credit_card.expiration_date', pan));
      cases.push(
        withField('metadata', {
          [`retain:${pan}`]: pan,
          [pan]: 'v'.repeat(1025),
          card: pan.repeat(70),
          [`${pan}${'k'.repeat(300)}`]: 'v',
        }),
      );
      cases.push(withField('account.email', pan));
      cases.push(withField('payment_method.billing_address.country', pan));
      cases.push(withField('currency', pan));
      cases.push(withField('timestamp', pan));
      cases.push(withField('amount', Number(pan) + 0.001));
    }
    const r = validateSubmission({ transactions: cases });
    if (!r.ok) throw new Error('body refused');
    const messages = r.items.flatMap((i) => ('errors' in i ? i.errors.map((e) => e.message) : []));
    expect(messages.length).toBeGreaterThanOrEqual(cases.length);
    for (const m of messages) {
      expect(m.replace(/[\s-]/g, '')).not.toMatch(/\d{12,}/);
    }
  });
});
