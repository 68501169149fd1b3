import { describe, expect, it } from 'vitest';
import { cardNetwork } from '../card-network';
import { createProcessor } from '../processor.factory';
import type { ChargeRequest, ChargeResult } from '../processor.port';
import { MemorySandboxLedger } from './sandbox-ledger';
import { SandboxProcessor } from './sandbox.processor';

const AT = new Date('2026-03-13T09:00:00Z');
const req = (pan: string, attemptNumber: number, over: Partial<ChargeRequest> = {}): ChargeRequest => ({
  idempotencyKey: `k-${pan}-${attemptNumber}`,
  attemptNumber,
  amountMinor: 1999n,
  currency: 'USD',
  instrument: { kind: 'pan', pan },
  originalResponseCode: '51',
  divisionNumber: 'd1',
  at: AT,
  ...over,
});
const short = (r: ChargeResult): string =>
  r.outcome === 'declined' ? `${r.responseCode}${r.merchantAdviceCode ? `/${r.merchantAdviceCode}` : ''}` : r.outcome;

async function outcomes(pan: string, n: number): Promise<string[]> {
  const p = new SandboxProcessor(new MemorySandboxLedger());
  const out: string[] = [];
  for (let i = 1; i <= n; i++) out.push(short(await p.charge(req(pan, i))));
  return out;
}

describe('sandbox processor: scripted cards (decisions §12)', () => {
  it.each([
    ['4111111111111111', ['approved']],
    ['5555555555554444', ['approved']],
    ['4000000000000077', ['51', '51', 'approved']],
    ['4000000000000002', ['05', '05', '05', '05']],
    ['4000000000000069', ['54', '54']],
    ['4000000000000119', ['error', 'approved']],
    ['4100000000000019', ['41']],
    ['5100000000000008', ['51/03']],
  ])('%s answers %j', async (pan, expected) => {
    expect(await outcomes(pan, expected.length)).toEqual(expected);
  });

  it('4000000000003220 is approved for half of the amount (decisions §15), the same on a replay and a lookup', async () => {
    const p = new SandboxProcessor(new MemorySandboxLedger());
    const r = await p.charge(req('4000000000003220', 1));
    expect(r).toMatchObject({ outcome: 'approved', amountMinor: 999n });
    expect(await p.charge(req('4000000000003220', 1))).toEqual(r);
    expect(await p.lookupCharge(req('4000000000003220', 1).idempotencyKey)).toMatchObject({ amountMinor: 999n });
    expect(await p.charge(req('4111111111111111', 1))).not.toHaveProperty('amountMinor');
  });

  it('declines carry the network and a processor id, never the card number', async () => {
    const p = new SandboxProcessor(new MemorySandboxLedger());
    const r = await p.charge(req('5100000000000008', 1));
    expect(r).toMatchObject({ outcome: 'declined', network: 'mastercard', merchantAdviceCode: '03' });
    for (const pan of ['5100000000000008', '4000000000000077', '4242424242424242'])
      expect(JSON.stringify(await p.charge(req(pan, 1, { idempotencyKey: `x${pan}` })))).not.toMatch(/\d{12,}/);
  });
});

describe('sandbox processor: tokens', () => {
  it('tok_sandbox_<last4> stands for the scripted card ending in those digits', async () => {
    const p = new SandboxProcessor(new MemorySandboxLedger());
    expect(await p.detokenize('tok_sandbox_0077')).toEqual({ ok: true, pan: '4000000000000077' });
    expect(await p.detokenize('tok_sandbox_1111')).toEqual({ ok: true, pan: '4111111111111111' });
    expect(await p.detokenize('tok_sandbox_0008')).toEqual({ ok: true, pan: '5100000000000008' });
    const token = (t: string, n: number) =>
      p.charge(
        req('', n, { idempotencyKey: `${t}-${n}`, instrument: { kind: 'token', token: t, isNetworkToken: false } }),
      );
    expect((await token('tok_sandbox_1111', 1)).outcome).toBe('approved');
    expect(short(await token('tok_sandbox_0077', 1))).toBe('51');
    expect((await token('tok_sandbox_0077', 3)).outcome).toBe('approved');
  });
  it('any other token fails', async () => {
    const p = new SandboxProcessor(new MemorySandboxLedger());
    for (const t of ['tok_sandbox_9999', 'tok_other', 'tok_sandbox_77', '4111111111111111'])
      expect((await p.detokenize(t)).ok, t).toBe(false);
  });
});

describe('sandbox processor: idempotency and lookup', () => {
  it('the same key returns the stored result and never charges again', async () => {
    const ledger = new MemorySandboxLedger();
    const p = new SandboxProcessor(ledger);
    expect(await p.lookupCharge('k')).toBeNull();
    const first = await p.charge(req('4000000000000077', 1, { idempotencyKey: 'k' }));
    // Attempt 3 of this card would approve: the key wins over the request.
    expect(await p.charge(req('4000000000000077', 3, { idempotencyKey: 'k' }))).toEqual(first);
    expect(await p.lookupCharge('k')).toEqual(first);
    expect(ledger.size).toBe(1);
    // Concurrent calls with one key agree.
    const results = await Promise.all(
      [1, 2, 3].map((n) => p.charge(req('4000000000000077', n, { idempotencyKey: 'c' }))),
    );
    expect(new Set(results.map((r) => JSON.stringify(r))).size).toBe(1);
  });
  it('a refund key is not a charge', async () => {
    const p = new SandboxProcessor(new MemorySandboxLedger());
    await p.refund({ idempotencyKey: 'r', processorTransactionId: 'sbx_1', amountMinor: 100n, currency: 'USD' });
    expect(await p.lookupCharge('r')).toBeNull();
  });
});

describe('sandbox processor: refunds', () => {
  const refund = (p: SandboxProcessor, key: string, amountMinor: bigint) =>
    p.refund({ idempotencyKey: key, processorTransactionId: 'sbx_1', amountMinor, currency: 'USD' });
  it('completes refunds, except amounts ending in .13', async () => {
    const p = new SandboxProcessor(new MemorySandboxLedger());
    expect(await refund(p, 'r1', 1999n)).toMatchObject({
      outcome: 'completed',
      processorRefundId: expect.stringMatching(/^sbr_/),
    });
    expect(await refund(p, 'r2', 1013n)).toMatchObject({ outcome: 'failed', processorRefundId: null });
    expect((await refund(p, 'r3', 13n)).outcome).toBe('failed');
    expect((await refund(p, 'r4', 1130n)).outcome).toBe('completed');
  });
  it(".13 is read in the currency's exponent: 3- and 4-decimal currencies, never for 0-decimal ones", async () => {
    const p = new SandboxProcessor(new MemorySandboxLedger());
    const inCurrency = (key: string, amountMinor: bigint, currency: string) =>
      p.refund({ idempotencyKey: key, processorTransactionId: 'sbx_1', amountMinor, currency });
    // KWD has 3 decimals: 10.130 ends in .13, 10.013 does not.
    expect((await inCurrency('k1', 10130n, 'KWD')).outcome).toBe('failed');
    expect((await inCurrency('k2', 10013n, 'KWD')).outcome).toBe('completed');
    // CLF has 4 decimals: 1.1300 ends in .13, 1.0013 does not.
    expect((await inCurrency('c1', 11300n, 'CLF')).outcome).toBe('failed');
    expect((await inCurrency('c2', 10013n, 'CLF')).outcome).toBe('completed');
    // JPY has no decimals: 1013 yen is 1013, not 10.13.
    expect((await inCurrency('j1', 1013n, 'JPY')).outcome).toBe('completed');
    expect((await inCurrency('j2', 13n, 'JPY')).outcome).toBe('completed');
    // 2-decimal currencies as before.
    expect((await inCurrency('e1', 513n, 'EUR')).outcome).toBe('failed');
  });
  it('is idempotent by key', async () => {
    const p = new SandboxProcessor(new MemorySandboxLedger());
    const ok = await refund(p, 'r1', 1999n);
    expect(await refund(p, 'r1', 1013n)).toEqual(ok);
  });
});

describe('sandbox processor: limits, factory, networks', () => {
  it('publishes its limits', () => {
    const { limits } = new SandboxProcessor(new MemorySandboxLedger());
    expect(limits.maxPaymentMethodIdLength).toBe(64);
    for (const ok of ['ACME*Gym monthly', "Joe's & Co. - 12", 'A'.repeat(22)])
      expect(limits.billingDescriptorPattern.test(ok), ok).toBe(true);
    for (const bad of ['', 'A'.repeat(23), 'ACME <gym>', 'Café', 'a"b'])
      expect(limits.billingDescriptorPattern.test(bad), bad).toBe(false);
  });
  it('createProcessor knows sandbox and refuses other names', () => {
    const ledger = new MemorySandboxLedger();
    expect(createProcessor('sandbox', { ledger }).name).toBe('sandbox');
    expect(createProcessor('sandbox', ledger)).toBeInstanceOf(SandboxProcessor);
    expect(() => createProcessor('stripe', { ledger })).toThrow(/Unknown payment processor "stripe"/);
  });
  it('cardNetwork reads the number or the BIN', () => {
    expect(cardNetwork('4111111111111111')).toBe('visa');
    expect(cardNetwork('555555')).toBe('mastercard');
    expect(cardNetwork('2221000000000009')).toBe('mastercard');
    expect(cardNetwork('6759649826438453')).toBe('mastercard'); // Maestro follows Mastercard rules
    expect(cardNetwork('378282246310005')).toBe('amex');
    expect(cardNetwork('6011111111111117')).toBe('discover');
    expect(cardNetwork('3530111333300000')).toBe('other'); // JCB
  });
});
