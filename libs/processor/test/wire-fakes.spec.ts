import https from 'node:https';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { leadingCode, retryAfterMs } from '../src/wire';
import { AdyenFake } from './adyen-fake';
import { StripeFake } from './stripe-fake';

/** The fakes' own wire behaviour, as the processors document it, spoken to without the SDKs. */
describe('Stripe wire fake', () => {
  const fake = new StripeFake('sk_test_wire');
  let base = '';
  beforeAll(async () => {
    base = await fake.start();
  });
  afterAll(() => fake.close());
  const post = (path: string, form: string, key?: string, auth = `Bearer ${fake.secretKey}`) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: {
        authorization: auth,
        'content-type': 'application/x-www-form-urlencoded',
        ...(key ? { 'idempotency-key': key } : {}),
      },
      body: form,
    });

  it('replays a key with the same status and body, refuses it with other parameters', async () => {
    const form = 'amount=1000&currency=usd&confirm=true&off_session=true&payment_method=pm_card_chargeDeclined';
    const first = await post('/v1/payment_intents', form, 'k-replay');
    const again = await post('/v1/payment_intents', form, 'k-replay');
    expect(first.status).toBe(402);
    expect(again.status).toBe(402);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    const [a, b] = [(await first.json()) as any, (await again.json()) as any];
    expect(b).toEqual(a);
    expect(a.error).toMatchObject({ type: 'card_error', code: 'card_declined', decline_code: 'generic_decline' });
    const other = await post('/v1/payment_intents', form.replace('1000', '1001'), 'k-replay');
    expect(other.status).toBe(400);
    expect(((await other.json()) as any).error.type).toBe('idempotency_error');
  });

  it('rejects a wrong key with 401 and raw card numbers unless the account may send them', async () => {
    expect((await post('/v1/payment_intents', 'amount=1&currency=usd', undefined, 'Bearer sk_test_wrong')).status).toBe(
      401,
    );
    const raw = await post(
      '/v1/payment_intents',
      'amount=1000&currency=usd&confirm=true&payment_method_data[type]=card&payment_method_data[card][number]=4242424242424242',
    );
    expect(raw.status).toBe(400);
  });

  it('takes off_session as Stripe does (true, one_off, recurring) and records it; refuses other values', async () => {
    const form = 'amount=700&currency=usd&confirm=true&payment_method=pm_card_visa&off_session=';
    for (const v of ['true', 'one_off', 'recurring']) {
      const res = await post('/v1/payment_intents', form + v, `k-off-${v}`);
      expect(res.status, v).toBe(200);
      const pi = (await res.json()) as any;
      expect(fake.intents.get(pi.id)!.offSession).toBe(v);
    }
    const bad = await post('/v1/payment_intents', `${form}weekly`, 'k-off-weekly');
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as any).error).toMatchObject({ type: 'invalid_request_error', param: 'off_session' });
  });

  it('refuses the gated mit_exemption parameter unless the account has it, without saving the refusal under the key', async () => {
    const form = 'amount=800&currency=usd&confirm=true&off_session=recurring&payment_method=pm_card_visa';
    const ntid = '&payment_method_options[card][mit_exemption][network_transaction_id]=123456789012345';
    const refused = await post('/v1/payment_intents', form + ntid, 'k-mit');
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as any).error).toMatchObject({
      type: 'invalid_request_error',
      code: 'parameter_unknown',
      param: 'payment_method_options[card][mit_exemption]',
      message: 'Received unknown parameter: payment_method_options[card][mit_exemption]',
    });
    // A request that failed validation leaves no result under its key: the same key without it is charged.
    const charged = await post('/v1/payment_intents', form, 'k-mit');
    expect(charged.status).toBe(200);
    expect(charged.headers.get('idempotent-replayed')).toBeNull();
    fake.mitExemptionEnabled = true;
    try {
      expect((await post('/v1/payment_intents', form + ntid, 'k-mit-on')).status).toBe(200);
    } finally {
      fake.mitExemptionEnabled = false;
    }
  });

  it('knows the customer of a PaymentMethod: GET /v1/payment_methods/{id}, attach, and refuses it without its customer', async () => {
    const get = (id: string) =>
      fetch(`${base}/v1/payment_methods/${id}`, { headers: { authorization: `Bearer ${fake.secretKey}` } });
    const loose = (await (await get('pm_wireAttach')).json()) as any;
    expect(loose).toMatchObject({ id: 'pm_wireAttach', object: 'payment_method', type: 'card', customer: null });
    expect(loose.card).toMatchObject({
      brand: expect.any(String),
      last4: expect.stringMatching(/^\d{4}$/),
      exp_month: 12,
      exp_year: expect.any(Number),
    });
    const attached = await post('/v1/payment_methods/pm_wireAttach/attach', 'customer=cus_Wire1');
    expect(attached.status).toBe(200);
    expect(((await attached.json()) as any).customer).toBe('cus_Wire1');
    expect(((await (await get('pm_wireAttach')).json()) as any).customer).toBe('cus_Wire1');

    const form = 'amount=900&currency=usd&confirm=true&off_session=recurring&payment_method=pm_wireAttach';
    const refused = await post('/v1/payment_intents', form, 'k-attached');
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as any).error).toMatchObject({
      type: 'invalid_request_error',
      message:
        'The `payment_method` parameter supplied pm_wireAttach belongs to the Customer cus_Wire1. Please include the Customer in the `customer` parameter on the PaymentIntent.',
    });
    expect((await post('/v1/payment_intents', `${form}&customer=cus_Wire1`, 'k-attached')).status).toBe(200);

    fake.missing.add('pm_wireGone');
    const gone = await get('pm_wireGone');
    expect(gone.status).toBe(404);
    expect(((await gone.json()) as any).error).toMatchObject({
      type: 'invalid_request_error',
      code: 'resource_missing',
    });
  });

  it('finds PaymentIntents by metadata search', async () => {
    await post(
      '/v1/payment_intents',
      'amount=500&currency=eur&confirm=true&payment_method=pm_card_visa&metadata[retain_attempt]=v-1',
      'k-s',
    );
    const res = await fetch(
      `${base}/v1/payment_intents/search?query=${encodeURIComponent("metadata['retain_attempt']:'v-1'")}`,
      {
        headers: { authorization: `Bearer ${fake.secretKey}` },
      },
    );
    const body = (await res.json()) as any;
    expect(body).toMatchObject({ object: 'search_result', has_more: false });
    expect(body.data).toHaveLength(1);
    expect(body.data[0]).toMatchObject({ amount: 500, currency: 'eur', status: 'succeeded' });
  });
});

describe('Adyen wire fake', () => {
  const fake = new AdyenFake('AQE_wire', 'WireECOM');
  let base = '';
  beforeAll(async () => {
    base = await fake.start();
  });
  afterAll(() => fake.close());
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    new Promise<{ status: number; headers: Record<string, unknown>; body: any }>((resolve, reject) => {
      const req = https.request(
        `${base}${path}`,
        {
          method: 'POST',
          ca: fake.ca!,
          headers: { 'content-type': 'application/json', 'x-api-key': fake.apiKey, ...headers },
        },
        (res) => {
          let text = '';
          res.on('data', (c) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: JSON.parse(text) }));
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify(body));
    });
  const payment = {
    merchantAccount: 'WireECOM',
    amount: { value: 1000, currency: 'EUR' },
    reference: 'ref-1',
    paymentMethod: { type: 'scheme', storedPaymentMethodId: 'ABCDEFGH12345678' },
    shopperReference: 'shopper',
    shopperInteraction: 'ContAuth',
    recurringProcessingModel: 'Subscription',
  };

  it('answers a key it has seen with the first response, not processing it again', async () => {
    const first = await post('/v71/payments', payment, { 'idempotency-key': 'ak-1' });
    const again = await post(
      '/v71/payments',
      { ...payment, amount: { value: 1, currency: 'EUR' } },
      { 'idempotency-key': 'ak-1' },
    );
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ resultCode: 'Authorised', merchantReference: 'ref-1' });
    expect(again.body).toEqual(first.body);
    expect(again.headers['idempotency-key']).toBe('ak-1');
    expect(fake.authorised().filter((p) => p.body.reference === 'ref-1')).toHaveLength(1);
  });

  it('errors as {status, errorCode, message, errorType}', async () => {
    const bad = await post('/v71/payments', payment, { 'x-api-key': 'nope' });
    expect(bad.status).toBe(401);
    expect(bad.body).toMatchObject({ status: 401, errorType: 'security' });
    const noShopper = await post('/v71/payments', { ...payment, shopperReference: undefined });
    expect(noShopper.status).toBe(422);
    const raw = await post('/v71/payments', {
      ...payment,
      paymentMethod: { type: 'scheme', number: '4111111111111111' },
    });
    expect(raw.body).toMatchObject({ status: 403, errorCode: '010' });
  });
});

describe('wire helpers', () => {
  it('reads Retry-After in seconds or as an HTTP date, and leading network codes', () => {
    expect(retryAfterMs('7')).toBe(7000);
    expect(retryAfterMs(new Date(Date.UTC(2026, 0, 1, 0, 0, 30)).toUTCString(), Date.UTC(2026, 0, 1))).toBe(30_000);
    expect(retryAfterMs(undefined)).toBeNull();
    expect(leadingCode('51 : Insufficient funds')).toBe('51');
    expect(leadingCode('03: Do not try again')).toBe('03');
    expect(leadingCode('N7 : CVV2 failure')).toBe('N7');
    expect(leadingCode('DECLINED Not enough balance')).toBeNull();
    expect(leadingCode('AUTHORISED')).toBeNull();
  });

  it('reads a single-digit raw code as its two-digit network code (Adyen sends it with or without the leading zero)', () => {
    expect(leadingCode('7 : Pickup card, special condition')).toBe('07');
    expect(leadingCode('4 : Capture card')).toBe('04');
    expect(leadingCode('5: Do not honor')).toBe('05');
    expect(leadingCode('3: Do not try again')).toBe('03');
    // Only a digit followed by its separator is a code: not a bare digit, nor a digit in text.
    expect(leadingCode('7')).toBeNull();
    expect(leadingCode('3 attempts exceeded')).toBeNull();
    expect(leadingCode('100 : Deny')).toBeNull();
  });
});
