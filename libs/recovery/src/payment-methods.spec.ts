import { describe, expect, it } from 'vitest';
import { cardExpired } from './payment-methods';

describe('cardExpired (the updater runs before a card whose expiration_date has passed is retried)', () => {
  it('is expired only after its expiry month', () => {
    const now = new Date('2026-11-23T10:00:00Z');
    expect(cardExpired('202611', now)).toBe(false);
    expect(cardExpired('202610', now)).toBe(true);
    expect(cardExpired('202701', now)).toBe(false);
    expect(cardExpired(null, now)).toBe(false);
    expect(cardExpired('bad', now)).toBe(false);
  });
});
