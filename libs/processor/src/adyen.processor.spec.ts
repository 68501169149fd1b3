import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { classifyDecline, LEGACY_POLICY_VERSION, planNextAttempt, POLICY_VERSION } from '@retain/domain';
import { AdyenProcessor } from './adyen.processor';
import type { ChargeRequest } from './processor.port';
import { ProcessorUnavailableError } from './processor.port';
import { AdyenFake, adyenNotification } from '../test/adyen-fake';
import { AdyenNotificationError, adyenItemSigned, adyenNotificationItems } from './adyen-notifications';
import { AccountConfigError, accountView, parseAccountConfig } from './processor-accounts';

const fake = new AdyenFake();
let base = '';
const adapter = (over: { raw_card_data?: boolean; hmac_key?: string } = {}): AdyenProcessor =>
  new AdyenProcessor(
    { api_key: fake.apiKey, merchant_account: fake.merchantAccount, checkout_url: `${base}/v71`, ...over },
    { timeoutMs: 400, trustedCa: fake.ca! },
  );

let seq = 0;
const req = (over: Partial<ChargeRequest> = {}): ChargeRequest => ({
  idempotencyKey: `att_adyen_${++seq}_${Date.now()}`,
  attemptNumber: 1,
  amountMinor: 1999n,
  currency: 'EUR',
  instrument: { kind: 'token', token: 'shopper-42|8415718415172200', isNetworkToken: false },
  originalResponseCode: '51',
  divisionNumber: 'd1',
  networkTransactionId: 'MCCABC1230101',
  at: new Date('2026-03-13T09:00:00Z'),
  ...over,
});
const last = (path: RegExp) => fake.received('POST', path).slice(-1)[0]!;

beforeAll(async () => {
  base = await fake.start();
});
afterAll(() => fake.close());
afterEach(() => {
  fake.rawCardDataAllowed = false;
  fake.captureDelay = 'immediate';
});

describe('Adyen adapter against the Adyen Checkout wire fake', () => {
  it('charges a stored payment method as ContAuth / Subscription with networkPaymentReference and Idempotency-Key', async () => {
    const r = req();
    const result = await adapter().charge(r);
    expect(result).toMatchObject({ outcome: 'approved', responseCode: '00' });
    const sent = last(/^\/v71\/payments$/);
    expect(sent.headers['x-api-key']).toBe(fake.apiKey);
    expect(sent.headers['idempotency-key']).toBe(r.idempotencyKey);
    expect(sent.headers['content-type']).toMatch(/^application\/json/);
    expect(sent.body).toEqual({
      merchantAccount: fake.merchantAccount,
      amount: { value: 1999, currency: 'EUR' },
      reference: r.idempotencyKey,
      shopperInteraction: 'ContAuth',
      recurringProcessingModel: 'Subscription',
      captureDelayHours: 0,
      shopperReference: 'shopper-42',
      paymentMethod: {
        type: 'scheme',
        storedPaymentMethodId: '8415718415172200',
        networkPaymentReference: 'MCCABC1230101',
      },
    });
    expect(result.outcome === 'approved' && result.processorTransactionId).toMatch(/^[A-Z0-9]{16}$/);
  });

  it('an Authorised charge is captured at once on a merchant account set to manual or delayed capture', async () => {
    // Retain records an Authorised charge as Captured: the money must be taken, not only reserved.
    for (const setting of ['manual', 72] as const) {
      fake.captureDelay = setting;
      const result = await adapter().charge(req());
      expect(result.outcome).toBe('approved');
      expect(last(/^\/v71\/payments$/).body.captureDelayHours).toBe(0);
      const id = result.outcome === 'approved' ? result.processorTransactionId : '';
      expect(fake.payments.get(id)?.captured, `capture setting ${setting}`).toBe(true);
    }
  });

  it('checkToken: a stored payment method needs its shopperReference; a bare number only as a network token', () => {
    const p = adapter();
    expect(p.checkToken('shopper-42|8415718415172200')).toEqual({ ok: true });
    expect(p.checkToken('4895370012003478', { isNetworkToken: true })).toEqual({ ok: true });
    // Adyen charges a storedPaymentMethodId only with the shopperReference it was stored for.
    expect(p.checkToken('8415718415172200').ok).toBe(false);
    expect(p.checkToken('8415718415172200', { isNetworkToken: false }).ok).toBe(false);
    expect(p.checkToken('ABCDEFGH12345678').ok).toBe(false);
    // A network token is charged as its number: not a shopperReference|id.
    expect(p.checkToken('shopper-42|8415718415172200', { isNetworkToken: true }).ok).toBe(false);
  });

  it('sends amounts in minor units (JPY 0 decimals, KWD 3)', async () => {
    await adapter().charge(req({ amountMinor: 500n, currency: 'JPY' }));
    const jpy = last(/\/payments$/);
    await adapter().charge(req({ amountMinor: 10130n, currency: 'KWD' }));
    const kwd = last(/\/payments$/);
    expect([jpy.body.amount, kwd.body.amount]).toEqual([
      { value: 500, currency: 'JPY' },
      { value: 10130, currency: 'KWD' },
    ]);
  });

  it("sends Adyen's own decimals where they differ from ISO 4217 (CLP, ISK two; CVE, IDR none), charges and refunds", async () => {
    // docs.adyen.com/development-resources/currency-codes: "For CLP, CVE, IDR, and ISK the standard
    // has a different number of decimals ... the decimals in the table on this page are leading."
    const values: unknown[] = [];
    for (const [amountMinor, currency] of [
      [5000n, 'CLP'],
      [1500n, 'ISK'],
      [10000n, 'CVE'],
      [1500000n, 'IDR'],
    ] as const) {
      const r = await adapter().charge(req({ amountMinor, currency }));
      expect(r.outcome).toBe('approved');
      values.push(last(/\/payments$/).body.amount);
    }
    expect(values).toEqual([
      { value: 500000, currency: 'CLP' },
      { value: 150000, currency: 'ISK' },
      { value: 100, currency: 'CVE' },
      { value: 15000, currency: 'IDR' },
    ]);
    const charged = await adapter().charge(req({ amountMinor: 2000000n, currency: 'IDR' }));
    if (charged.outcome !== 'approved') throw new Error('expected approval');
    const refund = await adapter().refund({
      idempotencyKey: `rfd_idr_${Date.now()}`,
      processorTransactionId: charged.processorTransactionId,
      amountMinor: 500000n,
      currency: 'IDR',
    });
    expect(refund).toMatchObject({ outcome: 'completed' });
    expect(last(/\/refunds$/).body.amount).toEqual({ value: 5000, currency: 'IDR' });
    expect(adapter().limits.amountFits?.(1500050n, 'IDR')).toBe(false);
  });

  it('never sends card data to an account without raw card data; sends the card fields where allowed', async () => {
    const pan = { kind: 'pan' as const, pan: '4111111111111111', expiration: '202812' };
    const before = fake.requests.length;
    // Never sent: nothing charged (settled), never a decline (no issuer saw the card: it must not
    // enter the card's network history nor block it).
    const r = req({ instrument: pan });
    const refused = await adapter().charge(r);
    expect(refused).toMatchObject({ outcome: 'error', settled: true });
    expect(refused.message).toMatch(/stored payment methods only/);
    expect(await adapter().lookupCharge(r.idempotencyKey, r)).toMatchObject({ outcome: 'error', settled: true });
    expect(fake.requests.length).toBe(before);

    fake.rawCardDataAllowed = true;
    expect((await adapter({ raw_card_data: true }).charge(req({ instrument: pan }))).outcome).toBe('approved');
    expect(last(/\/payments$/).body.paymentMethod).toEqual({
      type: 'scheme',
      number: '4111111111111111',
      expiryMonth: '12',
      expiryYear: '2028',
      networkPaymentReference: 'MCCABC1230101',
    });
  });

  it('sends a network token with its cryptogram (TAVV) and ECI in mpiData', async () => {
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
        networkTransactionId: null,
      }),
    );
    expect(result.outcome).toBe('approved');
    const sent = last(/\/payments$/);
    expect(sent.body.paymentMethod).toEqual({
      type: 'networkToken',
      number: '4895370012003478',
      expiryMonth: '11',
      expiryYear: '2029',
    });
    expect(sent.body.mpiData).toEqual({
      tokenAuthenticationVerificationValue: 'AgAAAAAABk4DWZ4C28yUQAAAAAA=',
      eci: '05',
    });
  });

  it('normalizes a refusal: raw network code and Mastercard advice code from additionalData', async () => {
    fake.script('MCNORETRY0000001', {
      refusalReason: 'Not enough balance',
      refusalReasonCode: '12',
      refusalReasonRaw: '51 : Insufficient funds',
      merchantAdviceCode: '03: Do not try again',
      brand: 'mc',
    });
    const result = await adapter().charge(
      req({ instrument: { kind: 'token', token: 'shopper-42|MCNORETRY0000001', isNetworkToken: false } }),
    );
    expect(result).toMatchObject({
      outcome: 'declined',
      responseCode: '51',
      merchantAdviceCode: '03',
      network: 'mastercard',
    });
  });

  it.each([
    ...['mc', 'mcdebit', 'mccredit', 'mcprepaid', 'mc_applepay', 'mc_googlepay', 'mcmaestro', 'maestro'].map(
      (b) => [b, 'mastercard'] as const,
    ),
    ...['visa', 'visadebit', 'visa_applepay', 'electron', 'vpay'].map((b) => [b, 'visa'] as const),
    ...['amex', 'amex_applepay', 'amexcorporate'].map((b) => [b, 'amex'] as const),
    ...['discover', 'discover_googlepay'].map((b) => [b, 'discover'] as const),
    ...['jcb', 'diners', 'cup'].map((b) => [b, 'other'] as const),
  ])('a refusal of brand %s is read as network %s: its rules apply', async (brand, network) => {
    // docs.adyen.com/development-resources/paymentmethodvariant; Adyen: a rule for `mc` applies to
    // "all payment instruments under mc, such as mcbusinessdebit and mcdebit".
    const id = `BRAND${brand.replace(/_/g, '').toUpperCase()}00000000`.slice(0, 16);
    fake.script(id, {
      refusalReason: 'Refused',
      refusalReasonCode: '2',
      refusalReasonRaw: '05 : Do not honor',
      merchantAdviceCode: '03: Do not try again',
      brand,
    });
    const result = await adapter().charge(
      req({ instrument: { kind: 'token', token: `shopper-42|${id}`, isNetworkToken: false } }),
    );
    expect(result).toMatchObject({ outcome: 'declined', network });
    if (result.outcome !== 'declined') throw new Error('expected a decline');
    // MAC 03 stops a Mastercard card for good; it means nothing on another network.
    expect(classifyDecline(result).cardBlock).toBe(network === 'mastercard' ? 'permanent' : null);
  });

  it.each([
    ['7 : Pickup card, special condition', '07'],
    ['4 : Capture card', '04'],
  ])('reads a raw response without its leading zero (%s) as %s: Visa category 1, never retried', async (raw, code) => {
    const id = `PICKUP${code}000000001`;
    fake.script(id, { refusalReason: 'Refused', refusalReasonCode: '2', refusalReasonRaw: raw, brand: 'visa' });
    const result = await adapter().charge(
      req({ instrument: { kind: 'token', token: `shopper-42|${id}`, isNetworkToken: false } }),
    );
    expect(result).toMatchObject({ outcome: 'declined', responseCode: code, network: 'visa' });
    if (result.outcome !== 'declined') throw new Error('expected a decline');
    const c = classifyDecline({ network: result.network, responseCode: result.responseCode }, req().at);
    expect(c).toMatchObject({ retryable: false, visaCategory: 1, cardBlock: 'permanent' });
  });

  it('falls back on refusalReasonCode when there is no raw response (6 Expired Card is 54)', async () => {
    fake.script('EXPIRED000000001', { refusalReason: 'Expired Card', refusalReasonCode: '6', brand: 'visa' });
    const result = await adapter().charge(
      req({ instrument: { kind: 'token', token: 'shopper-42|EXPIRED000000001', isNetworkToken: false } }),
    );
    expect(result).toMatchObject({
      outcome: 'declined',
      responseCode: '54',
      merchantAdviceCode: null,
      network: 'visa',
    });
  });

  it('a Blocked Card refusal (5) without a raw response is a hard decline: the card is never charged again', async () => {
    fake.script('BLOCKED000000001', { refusalReason: 'Blocked Card', refusalReasonCode: '5', brand: 'visa' });
    const result = await adapter().charge(
      req({ instrument: { kind: 'token', token: 'shopper-42|BLOCKED000000001', isNetworkToken: false } }),
    );
    expect(result).toMatchObject({ outcome: 'declined', network: 'visa' });
    if (result.outcome !== 'declined') throw new Error('expected a decline');
    for (const network of ['visa', 'mastercard', 'amex'] as const) {
      expect(classifyDecline({ network, responseCode: result.responseCode }, req().at)).toMatchObject({
        retryable: false,
        cardBlock: 'permanent',
      });
    }
  });

  it('a refusal Adyen blocked to prevent excessive retry fees (46) is not retried soon: few attempts, days apart', async () => {
    fake.script('ERPSBLOCK0000001', {
      refusalReason: 'Transaction blocked by Adyen to prevent excessive retry fees',
      refusalReasonCode: '46',
      brand: 'mc',
    });
    const r = req({ instrument: { kind: 'token', token: 'shopper-42|ERPSBLOCK0000001', isNetworkToken: false } });
    const result = await adapter().charge(r);
    if (result.outcome !== 'declined') throw new Error('expected a decline');
    expect(result.network).toBe('mastercard');
    const now = r.at;
    for (const policy of [
      { version: POLICY_VERSION, learning: false },
      { version: LEGACY_POLICY_VERSION, learning: false },
    ]) {
      const plan = planNextAttempt({
        attemptsMade: 1,
        startedAt: new Date(now.getTime() - 86_400_000),
        now,
        lastDecline: { responseCode: result.responseCode, merchantAdviceCode: result.merchantAdviceCode, at: now },
        originalResponseCode: '51',
        network: result.network,
        amountMinor: r.amountMinor,
        cardHistory: [],
        policy,
      });
      if (plan.kind === 'retry') expect(plan.at.getTime() - now.getTime()).toBeGreaterThanOrEqual(3 * 86_400_000);
    }
  });

  it.each(['timeout', 'reset', '5xx', 'garbage'] as const)(
    'a %s is an unknown outcome, never a decline',
    async (fault) => {
      fake.failNext(fault);
      const result = await adapter().charge(req());
      expect(result.outcome).toBe('error');
    },
  );

  it('a rejected API key is an error, never a decline', async () => {
    const wrong = new AdyenProcessor(
      { api_key: 'AQE_wrong', merchant_account: fake.merchantAccount, checkout_url: `${base}/v71` },
      { timeoutMs: 400, trustedCa: fake.ca! },
    );
    expect(await wrong.charge(req())).toMatchObject({ outcome: 'error' });
  });

  it('a request Adyen refuses (400, 403 not allowed or invalid merchant account, 422 validation) is a settled error: nothing charged, by charge and by replay', async () => {
    const refused = async (processor: AdyenProcessor, r: ChargeRequest, errorCode: string) => {
      const result = await processor.charge(r);
      expect(result).toMatchObject({ outcome: 'error', settled: true });
      expect(result.message).toContain(errorCode);
      // The replay under the same key (the adapter's lookup) gets Adyen's same answer.
      expect(await processor.lookupCharge(r.idempotencyKey, r)).toMatchObject({ outcome: 'error', settled: true });
      expect(
        fake.payments.size === 0 || [...fake.payments.values()].every((p) => p.body.reference !== r.idempotencyKey),
      ).toBe(true);
      // Never the card number nor the API key in what the worker records.
      expect(JSON.stringify(result)).not.toContain('4111111111111111');
      expect(JSON.stringify(result)).not.toContain(fake.apiKey);
    };
    // 422: a stored payment method without the shopperReference it was stored for.
    await refused(
      adapter(),
      req({ instrument: { kind: 'token', token: '8415718415172200', isNetworkToken: false } }),
      '422',
    );
    // 403 010: raw card fields from a credential without the role to send them.
    await refused(
      adapter({ raw_card_data: true }),
      req({ instrument: { kind: 'pan', pan: '4111111111111111', expiration: '202812' } }),
      '010',
    );
    // 403 901: a merchant account the credential may not use.
    const otherAccount = new AdyenProcessor(
      { api_key: fake.apiKey, merchant_account: 'NotOursECOM', checkout_url: `${base}/v71` },
      { timeoutMs: 400, trustedCa: fake.ca! },
    );
    await refused(otherAccount, req(), '901');
    // 400: a request Adyen cannot read.
    const r = req();
    fake.rejectNext({ status: 400, errorCode: '000', message: 'Unable to parse message', errorType: 'validation' });
    await refused(adapter(), r, '400');
  });

  it('no answer for the key yet stays unsettled: 401, 404, 422 704 (the key in progress), 429, 5xx', async () => {
    const unsettled = (result: Awaited<ReturnType<AdyenProcessor['charge']>>) => {
      expect(result.outcome).toBe('error');
      expect(result.outcome === 'error' && result.settled).toBeFalsy();
    };
    const wrongKey = new AdyenProcessor(
      { api_key: 'AQE_wrong', merchant_account: fake.merchantAccount, checkout_url: `${base}/v71` },
      { timeoutMs: 400, trustedCa: fake.ca! },
    );
    unsettled(await wrongKey.charge(req()));
    const wrongUrl = new AdyenProcessor(
      { api_key: fake.apiKey, merchant_account: fake.merchantAccount, checkout_url: `${base}/v71/nowhere` },
      { timeoutMs: 400, trustedCa: fake.ca! },
    );
    unsettled(await wrongUrl.charge(req()));
    const inProgress = req();
    fake.markInProgress(inProgress.idempotencyKey);
    unsettled(await adapter().charge(inProgress));
    fake.finishInProgress(inProgress.idempotencyKey);
    expect(await adapter().charge(inProgress)).toMatchObject({ outcome: 'approved' });
    fake.failNext('429');
    unsettled(await adapter().charge(req()));
    fake.failNext('5xx');
    unsettled(await adapter().charge(req()));
  });

  it('a 429 is an unknown outcome that carries Retry-After', async () => {
    fake.retryAfterSeconds = 3;
    fake.failNext('429');
    expect(await adapter().charge(req())).toMatchObject({ outcome: 'error', retryAfterMs: 3000 });
  });

  it('a charge that went through but timed out is found by replay under the same key, never charged twice', async () => {
    const r = req();
    fake.failNext('charge-then-timeout');
    expect((await adapter().charge(r)).outcome).toBe('error');
    // Without the original request Adyen cannot be asked: still unknown.
    expect(await adapter().lookupCharge(r.idempotencyKey)).toMatchObject({ outcome: 'error' });
    const found = await adapter().lookupCharge(r.idempotencyKey, r);
    expect(found).toMatchObject({ outcome: 'approved' });
    expect(fake.authorised().filter((p) => p.body.reference === r.idempotencyKey)).toHaveLength(1);
    const sent = fake.received('POST', /\/payments$/).filter((x) => x.headers['idempotency-key'] === r.idempotencyKey);
    expect(sent).toHaveLength(2);
  });

  it('a refund whose key Adyen is still processing (422, 704) is unanswered, never failed: sent again later', async () => {
    const charged = await adapter().charge(req());
    if (charged.outcome !== 'approved') throw new Error('expected approval');
    const refund = () =>
      adapter().refund({
        idempotencyKey: 'rfd_inprogress_1',
        processorTransactionId: charged.processorTransactionId,
        amountMinor: 1999n,
        currency: 'EUR',
      });
    // Another batch's request with the same key is still in flight at Adyen.
    fake.markInProgress('rfd_inprogress_1');
    await expect(refund()).rejects.toBeInstanceOf(ProcessorUnavailableError);
    fake.finishInProgress('rfd_inprogress_1');
    // Asked again once it is done: answered.
    expect(await refund()).toMatchObject({ outcome: 'completed' });
  });

  it('a refund refused for the API key (401) or its permissions (403) is unanswered, never failed: sent again once fixed', async () => {
    const charged = await adapter().charge(req());
    if (charged.outcome !== 'approved') throw new Error('expected approval');
    const wrong = new AdyenProcessor(
      { api_key: 'AQE_rotated', merchant_account: fake.merchantAccount, checkout_url: `${base}/v71` },
      { timeoutMs: 400, trustedCa: fake.ca! },
    );
    const refund = {
      idempotencyKey: `rfd_401_${Date.now()}`,
      processorTransactionId: charged.processorTransactionId,
      amountMinor: 1999n,
      currency: 'EUR',
    };
    await expect(wrong.refund(refund)).rejects.toBeInstanceOf(ProcessorUnavailableError);
    expect(await adapter().refund(refund)).toMatchObject({ outcome: 'completed' });
  });

  it('a refund answered 404 (a wrong checkout_url) is unanswered, never failed: sent again once the account is fixed', async () => {
    const charged = await adapter().charge(req());
    if (charged.outcome !== 'approved') throw new Error('expected approval');
    // As a charge answered 404 is no decision (chargeFailure), a refund's is no refusal of the refund.
    const misrouted = new AdyenProcessor(
      { api_key: fake.apiKey, merchant_account: fake.merchantAccount, checkout_url: `${base}/checkout/v71` },
      { timeoutMs: 400, trustedCa: fake.ca! },
    );
    const refund = {
      idempotencyKey: `rfd_404_${Date.now()}`,
      processorTransactionId: charged.processorTransactionId,
      amountMinor: 1999n,
      currency: 'EUR',
    };
    await expect(misrouted.refund(refund)).rejects.toBeInstanceOf(ProcessorUnavailableError);
    expect(await adapter().refund(refund)).toMatchObject({ outcome: 'completed' });
  });

  it('refunds by pspReference; an invalid one fails; an unanswered one throws', async () => {
    const charged = await adapter().charge(req());
    if (charged.outcome !== 'approved') throw new Error('expected approval');
    const refund = await adapter().refund({
      idempotencyKey: 'rfd_a1',
      processorTransactionId: charged.processorTransactionId,
      amountMinor: 1999n,
      currency: 'EUR',
    });
    expect(refund).toMatchObject({ outcome: 'completed' });
    const sent = last(/\/refunds$/);
    expect(sent.path).toBe(`/v71/payments/${charged.processorTransactionId}/refunds`);
    expect(sent.body).toEqual({
      merchantAccount: fake.merchantAccount,
      amount: { value: 1999, currency: 'EUR' },
      reference: 'rfd_a1',
    });
    expect(sent.headers['idempotency-key']).toBe('rfd_a1');

    expect(
      await adapter().refund({
        idempotencyKey: 'rfd_a2',
        processorTransactionId: 'NOSUCHPSP0000000',
        amountMinor: 1n,
        currency: 'EUR',
      }),
    ).toMatchObject({ outcome: 'failed', processorRefundId: null });

    fake.failNext('5xx');
    await expect(
      adapter().refund({
        idempotencyKey: 'rfd_a3',
        processorTransactionId: charged.processorTransactionId,
        amountMinor: 1n,
        currency: 'EUR',
      }),
    ).rejects.toBeInstanceOf(ProcessorUnavailableError);
  });

  it('a refund answered received on an account with an hmac_key is pending (its REFUND notification settles it); without one, completed', async () => {
    const charged = await adapter().charge(req());
    if (charged.outcome !== 'approved') throw new Error('expected approval');
    const refund = { processorTransactionId: charged.processorTransactionId, amountMinor: 100n, currency: 'EUR' };
    const withKey = await adapter({ hmac_key: 'AB'.repeat(32) }).refund({ ...refund, idempotencyKey: 'rfd_h1' });
    expect(withKey).toEqual({
      outcome: 'pending',
      processorRefundId: fake.refunds.at(-1)!['pspReference'],
      message: 'Refund received',
    });
    expect(await adapter().refund({ ...refund, idempotencyKey: 'rfd_h2' })).toMatchObject({ outcome: 'completed' });
  });
});

describe('Adyen account config: hmac_key', () => {
  const base = { api_key: 'k', merchant_account: 'M' };

  it('accepts a hex key, refuses anything else, and never shows it', () => {
    const key = '44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056';
    const parsed = parseAccountConfig('adyen', { ...base, hmac_key: key });
    expect(parsed.config).toMatchObject({ hmac_key: key });
    for (const bad of ['xyz', 'ABC', '', 42, 'AB'.repeat(8) + ' ']) {
      expect(() => parseAccountConfig('adyen', { ...base, hmac_key: bad })).toThrow(AccountConfigError);
      try {
        parseAccountConfig('adyen', { ...base, hmac_key: bad });
      } catch (e) {
        expect((e as Error).message).toContain('"hmac_key"');
        if (typeof bad === 'string' && bad) expect((e as Error).message).not.toContain(bad);
      }
    }
    expect(() => parseAccountConfig('stripe', { secret_key: 'sk_test_x1', hmac_key: key })).toThrow(/unknown field/);
    expect(JSON.stringify(accountView({ ...parsed, divisionNumber: '' }))).not.toContain(key);
  });
});

describe('Adyen notification items', () => {
  const key = '44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056';
  const body = adyenNotification('RetainTestECOM', key, [
    {
      eventCode: 'REFUND',
      success: true,
      pspReference: 'QFQTPCQ8HXSKGK82',
      originalReference: 'LDXGDWQFC3CC8P65',
      merchantReference: 'rfd-1',
      amount: { value: 1999, currency: 'EUR' },
    },
    {
      eventCode: 'AUTHORISATION',
      success: false,
      pspReference: 'JDD6LKT8MPLVLV82',
      merchantReference: 'att-1',
      amount: { value: 500, currency: 'EUR' },
      reason: 'Refused',
    },
  ]);

  it("verifies the signature Adyen's documentation describes (with and without originalReference) with the SDK's HmacValidator", () => {
    const items = adyenNotificationItems(body);
    expect(items).toHaveLength(2);
    for (const item of items) {
      expect(adyenItemSigned(item, key)).toBe(true);
      expect(adyenItemSigned(item, key.toLowerCase())).toBe(true);
      expect(adyenItemSigned(item, 'AB'.repeat(32))).toBe(false);
      expect(adyenItemSigned({ ...item, amount: { ...item.amount, value: item.amount.value + 1 } }, key)).toBe(false);
      expect(adyenItemSigned({ ...item, additionalData: {} }, key)).toBe(false);
    }
  });

  it('refuses a body that is not a list of NotificationRequestItems', () => {
    for (const bad of [
      null,
      [],
      {},
      { notificationItems: [] },
      { notificationItems: [{ NotificationRequestItem: {} }] },
    ]) {
      expect(() => adyenNotificationItems(bad)).toThrow(AdyenNotificationError);
    }
  });
});
