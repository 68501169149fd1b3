import { describe, expect, it } from 'vitest';
import { localDaysBetween, slotKeyFor } from './attempt-slots';
import { DEFAULT_CARDHOLDER_TIME_ZONE, timeZoneFor } from './cardholder-time';

const zone = (country: string | null, postalCode: string | null = null) =>
  timeZoneFor({ cardholder: { country, postalCode } });

describe('cardholder time zone', () => {
  it.each([
    ['US', '10001', 'America/New_York'],
    ['US', '60601', 'America/Chicago'],
    ['US', '80202', 'America/Denver'],
    ['US', '79901', 'America/Denver'], // El Paso
    ['US', '88510', 'America/Denver'], // El Paso (885xx)
    ['US', '85001', 'America/Phoenix'],
    ['US', '94105-1804', 'America/Los_Angeles'],
    ['US', '96813', 'Pacific/Honolulu'],
    ['US', '99501', 'America/Anchorage'],
    ['CA', 'V6B 1A1', 'America/Vancouver'],
    ['CA', 'h2x 1y4', 'America/Toronto'],
    ['CA', 'T2P 1J9', 'America/Edmonton'],
    ['AU', '6000', 'Australia/Perth'],
    ['AU', '2000', 'Australia/Sydney'],
    ['AU', '4000', 'Australia/Brisbane'],
    ['BR', '01310-100', 'America/Sao_Paulo'],
    ['BR', '69005-000', 'America/Manaus'],
    ['MX', '22000', 'America/Tijuana'],
    ['MX', '06000', 'America/Mexico_City'],
    ['RU', '630000', 'Asia/Novosibirsk'],
    ['RU', '101000', 'Europe/Moscow'],
  ])('%s %s is in %s (postal code)', (country, postal, expected) => {
    expect(zone(country, postal)).toEqual({ timeZone: expected, source: 'postal-code' });
  });

  it('a country alone gives its most populous zone; single-zone countries their zone', () => {
    expect(zone('US')).toEqual({ timeZone: 'America/New_York', source: 'billing-country' });
    expect(zone('au', 'not a postcode')).toEqual({ timeZone: 'Australia/Sydney', source: 'billing-country' });
    expect(zone('JP', '100-0001').timeZone).toBe('Asia/Tokyo');
    expect(zone('IN').timeZone).toBe('Asia/Kolkata');
    expect(zone('DE').timeZone).toBe('Europe/Berlin');
  });

  it('falls back to the BIN country, then the merchant country, then America/New_York', () => {
    expect(timeZoneFor({ cardholder: { country: 'ZZ' }, card: { binCountry: 'IN' } })).toEqual({
      timeZone: 'Asia/Kolkata',
      source: 'bin-country',
    });
    expect(timeZoneFor({ card: { binCountry: null }, merchantCountry: 'GB' })).toEqual({
      timeZone: 'Europe/London',
      source: 'merchant-country',
    });
    expect(timeZoneFor({})).toEqual({ timeZone: DEFAULT_CARDHOLDER_TIME_ZONE, source: 'default' });
    expect(timeZoneFor({ fallback: 'Not/AZone' }).timeZone).toBe(DEFAULT_CARDHOLDER_TIME_ZONE);
    expect(timeZoneFor({ fallback: 'Europe/Paris' })).toEqual({ timeZone: 'Europe/Paris', source: 'default' });
  });
});

describe('attempt slots', () => {
  it('count local calendar days and 2-hour local buckets', () => {
    const key = slotKeyFor({
      declineClass: 'funds',
      country: 'us',
      binPrefix: '4242 4242 42',
      failedAt: new Date('2026-06-01T03:00:00Z'), // May 31, 23:00 in New York
      at: new Date('2026-06-01T13:30:00Z'), // June 1, 09:30
      timeZone: 'America/New_York',
    });
    expect(key).toEqual({
      declineClass: 'funds',
      country: 'US',
      binPrefix: '424242',
      dayAfterFailure: 1,
      localHour: 8,
    });
  });

  it('a DST day is one calendar day (23 or 25 hours)', () => {
    const ny = 'America/New_York';
    // Spring forward, Sunday March 8 2026; fall back, Sunday November 1 2026.
    expect(localDaysBetween(new Date('2026-03-08T04:30:00Z'), new Date('2026-03-09T03:30:00Z'), ny)).toBe(1);
    // 00:30 EDT on November 1 to 00:30 EST on November 2 is 25 hours and one day; 24 hours is not.
    expect(localDaysBetween(new Date('2026-11-01T04:30:00Z'), new Date('2026-11-02T05:30:00Z'), ny)).toBe(1);
    expect(localDaysBetween(new Date('2026-11-01T04:30:00Z'), new Date('2026-11-02T04:30:00Z'), ny)).toBe(0);
  });

  it('clamps days to 0..30 and handles Feb 29', () => {
    const at = (iso: string) =>
      slotKeyFor({
        declineClass: 'generic',
        country: null,
        binPrefix: null,
        failedAt: new Date('2028-02-28T12:00:00Z'),
        at: new Date(iso),
        timeZone: 'Australia/Sydney',
      }).dayAfterFailure;
    expect(at('2028-02-28T14:00:00Z')).toBe(1); // already Feb 29 in Sydney
    expect(at('2028-03-01T00:00:00Z')).toBe(2);
    expect(at('2028-06-01T00:00:00Z')).toBe(30);
    expect(at('2028-02-01T00:00:00Z')).toBe(0);
  });
});
