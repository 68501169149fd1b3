import { describe, expect, it } from 'vitest';
import { parseDateOrDateTime, parseDateTime, parseUpperBound } from './date-time.parser';
import { parseDryrun, parseListRefundsQuery, parseListTransactionsQuery, parseRelated } from './list-query.parser';

const invalid = (name: string) => ({ error: `Invalid parameter: ${name}` });

describe('parseListTransactionsQuery', () => {
  it('defaults limit to 100 and carries only the given filters', () => {
    expect(parseListTransactionsQuery({})).toEqual({ limit: 100 });
    expect(parseListTransactionsQuery(undefined)).toEqual({ limit: 100 });
  });

  it('parses every filter', () => {
    expect(
      parseListTransactionsQuery({
        limit: '25',
        starting_after: 'txn_9',
        status: 'Captured,in retry',
        subscription_id: 'sub_1',
        account_id: 'acct_1',
        submitted_since: '2026-11-01T00:00:00Z',
        submitted_until: '2026-11-30',
        updated_since: '2026-11-20T10:00:00+01:00',
        unrelated: 'ignored',
      }),
    ).toEqual({
      limit: 25,
      startingAfter: 'txn_9',
      statuses: ['Captured', 'In Retry'],
      subscriptionId: 'sub_1',
      accountId: 'acct_1',
      submittedSince: new Date('2026-11-01T00:00:00Z'),
      // A plain date names the whole day: before the next day's midnight.
      submittedBefore: new Date('2026-12-01T00:00:00Z'),
      updatedSince: new Date('2026-11-20T09:00:00Z'),
    });
  });

  it('reads a date-only submitted_until as the whole UTC day and a date-time one as exact', () => {
    expect(parseListTransactionsQuery({ submitted_since: '2026-11-27', submitted_until: '2026-11-27' })).toEqual({
      limit: 100,
      submittedSince: new Date('2026-11-27T00:00:00Z'),
      submittedBefore: new Date('2026-11-28T00:00:00Z'),
    });
    expect(parseListTransactionsQuery({ submitted_until: '2026-12-31' })).toEqual({
      limit: 100,
      submittedBefore: new Date('2027-01-01T00:00:00Z'),
    });
    expect(parseListTransactionsQuery({ submitted_until: '2028-02-28' })).toEqual({
      limit: 100,
      submittedBefore: new Date('2028-02-29T00:00:00Z'),
    });
    expect(parseListTransactionsQuery({ submitted_until: '2026-11-27T00:00:00Z' })).toEqual({
      limit: 100,
      submittedUntil: new Date('2026-11-27T00:00:00Z'),
    });
    // A since inside the named day is a range; one at the next day's start or later is not.
    expect(
      parseListTransactionsQuery({ submitted_since: '2026-11-27T23:59:59.999Z', submitted_until: '2026-11-27' }),
    ).toMatchObject({ submittedBefore: new Date('2026-11-28T00:00:00Z') });
    expect(
      parseListTransactionsQuery({ submitted_since: '2026-11-27T10:00:00Z', submitted_until: '2026-11-27T10:00:00Z' }),
    ).toMatchObject({
      submittedUntil: new Date('2026-11-27T10:00:00Z'),
    });
  });

  it('counts a filter id in characters (128 emoji are 128 characters)', () => {
    const id = '\u{1F600}'.repeat(128);
    expect(parseListTransactionsQuery({ account_id: id })).toMatchObject({ accountId: id });
  });

  it('accepts a repeated status parameter', () => {
    expect(parseListTransactionsQuery({ status: ['Failed', 'Cancelled,Stopped'] })).toEqual({
      limit: 100,
      statuses: ['Failed', 'Cancelled', 'Stopped'],
    });
  });

  it.each([
    [{ limit: '0' }, 'limit'],
    [{ limit: '1001' }, 'limit'],
    [{ limit: 'ten' }, 'limit'],
    [{ limit: '1.5' }, 'limit'],
    [{ limit: '' }, 'limit'],
    [{ limit: ['1', '2'] }, 'limit'],
    [{ starting_after: 'a', ending_before: 'b' }, 'ending_before'],
    [{ starting_after: '' }, 'starting_after'],
    [{ ending_before: 'x'.repeat(129) }, 'ending_before'],
    [{ status: 'Lost' }, 'status'],
    [{ status: 'Failed,' }, 'status'],
    [{ subscription_id: '' }, 'subscription_id'],
    [{ account_id: ['a', 'b'] }, 'account_id'],
    [{ submitted_since: 'yesterday' }, 'submitted_since'],
    [{ submitted_until: '2026-13-01' }, 'submitted_until'],
    [{ updated_since: '2026-11-20T10:00:00' }, 'updated_since'],
    [{ submitted_since: '2026-11-02', submitted_until: '2026-11-01' }, 'submitted_until'],
    [{ submitted_since: '2026-11-02T00:00:00Z', submitted_until: '2026-11-01' }, 'submitted_until'],
    [{ submitted_since: '2026-11-01T10:00:01Z', submitted_until: '2026-11-01T10:00:00Z' }, 'submitted_until'],
  ])('%j -> Invalid parameter: %s', (query, name) => {
    expect(parseListTransactionsQuery(query)).toEqual(invalid(name));
  });

  it('accepts the limit bounds', () => {
    expect(parseListTransactionsQuery({ limit: '1' })).toEqual({ limit: 1 });
    expect(parseListTransactionsQuery({ limit: '1000', ending_before: 'x' })).toEqual({
      limit: 1000,
      endingBefore: 'x',
    });
  });
});

describe('parseListRefundsQuery', () => {
  it('parses since, until, limit and cursors', () => {
    expect(parseListRefundsQuery({})).toEqual({ limit: 100 });
    expect(
      parseListRefundsQuery({
        since: '2026-11-01',
        until: '2026-11-30T23:59:59Z',
        limit: '10',
        ending_before: 'txn_1',
      }),
    ).toEqual({
      limit: 10,
      endingBefore: 'txn_1',
      since: new Date('2026-11-01T00:00:00Z'),
      until: new Date('2026-11-30T23:59:59Z'),
    });
    expect(parseListRefundsQuery({ since: '2026-11-30', until: '2026-11-30' })).toEqual({
      limit: 100,
      since: new Date('2026-11-30T00:00:00Z'),
      before: new Date('2026-12-01T00:00:00Z'),
    });
  });

  it.each([
    [{ since: 'x' }, 'since'],
    [{ until: '2026-02-30' }, 'until'],
    [{ since: '2026-11-02', until: '2026-11-01' }, 'until'],
    [{ since: '2026-11-02T00:00:00Z', until: '2026-11-01' }, 'until'],
    [{ limit: '5000' }, 'limit'],
    [{ starting_after: 'a', ending_before: 'b' }, 'ending_before'],
  ])('%j -> Invalid parameter: %s', (query, name) => {
    expect(parseListRefundsQuery(query)).toEqual(invalid(name));
  });
});

describe('parseDryrun', () => {
  it.each([
    [undefined, 0],
    ['0', 0],
    ['1', 1],
    [0, 0],
    [1, 1],
  ])('%j -> %d', (value, expected) => {
    expect(parseDryrun(value)).toBe(expected);
  });

  it.each(['', '2', 'true', 'yes', ['1', '1'], null])('%j is invalid', (value) => {
    expect(parseDryrun(value)).toEqual(invalid('dryrun'));
  });
});

describe('parseRelated', () => {
  it.each([
    [undefined, false],
    ['false', false],
    ['0', false],
    ['true', true],
    ['1', true],
  ])('%j -> %s', (value, expected) => {
    expect(parseRelated(value)).toBe(expected);
  });

  it.each(['', 'yes', 'TRUE2', ['true']])('%j is invalid', (value) => {
    expect(parseRelated(value)).toEqual(invalid('related'));
  });
});

describe('date-time parsing', () => {
  it('requires a zone unless told otherwise', () => {
    expect(parseDateTime('2026-11-20T10:00:00')).toBeNull();
    expect(parseDateTime('2026-11-20T10:00:00', 'optional')).toEqual(new Date('2026-11-20T10:00:00Z'));
  });

  it('rejects impossible dates and times', () => {
    for (const v of [
      '2025-02-29T00:00:00Z',
      '2026-04-31T00:00:00Z',
      '2026-11-20T10:60:00Z',
      '2026-11-20T10:00:00+24:00',
    ]) {
      expect(parseDateTime(v)).toBeNull();
    }
    expect(parseDateTime('2024-02-29T23:59:59.999999999Z')).toEqual(new Date('2024-02-29T23:59:59.999Z'));
  });

  it.each([
    ['2026-11-20t10:00:00z', '2026-11-20T10:00:00.000Z'],
    ['2026-11-20T10:00:00,5+0100', '2026-11-20T09:00:00.500Z'],
    ['2026-11-20T10:00:00.123456789-00:30', '2026-11-20T10:30:00.123Z'],
  ])('reads %s', (value, iso) => {
    expect(parseDateTime(value)!.toISOString()).toBe(iso);
  });

  it.each([
    '2026-11-20T10:00:00Zx',
    '2026-11-20T10:00:00.Z',
    '2026-11-20T10:00:00.1234567890Z',
    '2026-11-20T10:00:00+1',
    '2026-11-20T10:00Z',
    '2026-11-20 10:00:00Z',
    '+2026-11-20T10:00:00Z',
    '2026-1-20T10:00:00Z',
  ])('refuses %s', (value) => {
    expect(parseDateTime(value)).toBeNull();
  });

  it('keeps years below 100 as written', () => {
    expect(parseDateOrDateTime('0099-01-01')!.getUTCFullYear()).toBe(99);
    expect(parseUpperBound('0099-12-31')).toEqual({
      at: new Date(parseDateOrDateTime('0100-01-01')!),
      inclusive: false,
    });
  });

  it('reads an upper bound: a plain date to the next midnight, a date-time exactly', () => {
    expect(parseUpperBound('2026-11-27')).toEqual({ at: new Date('2026-11-28T00:00:00Z'), inclusive: false });
    expect(parseUpperBound('9999-12-31')!.at.getTime()).toBe(Date.UTC(10000, 0, 1));
    expect(parseUpperBound('2026-11-27T08:00:00+01:00')).toEqual({
      at: new Date('2026-11-27T07:00:00Z'),
      inclusive: true,
    });
    expect(parseUpperBound('2026-02-29')).toBeNull();
  });
});
