import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdyenProcessor } from './adyen.processor';
import type { ChargeRequest, ChargeResult, PaymentInstrument, PaymentProcessor } from './processor.port';
import { MemorySandboxLedger } from './sandbox/sandbox-ledger';
import { SandboxProcessor } from './sandbox/sandbox.processor';
import { STRIPE_KEY_METADATA, StripeProcessor } from './stripe.processor';
import { AdyenFake } from '../test/adyen-fake';
import { StripeFake } from '../test/stripe-fake';

/**
 * The port's contract: the sandbox and the real adapters (against their wire fakes) behave alike
 * for the scenarios the retry worker relies on.
 */
interface Harness {
  processor: PaymentProcessor;
  approved: PaymentInstrument;
  /** Declined 51 with Mastercard advice code 03. */
  declinedNoRetry: PaymentInstrument;
  /** The next charge goes through but its answer is lost. */
  loseNextAnswer(): void;
  /** How many charges the processor made under a key. */
  chargesFor(key: string): number;
  close(): Promise<void>;
}

/** The sandbox has no wire: losing the answer is done around it. */
class LossySandbox extends SandboxProcessor {
  lose = false;
  override async charge(req: ChargeRequest): Promise<ChargeResult> {
    const result = await super.charge(req);
    if (!this.lose) return result;
    this.lose = false;
    return { outcome: 'error', message: 'Processor timeout' };
  }
}

const harnesses: Record<string, () => Promise<Harness>> = {
  sandbox: async () => {
    const ledger = new MemorySandboxLedger();
    const processor = new LossySandbox(ledger);
    return {
      processor,
      approved: { kind: 'token', token: 'tok_sandbox_1111', isNetworkToken: false },
      declinedNoRetry: { kind: 'token', token: 'tok_sandbox_0008', isNetworkToken: false },
      loseNextAnswer: () => void (processor.lose = true),
      chargesFor: () => 1, // the ledger keeps one result per key by construction
      close: async () => {},
    };
  },
  stripe: async () => {
    const fake = new StripeFake();
    const base = await fake.start();
    fake.script('pm_contract_mc_03', {
      decline_code: 'insufficient_funds',
      network_decline_code: '51',
      network_advice_code: '03',
      brand: 'mastercard',
    });
    return {
      processor: new StripeProcessor({ secret_key: fake.secretKey, api_base: base }, { timeoutMs: 400 }),
      approved: { kind: 'token', token: 'cus_C1|pm_card_visa', isNetworkToken: false },
      declinedNoRetry: { kind: 'token', token: 'pm_contract_mc_03', isNetworkToken: false },
      loseNextAnswer: () => fake.failNext('charge-then-timeout'),
      chargesFor: (key) =>
        fake.succeeded().filter((pi) => (pi.metadata as Record<string, string>)[STRIPE_KEY_METADATA] === key).length,
      close: () => fake.close(),
    };
  },
  adyen: async () => {
    const fake = new AdyenFake();
    const base = await fake.start();
    fake.script('CONTRACTMC030001', {
      refusalReason: 'Not enough balance',
      refusalReasonCode: '12',
      refusalReasonRaw: '51 : Insufficient funds',
      merchantAdviceCode: '03: Do not try again',
      brand: 'mc',
    });
    return {
      processor: new AdyenProcessor(
        { api_key: fake.apiKey, merchant_account: fake.merchantAccount, checkout_url: `${base}/v71` },
        { timeoutMs: 400, trustedCa: fake.ca! },
      ),
      approved: { kind: 'token', token: 'shopper-1|8415718415172200', isNetworkToken: false },
      declinedNoRetry: { kind: 'token', token: 'shopper-1|CONTRACTMC030001', isNetworkToken: false },
      loseNextAnswer: () => fake.failNext('charge-then-timeout'),
      chargesFor: (key) => fake.authorised().filter((p) => p.body.reference === key).length,
      close: () => fake.close(),
    };
  },
};

let seq = 0;
const charge = (instrument: PaymentInstrument): ChargeRequest => ({
  idempotencyKey: `att_contract_${++seq}_${Date.now()}`,
  attemptNumber: 1,
  amountMinor: 2500n,
  currency: 'USD',
  instrument,
  originalResponseCode: '51',
  divisionNumber: 'd1',
  networkTransactionId: '123456789012345',
  at: new Date('2026-03-13T09:00:00Z'),
});

describe.each(Object.keys(harnesses))('payment processor port contract: %s', (name) => {
  let h: Harness;
  beforeAll(async () => {
    h = await harnesses[name]!();
  });
  afterAll(() => h.close());

  it('approves, with a processor transaction id, and the same key answers the same', async () => {
    const r = charge(h.approved);
    const first = await h.processor.charge(r);
    expect(first).toMatchObject({ outcome: 'approved', responseCode: '00' });
    expect(first.outcome === 'approved' && first.processorTransactionId.length).toBeGreaterThan(0);
    expect(await h.processor.charge(r)).toEqual(first);
    expect(h.chargesFor(r.idempotencyKey)).toBe(1);
  });

  it('declines with the network code and the Mastercard advice code', async () => {
    const result = await h.processor.charge(charge(h.declinedNoRetry));
    expect(result).toMatchObject({
      outcome: 'declined',
      responseCode: '51',
      merchantAdviceCode: '03',
      network: 'mastercard',
    });
  });

  it('an answer lost after the charge is an error that the lookup resolves, charged once', async () => {
    const r = charge(h.approved);
    h.loseNextAnswer();
    expect((await h.processor.charge(r)).outcome).toBe('error');
    const found = await h.processor.lookupCharge(r.idempotencyKey, r);
    expect(found).toMatchObject({ outcome: 'approved', responseCode: '00' });
    expect(h.chargesFor(r.idempotencyKey)).toBe(1);
  });

  it('refunds an approved charge', async () => {
    const approved = await h.processor.charge(charge(h.approved));
    if (approved.outcome !== 'approved') throw new Error('expected approval');
    const refund = await h.processor.refund({
      idempotencyKey: `rfd_contract_${++seq}`,
      processorTransactionId: approved.processorTransactionId,
      amountMinor: 2500n,
      currency: 'USD',
    });
    expect(refund.outcome).toBe('completed');
    expect(refund.processorRefundId).toBeTruthy();
  });
});
