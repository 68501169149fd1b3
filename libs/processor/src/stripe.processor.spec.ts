import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { classifyDecline, updaterMayCure } from '@retain/domain';
import type { ChargeRequest } from './processor.port';
import { ProcessorUnavailableError } from './processor.port';
import { AccountConfigError, accountView, parseAccountConfig } from './processor-accounts';
import { STRIPE_KEY_METADATA, STRIPE_REFUND_METADATA, StripeProcessor } from './stripe.processor';
import { StripeFake } from '../test/stripe-fake';

const fake = new StripeFake('sk_test_retain_spec');
let base = '';
const adapter = (
  over: { raw_card_data?: boolean; mit_exemption?: boolean } = {},
  warn?: (fields: Record<string, unknown>, msg: string) => void,
): StripeProcessor =>
  new StripeProcessor({ secret_key: fake.secretKey, api_base: base, ...over }, { timeoutMs: 400, warn });

let seq = 0;
const req = (over: Partial<ChargeRequest> = {}): ChargeRequest => ({
  idempotencyKey: `att_stripe_${++seq}_${Date.now()}`,
  attemptNumber: 1,
  amountMinor: 1999n,
  currency: 'USD',
  instrument: { kind: 'token', token: 'cus_Q1|pm_card_visa', isNetworkToken: false },
  originalResponseCode: '51',
  divisionNumber: 'd1',
  networkTransactionId: '123456789012345',
  at: new Date('2026-03-13T09:00:00Z'),
  ...over,
});

/** A PaymentIntent charged, and refund requests of it, each under a key of its own. */
const chargedWithRefunds = async () => {
  const charged = await adapter().charge(req());
  if (charged.outcome !== 'approved') throw new Error('expected approval');
  const refund = (key: string, amountMinor: bigint) => ({
    idempotencyKey: `${key}_${Date.now()}`,
    processorTransactionId: charged.processorTransactionId,
    amountMinor,
    currency: 'USD',
  });
  return { charged, refund };
};

beforeAll(async () => {
  base = await fake.start();
});
afterAll(() => fake.close());
afterEach(() => {
  fake.rawCardDataAllowed = false;
  fake.mitExemptionEnabled = false;
});

describe('Stripe adapter against the Stripe wire fake', () => {
  it('charges a saved PaymentMethod off-session, as a recurring charge, with the attempt vid as Idempotency-Key', async () => {
    const r = req();
    const result = await adapter().charge(r);
    expect(result).toMatchObject({ outcome: 'approved', responseCode: '00' });
    const [sent] = fake.received('POST', '/v1/payment_intents').slice(-1);
    expect(sent!.headers['idempotency-key']).toBe(r.idempotencyKey);
    expect(sent!.headers.authorization).toBe(`Bearer ${fake.secretKey}`);
    expect(sent!.headers['content-type']).toMatch(/^application\/x-www-form-urlencoded/);
    expect(sent!.body).toEqual({
      amount: '1999',
      currency: 'usd',
      confirm: 'true',
      // Every attempt is a merchant-initiated recurring charge (decisions §13): Stripe's cadence, not `true`.
      off_session: 'recurring',
      customer: 'cus_Q1',
      payment_method: 'pm_card_visa',
      payment_method_types: ['card'],
      metadata: { [STRIPE_KEY_METADATA]: r.idempotencyKey },
      // The request has a network transaction id, but this account has no "mit_exemption": not sent.
    });
    expect(result.outcome === 'approved' && result.processorTransactionId).toMatch(/^pi_/);
    if (result.outcome !== 'approved') throw new Error('expected approval');
    expect(fake.intents.get(result.processorTransactionId)!.offSession).toBe('recurring');
  });

  it('checkToken: a saved PaymentMethod id, or digits only as a network token (a bare number is no Stripe id)', () => {
    const p = adapter();
    expect(p.checkToken('pm_1Q2w3E4r5T6y')).toEqual({ ok: true });
    expect(p.checkToken('cus_R1|pm_1Q2w3E4r5T6y')).toEqual({ ok: true });
    expect(p.checkToken('4895370012003478', { isNetworkToken: true })).toEqual({ ok: true });
    // Sent as payment_method, digits are refused by Stripe (400 resource_missing) on every attempt.
    expect(p.checkToken('4895370012003478').ok).toBe(false);
    expect(p.checkToken('pm_1Q2w3E4r5T6y', { isNetworkToken: true }).ok).toBe(false);
  });

  it('a bare pm_… attached to a customer is charged with its customer, read from Stripe first (once per PaymentMethod)', async () => {
    fake.attach('pm_bareAttached1', 'cus_Bare1');
    const p = adapter();
    for (const r of [
      req({ instrument: { kind: 'token', token: 'pm_bareAttached1', isNetworkToken: false } }),
      req({ instrument: { kind: 'token', token: 'pm_bareAttached1', isNetworkToken: false } }),
    ]) {
      expect(await p.charge(r)).toMatchObject({ outcome: 'approved', responseCode: '00' });
      const [sent] = fake.received('POST', '/v1/payment_intents').slice(-1);
      expect(sent!.headers['idempotency-key']).toBe(r.idempotencyKey);
      expect(sent!.body).toMatchObject({ customer: 'cus_Bare1', payment_method: 'pm_bareAttached1' });
    }
    // Read once (GET /v1/payment_methods/{id}): a PaymentMethod's customer stays its customer.
    expect(fake.received('GET', '/v1/payment_methods/pm_bareAttached1')).toHaveLength(1);

    // Not attached: charged as it is, without a customer.
    const loose = req({ instrument: { kind: 'token', token: 'pm_bareLoose1', isNetworkToken: false } });
    expect(await p.charge(loose)).toMatchObject({ outcome: 'approved' });
    expect(fake.received('POST', '/v1/payment_intents').slice(-1)[0]!.body.customer).toBeUndefined();

    // Gone at Stripe (404 resource_missing): nothing charged, settled, as a missing PaymentMethod is.
    fake.missing.add('pm_bareGone1');
    const gone = req({ instrument: { kind: 'token', token: 'pm_bareGone1', isNetworkToken: false } });
    const before = fake.received('POST', '/v1/payment_intents').length;
    expect(await p.charge(gone)).toMatchObject({ outcome: 'error', settled: true });
    expect(await p.lookupCharge(gone.idempotencyKey, gone)).toMatchObject({ outcome: 'error', settled: true });
    expect(fake.received('POST', '/v1/payment_intents')).toHaveLength(before);
    // Stripe not answering the read: unknown, not settled (the lookup reads it again).
    fake.failNext('5xx', 1, { method: 'GET', path: /^\/v1\/payment_methods\// });
    const down = await p.charge(req({ instrument: { kind: 'token', token: 'pm_bareDown1', isNetworkToken: false } }));
    expect(down.outcome === 'error' && down.settled).toBeFalsy();
  });

  it('sends amounts in minor units of the currency (JPY has none, KWD three)', async () => {
    await adapter().charge(req({ amountMinor: 500n, currency: 'JPY' }));
    await adapter().charge(req({ amountMinor: 10130n, currency: 'KWD' }));
    const sent = fake.received('POST', '/v1/payment_intents').slice(-2);
    expect(sent.map((s) => [s.body.amount, s.body.currency])).toEqual([
      ['500', 'jpy'],
      ['10130', 'kwd'],
    ]);
  });

  it("sends Stripe's own decimals where they differ from ISO 4217 (ISK two, MGA none), charges and refunds", async () => {
    // ISO 4217: ISK has no minor unit, MGA two. Stripe: ISK stays two-decimal (whole krónur: x100),
    // MGA is zero-decimal (docs.stripe.com/currencies).
    const isk = await adapter().charge(req({ amountMinor: 1500n, currency: 'ISK' }));
    await adapter().charge(req({ amountMinor: 250000n, currency: 'MGA' }));
    const sent = fake.received('POST', '/v1/payment_intents').slice(-2);
    expect(sent.map((s) => [s.body.amount, s.body.currency])).toEqual([
      ['150000', 'isk'],
      ['2500', 'mga'],
    ]);
    expect(isk).toMatchObject({ outcome: 'approved' });
    if (isk.outcome !== 'approved') throw new Error('expected approval');
    expect(isk.amountMinor).toBeUndefined(); // all of it: not read back as a partial authorization
    const refund = await adapter().refund({
      idempotencyKey: `rfd_isk_${Date.now()}`,
      processorTransactionId: isk.processorTransactionId,
      amountMinor: 700n,
      currency: 'ISK',
    });
    expect(refund).toMatchObject({ outcome: 'completed' });
    expect(fake.received('POST', '/v1/refunds').slice(-1)[0]!.body.amount).toBe('70000');
    // 2,500.50 ariary cannot be charged at Stripe: nothing is sent, and the answer is final (settled).
    const before = fake.requests.length;
    const odd = await adapter().charge(req({ amountMinor: 250050n, currency: 'MGA' }));
    expect(odd).toMatchObject({ outcome: 'error', settled: true });
    expect(fake.requests.length).toBe(before);
    expect(adapter().limits.amountFits?.(250050n, 'MGA')).toBe(false);
    expect(adapter().limits.amountFits?.(250000n, 'MGA')).toBe(true);
  });

  it("an amount below Stripe's minimum charge in its currency does not fit (USD 0.30, GBP 0.29, JPY 49, HUF 174.99)", () => {
    // docs.stripe.com/currencies#minimum-and-maximum-charge-amounts: Stripe answers 400 amount_too_small.
    const fits = (amountMinor: bigint, currency: string) => adapter().limits.amountFits?.(amountMinor, currency);
    expect(fits(30n, 'USD')).toBe(false);
    expect(fits(49n, 'usd')).toBe(false);
    expect(fits(50n, 'USD')).toBe(true);
    expect(fits(29n, 'GBP')).toBe(false);
    expect(fits(30n, 'GBP')).toBe(true);
    expect(fits(49n, 'JPY')).toBe(false);
    expect(fits(50n, 'JPY')).toBe(true);
    expect(fits(17499n, 'HUF')).toBe(false);
    expect(fits(17500n, 'HUF')).toBe(true);
    expect(fits(999n, 'MXN')).toBe(false);
    // A currency without a listed minimum of its own: only its decimals decide (KWD 0.010).
    expect(fits(10n, 'KWD')).toBe(true);
  });

  it('three-decimal currencies (BHD, JOD, KWD, OMR, TND): an amount whose last digit is not 0 is never sent', async () => {
    // docs.stripe.com/currencies: PaymentIntents and Refunds take thousandths, the last digit 0.
    for (const currency of ['BHD', 'JOD', 'KWD', 'OMR', 'TND']) {
      expect(adapter().limits.amountFits?.(1005n, currency), currency).toBe(false);
      expect(adapter().limits.amountFits?.(1010n, currency), currency).toBe(true);
    }
    const charged = await adapter().charge(req({ amountMinor: 10130n, currency: 'KWD' }));
    if (charged.outcome !== 'approved') throw new Error('expected approval');
    const before = fake.requests.length;
    // 1.005 KWD: Stripe would refuse it (400) on every attempt; not sent, and final (settled).
    expect(await adapter().charge(req({ amountMinor: 1005n, currency: 'KWD' }))).toMatchObject({
      outcome: 'error',
      settled: true,
    });
    // A partial refund of 1.005 KWD fails at once, saying why.
    const refund = await adapter().refund({
      idempotencyKey: `rfd_kwd_${Date.now()}`,
      processorTransactionId: charged.processorTransactionId,
      amountMinor: 1005n,
      currency: 'KWD',
    });
    expect(refund).toMatchObject({ outcome: 'failed', processorRefundId: null });
    expect(refund.message).toMatch(/1005 minor units of KWD/);
    expect(fake.requests.length).toBe(before);
  });

  it('never sends a card number to an account without raw card data, and sends it where allowed', async () => {
    const pan = { kind: 'pan' as const, pan: '4242424242424242', expiration: '202812' };
    const before = fake.requests.length;
    // Never sent: nothing charged (settled), never a decline (no issuer saw the card: it must not
    // enter the card's network history nor block it).
    const r = req({ instrument: pan });
    const refused = await adapter().charge(r);
    expect(refused).toMatchObject({ outcome: 'error', settled: true });
    expect(refused.message).toMatch(/tokenized payment methods only/);
    expect(fake.requests.length).toBe(before);
    // Its lookup finds no PaymentIntent and its replay is refused the same way: settled.
    expect(await adapter().lookupCharge(r.idempotencyKey, r)).toMatchObject({ outcome: 'error', settled: true });
    expect(fake.received('POST', '/v1/payment_intents').slice(-1)[0]?.headers['idempotency-key']).not.toBe(
      r.idempotencyKey,
    );
    expect(fake.requests.some((x) => x.rawBody.includes('4242424242424242'))).toBe(false);

    fake.rawCardDataAllowed = true;
    const ok = await adapter({ raw_card_data: true }).charge(req({ instrument: pan }));
    expect(ok.outcome).toBe('approved');
    const [sent] = fake.received('POST', '/v1/payment_intents').slice(-1);
    expect(sent!.body.payment_method_data).toEqual({
      type: 'card',
      card: { number: '4242424242424242', exp_month: '12', exp_year: '2028' },
    });
  });

  it('sends a network token with its cryptogram and ECI', async () => {
    const result = await adapter().charge(
      req({
        instrument: {
          kind: 'token',
          token: '4895370012003478',
          isNetworkToken: true,
          cryptogram: 'AgAAAAAABk4DWZ4C28yUQAAAAAA=',
          expiration: '202911',
          eci: '05',
        },
      }),
    );
    expect(result.outcome).toBe('approved');
    const [sent] = fake.received('POST', '/v1/payment_intents').slice(-1);
    expect(sent!.body.payment_method_data).toEqual({
      type: 'card',
      card: {
        exp_month: '11',
        exp_year: '2029',
        network_token: { number: '4895370012003478', exp_month: '11', exp_year: '2029' },
      },
    });
    expect(sent!.body.payment_method_options).toEqual({
      card: {
        network_token: { cryptogram: 'AgAAAAAABk4DWZ4C28yUQAAAAAA=', electronic_commerce_indicator: '05' },
      },
    });
  });

  describe('the network transaction id (payment_method_options[card][mit_exemption], gated per account at Stripe)', () => {
    const mit = (body: Record<string, unknown>) =>
      (body.payment_method_options as { card?: Record<string, unknown> } | undefined)?.card?.mit_exemption;

    it('an account without "mit_exemption" never sends it: a card with a network transaction id is charged', async () => {
      const r = req({ instrument: { kind: 'token', token: 'cus_Q1|pm_card_mastercard', isNetworkToken: false } });
      expect(await adapter().charge(r)).toMatchObject({ outcome: 'approved', responseCode: '00' });
      const sent = fake
        .received('POST', '/v1/payment_intents')
        .filter((x) => x.headers['idempotency-key'] === r.idempotencyKey);
      expect(sent).toHaveLength(1);
      expect(mit(sent[0]!.body)).toBeUndefined();
      expect(sent[0]!.rawBody).not.toContain('123456789012345');
    });

    it('an account with "mit_exemption": true that Stripe enabled sends it', async () => {
      fake.mitExemptionEnabled = true;
      const r = req();
      expect(await adapter({ mit_exemption: true }).charge(r)).toMatchObject({ outcome: 'approved' });
      const sent = fake
        .received('POST', '/v1/payment_intents')
        .filter((x) => x.headers['idempotency-key'] === r.idempotencyKey);
      expect(sent).toHaveLength(1);
      expect(mit(sent[0]!.body)).toEqual({ network_transaction_id: '123456789012345' });
      // Without a network transaction id there is nothing to send.
      const none = req({ networkTransactionId: null });
      expect(await adapter({ mit_exemption: true }).charge(none)).toMatchObject({ outcome: 'approved' });
      expect(fake.received('POST', '/v1/payment_intents').slice(-1)[0]!.body.payment_method_options).toBeUndefined();
    });

    it('an account with "mit_exemption": true that Stripe did not enable: sent once more without it, same key, approved; warned once', async () => {
      const warnings: [Record<string, unknown>, string][] = [];
      const p = adapter({ mit_exemption: true }, (fields, msg) => warnings.push([fields, msg]));
      for (const r of [req(), req()]) {
        expect(await p.charge(r)).toMatchObject({ outcome: 'approved', responseCode: '00' });
        const sent = fake
          .received('POST', '/v1/payment_intents')
          .filter((x) => x.headers['idempotency-key'] === r.idempotencyKey);
        expect(sent.map((x) => mit(x.body))).toEqual([{ network_transaction_id: '123456789012345' }, undefined]);
        expect(sent[1]!.body).toMatchObject({
          customer: 'cus_Q1',
          payment_method: 'pm_card_visa',
          off_session: 'recurring',
        });
        // Its lookup replays it the same way: Stripe's stored answer, never a second charge.
        expect(await p.lookupCharge(r.idempotencyKey, r)).toMatchObject({ outcome: 'approved' });
        expect(
          fake
            .succeeded()
            .filter((pi) => (pi.metadata as Record<string, string>)[STRIPE_KEY_METADATA] === r.idempotencyKey),
        ).toHaveLength(1);
      }
      expect(warnings).toHaveLength(1);
      expect(warnings[0]![1]).toMatch(/mit_exemption/);
      expect(JSON.stringify(warnings)).not.toContain(fake.secretKey);
    });

    it('the config file takes "mit_exemption" for Stripe accounts only, as true or false', () => {
      const key = 'sk_test_mitConfig1';
      const parsed = parseAccountConfig('stripe', { secret_key: key, mit_exemption: true });
      expect(parsed).toEqual({ processor: 'stripe', config: { secret_key: key, mit_exemption: true } });
      expect(accountView({ ...parsed, divisionNumber: '' })).toMatchObject({
        processor: 'stripe',
        mit_exemption: true,
      });
      expect(() => parseAccountConfig('stripe', { secret_key: key, mit_exemption: 'yes' })).toThrow(/mit_exemption/);
      expect(() => parseAccountConfig('adyen', { api_key: 'k', merchant_account: 'M', mit_exemption: true })).toThrow(
        AccountConfigError,
      );
    });

    it('refuses an api_base or checkout_url with credentials in it: `processor list` prints the URL (decisions §13: secrets never shown)', () => {
      const key = 'sk_test_retain_spec';
      expect(() =>
        parseAccountConfig('stripe', { secret_key: key, api_base: 'https://user:pw@proxy.example' }),
      ).toThrow(/"api_base" must not carry a user name or password/);
      expect(() =>
        parseAccountConfig('adyen', {
          api_key: 'k',
          merchant_account: 'M',
          checkout_url: 'https://u@proxy.example/v71',
        }),
      ).toThrow(/"checkout_url" must not carry/);
      expect(parseAccountConfig('stripe', { secret_key: key, api_base: 'https://proxy.example:8443' }).config).toEqual({
        secret_key: key,
        api_base: 'https://proxy.example:8443',
      });
    });
  });

  it('normalizes a decline: network decline code, network advice code, brand', async () => {
    fake.script('pm_mc_no_retry', {
      decline_code: 'insufficient_funds',
      network_decline_code: '51',
      network_advice_code: '03',
      brand: 'mastercard',
    });
    const result = await adapter().charge(
      req({ instrument: { kind: 'token', token: 'pm_mc_no_retry', isNetworkToken: false } }),
    );
    expect(result).toMatchObject({
      outcome: 'declined',
      responseCode: '51',
      merchantAdviceCode: '03',
      network: 'mastercard',
    });
    expect(result.outcome === 'declined' && result.processorTransactionId).toMatch(/^pi_/);
  });

  it.each([
    // do_not_try_again: never again on this card, unless the network's answer already says so.
    ['do_not_try_again', 'generic_decline', '05', 'visa', '46', 'permanent'],
    ['do_not_try_again', 'insufficient_funds', '51', 'mastercard', '46', 'permanent'],
    ['do_not_try_again', 'do_not_honor', undefined, 'amex', '46', 'permanent'],
    ['do_not_try_again', 'lost_card', '41', 'visa', '41', 'permanent'],
    // confirm_card_data: the data-quality class (not again with the same data; the account updater first).
    ['confirm_card_data', 'generic_decline', '05', 'visa', '6P', 'new-card-data'],
    ['confirm_card_data', 'generic_decline', undefined, 'mastercard', '6P', 'new-card-data'],
    ['confirm_card_data', 'expired_card', '54', 'visa', '54', 'new-card-data'],
    ['confirm_card_data', 'stolen_card', '43', 'visa', '43', 'permanent'],
    // try_again_later: soft, unless the network's own code stops (a decline_code alone does not).
    ['try_again_later', 'transaction_not_allowed', undefined, 'mastercard', '91', null],
    ['try_again_later', 'insufficient_funds', '51', 'visa', '51', null],
    ['try_again_later', 'lost_card', '41', 'visa', '41', 'permanent'],
  ] as const)(
    'advice_code %s with decline_code %s, network code %s (%s): responseCode %s, card block %s',
    async (advice, declineCode, networkCode, brand, code, block) => {
      const pm = `pm_advice_${advice}_${declineCode}_${networkCode ?? 'none'}_${brand}`;
      fake.script(pm, {
        decline_code: declineCode,
        ...(networkCode ? { network_decline_code: networkCode } : {}),
        advice_code: advice,
        brand,
      });
      const result = await adapter().charge(req({ instrument: { kind: 'token', token: pm, isNetworkToken: false } }));
      expect(result).toMatchObject({ outcome: 'declined', responseCode: code });
      if (result.outcome !== 'declined') throw new Error('expected a decline');
      expect(result.message).toContain(advice);
      const c = classifyDecline(result);
      expect(c.cardBlock).toBe(block);
      expect(c.retryable).toBe(block === null);
      if (block === 'new-card-data') expect(updaterMayCure(c)).toBe(true);
    },
  );

  it('maps a decline without a network code from Stripe decline_code (lost_card is 41)', async () => {
    fake.script('pm_lost', { decline_code: 'lost_card', brand: 'visa' });
    const result = await adapter().charge(
      req({ instrument: { kind: 'token', token: 'pm_lost', isNetworkToken: false } }),
    );
    expect(result).toMatchObject({
      outcome: 'declined',
      responseCode: '41',
      merchantAdviceCode: null,
      network: 'visa',
    });
  });

  // Visa's codes (never-recover.ts, the merchant's view of the decline): R0 stop payment order, R1
  // revocation of authorization, R3 revocation of all authorizations.
  it.each([
    ['stop_payment_order', 'R0'],
    ['revocation_of_authorization', 'R1'],
    ['revocation_of_all_authorizations', 'R3'],
  ])('maps decline_code %s without a network code to %s', async (declineCode, code) => {
    const token = `pm_${declineCode}`;
    fake.script(token, { decline_code: declineCode, brand: 'visa' });
    const result = await adapter().charge(req({ instrument: { kind: 'token', token, isNetworkToken: false } }));
    expect(result).toMatchObject({ outcome: 'declined', responseCode: code });
  });

  it.each(['timeout', 'reset', '5xx', 'garbage'] as const)(
    'a %s is an unknown outcome, never a decline',
    async (fault) => {
      // The SDK itself retries a closed connection once, with the same key: reset both.
      fake.failNext(fault, fault === 'reset' ? 2 : 1);
      const r = req();
      const result = await adapter().charge(r);
      expect(result.outcome).toBe('error');
      // Nothing was charged: the lookup says so.
      expect(await adapter().lookupCharge(r.idempotencyKey)).toBeNull();
    },
  );

  it('a 429 is an unknown outcome that carries Retry-After', async () => {
    fake.retryAfterSeconds = 7;
    fake.failNext('429');
    const result = await adapter().charge(req());
    expect(result).toMatchObject({ outcome: 'error', retryAfterMs: 7000 });
  });

  it('a charge that went through but timed out is found by lookup and never charged twice', async () => {
    const r = req();
    fake.failNext('charge-then-timeout');
    const first = await adapter().charge(r);
    expect(first.outcome).toBe('error');
    const found = await adapter().lookupCharge(r.idempotencyKey);
    expect(found).toMatchObject({ outcome: 'approved', responseCode: '00' });
    // Replaying the same attempt (same key) returns Stripe's stored answer, not a second charge.
    const replay = await adapter().lookupCharge(r.idempotencyKey, r);
    expect(replay).toEqual(found);
    const again = await adapter().charge(r);
    expect(again).toEqual(found);
    const mine = fake
      .succeeded()
      .filter((pi) => (pi.metadata as Record<string, string>)[STRIPE_KEY_METADATA] === r.idempotencyKey);
    expect(mine).toHaveLength(1);
    expect(fake.received('POST', '/v1/payment_intents').slice(-1)[0]!.headers['idempotency-key']).toBe(
      r.idempotencyKey,
    );
  });

  it('a charge that timed out is still found when Search fails (unavailable to the account, or down): the replay under the key answers', async () => {
    // Stripe's Search is not available to every account (merchants in India) and can be down; the
    // replay under the attempt's key gives Stripe's stored answer whatever Search does.
    const r = req();
    fake.failNext('charge-then-timeout');
    expect((await adapter().charge(r)).outcome).toBe('error');
    fake.failNext('5xx', 1, { method: 'GET', path: '/v1/payment_intents/search' });
    const found = await adapter().lookupCharge(r.idempotencyKey, r);
    expect(found).toMatchObject({ outcome: 'approved', responseCode: '00' });
    const mine = fake
      .succeeded()
      .filter((pi) => (pi.metadata as Record<string, string>)[STRIPE_KEY_METADATA] === r.idempotencyKey);
    expect(mine).toHaveLength(1);
    // With no original to replay, a failed Search decides nothing.
    fake.failNext('5xx', 1, { method: 'GET', path: '/v1/payment_intents/search' });
    expect(await adapter().lookupCharge(r.idempotencyKey)).toMatchObject({ outcome: 'error' });
  });

  describe('a 500 Stripe saved under the key (the endpoint began executing): replayed for 24 h', () => {
    afterEach(() => {
      fake.searchLagMs = 0;
    });
    const mine = (key: string) =>
      [...fake.intents.values()].filter((s) => (s.pi.metadata as Record<string, string>)[STRIPE_KEY_METADATA] === key);

    it('nothing made: the lookup says the replay was the stored answer (no charge found), and never charges', async () => {
      const r = req();
      fake.failExecuting(1, 'none');
      expect(await adapter().charge(r)).toMatchObject({ outcome: 'error' });
      // The replay gets the saved 500 again, not a charge; the lookup says it is Stripe's stored answer
      // and that no PaymentIntent exists under the key (search and the Customer's list).
      const found = await adapter().lookupCharge(r.idempotencyKey, r);
      expect(found).toMatchObject({ outcome: 'error', storedAnswer: true });
      expect(mine(r.idempotencyKey)).toHaveLength(0);
      const listed = fake.received('GET', '/v1/payment_intents').slice(-1)[0]!;
      expect(listed.query.get('customer')).toBe('cus_Q1');
      // A key-only lookup: nothing under the key.
      expect(await adapter().lookupCharge(r.idempotencyKey)).toBeNull();
    });

    it("charged before the 500, search still lagging: the Customer's PaymentIntents (a list) find the capture", async () => {
      const r = req();
      fake.searchLagMs = 60_000;
      fake.failExecuting(1, 'succeeded');
      expect(await adapter().charge(r)).toMatchObject({ outcome: 'error' });
      expect(await adapter().lookupCharge(r.idempotencyKey)).toBeNull(); // the search lags
      const found = await adapter().lookupCharge(r.idempotencyKey, r);
      expect(found).toMatchObject({ outcome: 'approved', processorTransactionId: mine(r.idempotencyKey)[0]!.pi.id });
      expect(mine(r.idempotencyKey)).toHaveLength(1);
    });

    it("charged before the 500, search lagging, 100 of the Customer's charges since: found on a later page", async () => {
      // The Customer's list is newest first, 100 at most a page (docs.stripe.com/api/pagination): a
      // customer charged for many subscriptions (an attempt is a PaymentIntent) pushes the first
      // request's PaymentIntent off the first page.
      const r = req({ instrument: { kind: 'token', token: 'cus_Many1|pm_card_visa', isNetworkToken: false } });
      fake.searchLagMs = 60_000;
      fake.failExecuting(1, 'succeeded');
      expect(await adapter().charge(r)).toMatchObject({ outcome: 'error' });
      for (let i = 0; i < 100; i++) {
        const other = req({ instrument: r.instrument });
        expect(await adapter().charge(other)).toMatchObject({ outcome: 'approved' });
      }
      const found = await adapter().lookupCharge(r.idempotencyKey, r);
      expect(found).toMatchObject({ outcome: 'approved', processorTransactionId: mine(r.idempotencyKey)[0]!.pi.id });
      expect(mine(r.idempotencyKey)).toHaveLength(1);
    });

    it('a 500 answered before anything ran is not saved: the replay charges, once', async () => {
      const r = req();
      fake.failNext('5xx', 1, { method: 'POST', path: '/v1/payment_intents' });
      const first = await adapter().charge(r);
      expect(first).toMatchObject({ outcome: 'error' });
      expect(first.outcome === 'error' && first.storedAnswer).toBeFalsy();
      expect(await adapter().lookupCharge(r.idempotencyKey, r)).toMatchObject({ outcome: 'approved' });
      expect(mine(r.idempotencyKey)).toHaveLength(1);
    });
  });

  it("a connection reset after the charge: the SDK's retry under the same key gets the stored answer", async () => {
    const r = req();
    fake.failNext('charge-then-reset');
    expect(await adapter().charge(r)).toMatchObject({ outcome: 'approved' });
    const sent = fake.received('POST', '/v1/payment_intents').slice(-2);
    expect(sent.map((s) => s.headers['idempotency-key'])).toEqual([r.idempotencyKey, r.idempotencyKey]);
    expect(await adapter().lookupCharge(r.idempotencyKey, r)).toMatchObject({ outcome: 'approved' });
    expect(
      fake
        .succeeded()
        .filter((pi) => (pi.metadata as Record<string, string>)[STRIPE_KEY_METADATA] === r.idempotencyKey),
    ).toHaveLength(1);
  });

  it('refunds by PaymentIntent with its own Idempotency-Key; a rejected refund fails; an unanswered one throws', async () => {
    const charged = await adapter().charge(req());
    if (charged.outcome !== 'approved') throw new Error('expected approval');
    const refund = await adapter().refund({
      idempotencyKey: 'rfd_1',
      processorTransactionId: charged.processorTransactionId,
      amountMinor: 1999n,
      currency: 'USD',
    });
    expect(refund).toMatchObject({ outcome: 'completed' });
    const [sent] = fake.received('POST', '/v1/refunds').slice(-1);
    expect(sent!.body).toEqual({
      payment_intent: charged.processorTransactionId,
      amount: '1999',
      metadata: { [STRIPE_REFUND_METADATA]: 'rfd_1' },
    });
    // Read first (GET /v1/refunds?payment_intent=…): a resend after the key was pruned finds it there.
    expect(fake.received('GET', '/v1/refunds').slice(-1)[0]!.query.get('payment_intent')).toBe(
      charged.processorTransactionId,
    );
    expect(sent!.headers['idempotency-key']).toBe('rfd_1');

    const again = await adapter().refund({
      idempotencyKey: 'rfd_2',
      processorTransactionId: charged.processorTransactionId,
      amountMinor: 1n,
      currency: 'USD',
    });
    expect(again).toMatchObject({ outcome: 'failed', processorRefundId: null });

    fake.failNext('5xx');
    await expect(
      adapter().refund({
        idempotencyKey: 'rfd_3',
        processorTransactionId: charged.processorTransactionId,
        amountMinor: 1n,
        currency: 'USD',
      }),
    ).rejects.toBeInstanceOf(ProcessorUnavailableError);
  });

  it('a refund sent again after Stripe pruned its idempotency key (24 h) finds the first one: never refunded twice', async () => {
    // docs.stripe.com/api/idempotent_requests: keys may be removed once 24 hours old, and a key reused
    // after that makes a new request. A refund batch resends an unanswered refund the next day.
    const charged = await adapter().charge(req());
    if (charged.outcome !== 'approved') throw new Error('expected approval');
    const partial = {
      idempotencyKey: `rfd_pruned_${Date.now()}`,
      processorTransactionId: charged.processorTransactionId,
      amountMinor: 500n,
      currency: 'USD',
    };
    fake.failNext('charge-then-timeout', 1, { method: 'POST', path: '/v1/refunds' });
    await expect(adapter().refund(partial)).rejects.toBeInstanceOf(ProcessorUnavailableError);
    fake.pruneIdempotency();
    expect(await adapter().refund(partial)).toMatchObject({ outcome: 'completed' });
    expect(fake.refunds.filter((r) => r.payment_intent === charged.processorTransactionId)).toHaveLength(1);

    // The whole amount: sent again, it must not come back `failed` (charge_already_refunded) when it was made.
    const full = { ...partial, idempotencyKey: `rfd_pruned_full_${Date.now()}`, amountMinor: 1499n };
    fake.failNext('charge-then-timeout', 1, { method: 'POST', path: '/v1/refunds' });
    await expect(adapter().refund(full)).rejects.toBeInstanceOf(ProcessorUnavailableError);
    fake.pruneIdempotency();
    expect(await adapter().refund(full)).toMatchObject({ outcome: 'completed' });
    expect(fake.refunds.filter((r) => r.payment_intent === charged.processorTransactionId)).toHaveLength(2);
  });

  it('a refund sent again after its key was pruned finds the first one behind 100 later refunds of the intent', async () => {
    // The intent's refunds are a list, newest first, 100 at most a page: partial refunds made since
    // push the first one off the first page, and a resend that read one page refunded it again.
    const { charged, refund } = await chargedWithRefunds();
    const first = refund('rfd_paged_first', 500n);
    fake.failNext('charge-then-timeout', 1, { method: 'POST', path: '/v1/refunds' });
    await expect(adapter().refund(first)).rejects.toBeInstanceOf(ProcessorUnavailableError);
    for (let i = 0; i < 100; i++) {
      expect(await adapter().refund(refund(`rfd_paged_${i}`, 1n))).toMatchObject({ outcome: 'completed' });
    }
    fake.pruneIdempotency();
    expect(await adapter().refund(first)).toMatchObject({ outcome: 'completed' });
    const made = fake.refunds.filter((r) => r.payment_intent === charged.processorTransactionId);
    expect(made).toHaveLength(101);
    expect(made.filter((r) => r.amount === 500)).toHaveLength(1);
  });

  it('a pending refund is not final: read again by the next batch until it succeeds or fails, never made twice', async () => {
    const { charged, refund } = await chargedWithRefunds();
    const ok = refund('rfd_pending_ok', 500n);
    const bad = refund('rfd_pending_bad', 600n);
    fake.refundStatus = 'pending';
    try {
      await expect(adapter().refund(ok)).rejects.toBeInstanceOf(ProcessorUnavailableError);
      await expect(adapter().refund(bad)).rejects.toBeInstanceOf(ProcessorUnavailableError);
    } finally {
      fake.refundStatus = 'succeeded';
    }
    const made = fake.refunds.filter((r) => r.payment_intent === charged.processorTransactionId);
    expect(made).toHaveLength(2);
    await expect(adapter().refund(ok)).rejects.toBeInstanceOf(ProcessorUnavailableError); // still pending
    fake.settleRefund(made[0]!.id as string, 'succeeded');
    fake.settleRefund(made[1]!.id as string, 'failed');
    expect(await adapter().refund(ok)).toMatchObject({ outcome: 'completed', processorRefundId: made[0]!.id });
    expect(await adapter().refund(bad)).toMatchObject({ outcome: 'failed', processorRefundId: made[1]!.id });
    expect(fake.refunds.filter((r) => r.payment_intent === charged.processorTransactionId)).toHaveLength(2);
  });

  it('a succeeded refund may still fail: read again by its id (GET /v1/refunds/:id), failed with its failure_reason', async () => {
    const charged = await adapter().charge(req());
    if (charged.outcome !== 'approved') throw new Error('expected approval');
    const made = await adapter().refund({
      idempotencyKey: `rfd_later_${Date.now()}`,
      processorTransactionId: charged.processorTransactionId,
      amountMinor: 1999n,
      currency: 'USD',
    });
    expect(made).toMatchObject({ outcome: 'completed', mayStillFail: true });
    if (made.outcome !== 'completed') throw new Error('expected completed');
    const stripe = adapter();
    expect(await stripe.refundStatus!(made.processorRefundId)).toMatchObject({ outcome: 'completed' });
    fake.settleRefund(made.processorRefundId, 'failed', 'expired_or_canceled_card');
    expect(await stripe.refundStatus!(made.processorRefundId)).toEqual({
      outcome: 'failed',
      processorRefundId: made.processorRefundId,
      message: 'Refund failed (expired_or_canceled_card)',
    });
    expect(fake.received('GET', `/v1/refunds/${made.processorRefundId}`)).toHaveLength(2);
    fake.failNext('5xx', 1, { method: 'GET', path: `/v1/refunds/${made.processorRefundId}` });
    await expect(stripe.refundStatus!(made.processorRefundId)).rejects.toBeInstanceOf(ProcessorUnavailableError);
  });

  it('a refund refused for the key or its permissions (401/403) is unanswered, never failed: sent again once fixed', async () => {
    const charged = await adapter().charge(req());
    if (charged.outcome !== 'approved') throw new Error('expected approval');
    const wrong = new StripeProcessor({ secret_key: 'sk_test_rotated', api_base: base }, { timeoutMs: 400 });
    const refund = {
      idempotencyKey: `rfd_401_${Date.now()}`,
      processorTransactionId: charged.processorTransactionId,
      amountMinor: 1999n,
      currency: 'USD',
    };
    await expect(wrong.refund(refund)).rejects.toBeInstanceOf(ProcessorUnavailableError);
    expect(await adapter().refund(refund)).toMatchObject({ outcome: 'completed' });
  });

  it('a rejected API key is an error (nothing charged), never a decline, and not settled (fixed, the lookup answers)', async () => {
    const wrong = new StripeProcessor({ secret_key: 'sk_test_wrong', api_base: base }, { timeoutMs: 400 });
    const result = await wrong.charge(req());
    expect(result).toMatchObject({ outcome: 'error' });
    expect(result.outcome === 'error' && result.settled).toBeFalsy();
  });

  it('a request Stripe refuses as invalid (no such PaymentMethod) is a settled error, by charge and by lookup', async () => {
    fake.missing.add('pm_detached_spec');
    const r = req({ instrument: { kind: 'token', token: 'cus_Q1|pm_detached_spec', isNetworkToken: false } });
    expect(await adapter().charge(r)).toMatchObject({ outcome: 'error', settled: true });
    // The lookup's search finds no PaymentIntent and its replay gets the same refusal.
    expect(await adapter().lookupCharge(r.idempotencyKey, r)).toMatchObject({ outcome: 'error', settled: true });
    // A 5xx stays unsettled: the charge may have gone through.
    fake.failNext('5xx');
    const plain = await adapter().charge(req());
    expect(plain.outcome === 'error' && plain.settled).toBeFalsy();
  });

  it('errors carry no card number or key', async () => {
    fake.rawCardDataAllowed = true;
    fake.failNext('5xx');
    const result = await adapter({ raw_card_data: true }).charge(
      req({ instrument: { kind: 'pan', pan: '4242424242424242' } }),
    );
    expect(JSON.stringify(result)).not.toMatch(/4242424242424242|sk_test/);
  });
});
