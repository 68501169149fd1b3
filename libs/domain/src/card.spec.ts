import { describe, expect, it } from 'vitest';
import { accountHash, cardBrand, cardDataVersion, luhnValid, maskCardNumber, validCardNumber } from './card';
import { createHmac, hkdfSync } from 'node:crypto';
import { cardColumnsFromPan, cardFingerprint, cardFingerprintCandidates, open, seal } from './card-vault';

describe('card checks', () => {
  it('runs Luhn, brand and length checks', () => {
    expect(luhnValid('4111111111111111')).toBe(true);
    expect(luhnValid('4111111111111112')).toBe(false);
    expect(cardBrand('5555555555554444')).toBe('mastercard');
    expect(cardBrand('4000000000000077')).toBe('visa');
    expect(validCardNumber('378282246310005')).toBe(true);
    expect(validCardNumber('41111111111111')).toBe(false);
  });

  it('knows Discover by all of its IIN ranges (6011, 622126-622925, 644-649, 65): a 644-649 card is not Maestro', () => {
    // network-rules.md: Discover cards fall under "American Express, Discover and others" (20 declines
    // in 30 days across amounts, 1A/70 a hard decline), not Mastercard's per-day and same-amount limits.
    for (const pan of [
      '6011000990139424',
      '6221260000000007',
      '6229250000000008',
      '6440000000000007',
      '6445644564456445',
      '6490000000000007',
      '6500000000000002',
    ])
      expect([pan, cardBrand(pan)]).toEqual([pan, 'discover']);
    expect(validCardNumber('6445644564456445')).toBe(true);
    // Next to them, still Maestro (a Mastercard brand): 643 and 6304, 6759.
    for (const pan of ['6430000000000000', '6304000000000000', '6759649826438453'])
      expect([pan, cardBrand(pan)]).toEqual([pan, 'maestro']);
  });

  it('masks to first 6 and last 4 and hashes the digits with SHA-1', () => {
    expect(maskCardNumber('4111111111111111')).toBe('411111******1111');
    expect(accountHash('4111 1111 1111 1111')).toBe(accountHash('4111111111111111'));
    expect(accountHash('4111111111111111')).toMatch(/^[0-9a-f]{40}$/);
  });
});

describe('card vault', () => {
  const keys = [
    { id: 'k2', key: Buffer.alloc(32, 2) },
    { id: 'k1', key: Buffer.alloc(32, 1) },
  ];

  it('seals with the current key and opens with any configured key', () => {
    const sealed = seal(keys, '4111111111111111');
    expect(sealed.keyId).toBe('k2');
    expect(sealed.value).not.toContain('4111');
    expect(open(keys, sealed)).toBe('4111111111111111');
    const old = seal([keys[1]!], '5555555555554444');
    expect(open(keys, old)).toBe('5555555555554444');
  });

  it('refuses a tampered value', () => {
    const sealed = seal(keys, '4111111111111111');
    const parts = sealed.value.split('.');
    const ct = Buffer.from(parts[2]!, 'base64');
    ct[0] = ct[0]! ^ 1;
    expect(() => open(keys, { ...sealed, value: `${parts[0]}.${parts[1]}.${ct.toString('base64')}` })).toThrow();
  });

  it('opens a value whose key id is no longer configured with the same key under another id (a renamed key)', () => {
    // Sealed under a bare CARD_DATA_KEY (key id `default`), then the deployment names that key `k1`
    // and prepends a new one: the old row still opens, the AES-GCM tag telling which key sealed it.
    const bare = seal([{ id: 'default', key: keys[1]!.key }], '5555555555554444', 'card');
    expect(open(keys, bare, 'card')).toBe('5555555555554444');
    expect(open([keys[1]!], bare, 'card')).toBe('5555555555554444');
    // A key that did not seal it is still refused, naming the missing key id (never the value).
    expect(() => open([keys[0]!], bare, 'card')).toThrow('data key default is not configured');
    // The AAD binds too: the same key under another purpose does not open it.
    expect(() => open(keys, bare, 'cryptogram')).toThrow('data key default is not configured');
  });

  const fpKeys = [
    { id: 'fp2', key: Buffer.alloc(32, 5) },
    { id: 'fp1', key: Buffer.alloc(32, 4) },
  ];
  const pan = '4111111111111111';
  /** What the fingerprint was before it had its own key: HMAC under HKDF of the first data key. */
  const legacy = (dataKey: Buffer): string =>
    createHmac('sha256', Buffer.from(hkdfSync('sha256', dataKey, Buffer.alloc(0), 'retain card fingerprint', 32)))
      .update(pan)
      .digest('hex');

  it('fingerprints a card with a keyed HMAC under the current fingerprint key, with its key id', () => {
    const a = cardFingerprint(fpKeys, pan);
    expect(a.keyId).toBe('fp2');
    expect(a.value).toMatch(/^[0-9a-f]{64}$/);
    expect(cardFingerprint(fpKeys, pan)).toEqual(a);
    expect(cardFingerprint([{ id: 'x', key: Buffer.alloc(32, 9) }], pan).value).not.toBe(a.value);
  });

  it('keeps the fingerprint when the data key rotates (issue 9 item 5)', () => {
    const before = cardColumnsFromPan([keys[1]!], fpKeys, pan);
    const after = cardColumnsFromPan(keys, fpKeys, pan);
    expect(after.cardKeyId).toBe('k2');
    expect(after.fingerprints[0]).toEqual(before.fingerprints[0]);
  });

  it('lists the fingerprints a stored card may carry: current, older keys, then the legacy derivation', () => {
    expect(cardFingerprintCandidates(fpKeys, keys, pan)).toEqual([
      cardFingerprint(fpKeys, pan),
      cardFingerprint([fpKeys[1]!], pan),
      { keyId: 'legacy', value: legacy(keys[0]!.key) },
      { keyId: 'legacy', value: legacy(keys[1]!.key) },
    ]);
  });
});

describe('cardDataVersion', () => {
  it('changes with the expiry date, is stable for the same one, and is null when unknown', () => {
    expect(cardDataVersion('202912')).toBe(cardDataVersion('202912'));
    expect(cardDataVersion('202912')).not.toBe(cardDataVersion('203001'));
    expect(cardDataVersion('202912')).toMatch(/^[0-9a-f]{32}$/);
    expect(cardDataVersion(null)).toBeNull();
    expect(cardDataVersion('')).toBeNull();
  });
});
