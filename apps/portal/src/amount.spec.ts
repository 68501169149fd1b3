import { describe, expect, it } from 'vitest';
import { money as shown } from './amount';

/** Intl puts a no-break space between a currency code and its amount. */
const money = (n: number | null, currency: string) => shown(n, currency).replace(/\u00a0/g, ' ');

// What the portal shows of an amount the API answered: every decimal its currency has.
describe('the portal shows amounts with their currency decimals', () => {
  it('three-decimal, zero-decimal and two-decimal currencies', () => {
    expect(money(1.005, 'KWD')).toBe('KWD 1.005');
    expect(money(0.125, 'BHD')).toBe('BHD 0.125');
    expect(money(1500, 'JPY')).toBe('¥1,500');
    expect(money(19.9, 'USD')).toBe('$19.90');
    expect(money(null, 'USD')).toBe('—');
  });
});
