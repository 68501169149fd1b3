import { describe, expect, it } from 'vitest';
import { classifyDecline, classifyProcessorError, declineGroup, normalizeNetwork } from './decline-classifier';
import { visaDeclineCategory } from './network-rules.config';

const visa = (responseCode: string) => classifyDecline({ network: 'visa', responseCode });
const mc = (responseCode: string, merchantAdviceCode?: string) =>
  classifyDecline({ network: 'mastercard', responseCode, merchantAdviceCode });

describe('Visa decline categories (Table 7-2)', () => {
  const CAT1 = '04 07 12 14 15 41 43 46 57 R0 R1 R3'.split(' ');
  const CAT2 = '03 19 39 51 52 53 59 61 62 65 75 78 83 86 91 93 96 5C 9G N3 N4 Z5'.split(' ');
  const CAT3 = '54 55 82 6P N7 70 1A'.split(' ');
  const CAT4 = '01 05 13 58 63 99 Q1'.split(' ');

  it.each(CAT1)('category 1 %s: Hard Failure, never again on the card', (code) => {
    expect(visaDeclineCategory(code)).toBe(1);
    expect(visa(code)).toMatchObject({ description: 'Hard Failure', retryable: false, cardBlock: 'permanent' });
  });
  it.each(CAT2)('category 2 %s: Soft Failure, retry later', (code) => {
    expect(visaDeclineCategory(code)).toBe(2);
    expect(visa(code)).toMatchObject({ description: 'Soft Failure', retryable: true, visaCategory: 2 });
  });
  it.each(CAT3)('category 3 %s: Hard Failure until the card data changes', (code) => {
    expect(visaDeclineCategory(code)).toBe(3);
    expect(visa(code)).toMatchObject({ description: 'Hard Failure', retryable: false, waitClass: 'never' });
  });
  it.each(CAT4)('category 4 %s: Soft Failure, generic', (code) => {
    expect(visaDeclineCategory(code)).toBe(4);
    expect(visa(code)).toMatchObject({ retryable: true, visaCategory: 4 });
  });
  it('reads codes case- and space-insensitively', () => {
    expect(visa(' r1 ').retryable).toBe(false);
  });
});

describe('Mastercard Merchant Advice Codes', () => {
  it('03 and 21 stop for good, 01 and 04 need new card or token data', () => {
    for (const mac of ['03', '21']) expect(mc('51', mac)).toMatchObject({ retryable: false, cardBlock: 'permanent' });
    for (const mac of ['01', '04'])
      expect(mc('51', mac)).toMatchObject({ retryable: false, cardBlock: 'new-card-data' });
  });
  it('42 and 99 ("do not try again" in network-rules.md) stop for good like 03 and 21', () => {
    for (const mac of ['42', '99'])
      expect(mc('05', mac)).toMatchObject({ retryable: false, cardBlock: 'permanent', description: 'Hard Failure' });
  });
  it('02 and 24-30 are soft: the wait comes from the decline code, the delay from the network limits', () => {
    for (const mac of ['02', '24', '25', '26', '27', '28', '29', '30'])
      expect(mc('51', mac)).toMatchObject({ description: 'Soft Failure', retryable: true, waitClass: 'funds' });
  });
  it('advice codes mean nothing on other networks', () => {
    expect(classifyDecline({ network: 'visa', responseCode: '51', merchantAdviceCode: '03' }).retryable).toBe(true);
  });
});

describe('ISO 8583 groups (every brand) and wait classes', () => {
  it.each([
    ['51 61 65 62 78', 'funds', 'funds', true],
    ['05 01 02', 'generic', 'generic', true],
    ['19 91 92 96', 'technical', 'technical', true],
    ['59 63 83', 'risky', 'risky', true],
    ['54 55 82 N7 6P', 'data', 'never', false],
    ['14 04 07 41 43 46 15 12 57 R0 R1 R3', 'hard', 'never', false],
    ['1A 70', 'auth', 'never', false],
    ['13 99', 'generic', 'generic', true],
  ] as const)('%s: group %s, wait %s', (codes, group, waitClass, retryable) => {
    for (const code of codes.split(' ')) {
      for (const network of ['amex', 'discover', 'other', null]) {
        const c = classifyDecline({ network, responseCode: code });
        expect(declineGroup(code)).toBe(group);
        expect(c, `${network} ${code}`).toMatchObject({ group, waitClass, retryable, visaCategory: null });
        expect(c.description).toBe(retryable ? 'Soft Failure' : 'Hard Failure');
      }
    }
  });
  it('hard codes block the card on every network; authentication too, but a Mastercard’s stops only the transaction', () => {
    expect(classifyDecline({ network: 'amex', responseCode: '41' }).cardBlock).toBe('permanent');
    expect(classifyDecline({ network: 'amex', responseCode: '54' }).cardBlock).toBe('new-card-data');
    // network-rules.md, American Express, Discover and others: "none after a hard decline".
    expect(classifyDecline({ network: 'amex', responseCode: '1A' }).cardBlock).toBe('permanent');
    expect(classifyDecline({ network: 'mastercard', responseCode: '1A' }).cardBlock).toBeNull();
  });
  it('a processor error is a soft, technical failure', () => {
    expect(classifyProcessorError()).toMatchObject({
      retryable: true,
      waitClass: 'technical',
      description: 'Soft Failure',
    });
  });
});

describe('Maestro', () => {
  it('follows Mastercard rules: MAC 03 and 21 stop for good, MAC 01 needs new card data', () => {
    expect(normalizeNetwork('maestro')).toBe('mastercard');
    expect(normalizeNetwork('Maestro')).toBe('mastercard');
    expect(classifyDecline({ network: 'maestro', responseCode: '51', merchantAdviceCode: '03' })).toMatchObject({
      retryable: false,
      cardBlock: 'permanent',
    });
    expect(classifyDecline({ network: 'maestro', responseCode: '05', merchantAdviceCode: '21' }).retryable).toBe(false);
    expect(classifyDecline({ network: 'maestro', responseCode: '05', merchantAdviceCode: '01' }).cardBlock).toBe(
      'new-card-data',
    );
  });
});
