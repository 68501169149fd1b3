import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// The wire fakes are test support of libs/processor (its test/ folder: never built into dist/).
import { AdyenFake } from '../../libs/processor/test/adyen-fake';
import { StripeFake } from '../../libs/processor/test/stripe-fake';
import {
  ApiClient,
  closeTestDb,
  createMerchant,
  startApp,
  testDb,
  txn,
  waitFor,
  type RunningApp,
  type TestMerchant,
  usePrivateDatabase,
} from '@retain/testing';

// Issue 10 / decisions §13: a merchant connected to Stripe and one connected to Adyen (with
// `processor set`, the accounts pointed at local wire fakes by api_base / checkout_url) are
// charged, looked up and refunded by their own processor through the real apps.
const cliMain = path.resolve(__dirname, '../../dist/apps/cli/src/main.js');
const FINAL = ['Captured', 'Cancelled', 'Stopped'];
let dir = '';
let stripeBase = '';

function processorSet(login: string, processor: string, config: unknown, division?: string): void {
  const file = path.join(dir, `${login}.json`);
  writeFileSync(file, JSON.stringify(config));
  const args = ['processor', 'set', '--login', login, '--processor', processor, '--config-file', file];
  if (division) args.push('--division', division);
  const r = spawnSync(process.execPath, [cliMain, ...args], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(r.stderr);
}

interface Wire {
  name: 'stripe' | 'adyen';
  fake: StripeFake | AdyenFake;
  merchant: TestMerchant;
  client: ApiClient;
  /** Payment method ids (tokens) of the scenarios on this processor. */
  approved: () => string;
  mac03: () => string;
  /** The charge requests the fake received for an idempotency key (replays included). */
  chargesFor: (key: string) => { body: Record<string, unknown>; raw: string }[];
  /** Charges the fake actually processed for a key (money taken or refused once, never replays). */
  processedFor: (key: string) => number;
  refundsOf: (processorTransactionId: string) => Record<string, unknown>[];
}

describe('merchants charged through their own Stripe and Adyen accounts (end to end)', () => {
  // Its own database and queues: a time-scaled recovery window has no room for other files' backlog.
  usePrivateDatabase('pra');
  const apps: RunningApp[] = [];
  const stripe = new StripeFake('sk_test_e2eRetainFake01');
  const adyen = new AdyenFake();
  const wires: Wire[] = [];
  let n = 0;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'retain-e2e-processors-'));
    const stripeUrl = await stripe.start();
    stripeBase = stripeUrl;
    const adyenUrl = await adyen.start();
    // The Adyen fake speaks HTTPS with its own certificate: the apps trust it as a proxy's CA.
    const caFile = path.join(dir, 'adyen-fake-ca.pem');
    writeFileSync(caFile, adyen.ca!);
    const env = {
      RETRY_TIME_SCALE: '200000',
      REFUND_BATCH_CRON: '*/1 * * * * *',
      PROCESSOR_TIMEOUT: '1500ms',
      NODE_EXTRA_CA_CERTS: caFile,
    };
    apps.push(
      ...(await Promise.all(
        (['intake-api', 'submission-validator', 'retry-worker', 'refund-batcher'] as const).map((a) =>
          startApp(a, { env }),
        ),
      )),
    );
    const ms = await createMerchant();
    processorSet(ms.login, 'stripe', { secret_key: stripe.secretKey, api_base: stripeUrl });
    const ma = await createMerchant();
    // The Adyen account is the one of the transactions' division (txn(): division_number div-1).
    processorSet(
      ma.login,
      'adyen',
      { api_key: adyen.apiKey, merchant_account: adyen.merchantAccount, checkout_url: `${adyenUrl}/v71` },
      'div-1',
    );
    const stripeCharges = (key: string) =>
      stripe
        .received('POST', '/v1/payment_intents')
        .filter((r) => r.headers['idempotency-key'] === key)
        .map((r) => ({ body: r.body, raw: r.rawBody }));
    const adyenCharges = (key: string) =>
      adyen
        .received('POST', /^\/v\d+\/payments$/)
        .filter((r) => r.headers['idempotency-key'] === key)
        .map((r) => ({ body: r.body, raw: r.rawBody }));
    wires.push(
      {
        name: 'stripe',
        fake: stripe,
        merchant: ms,
        client: new ApiClient(apps[0]!.url, ms.api_key),
        approved: () => 'pm_card_visa',
        mac03: () => {
          const pm = `pm_mac03mc${++n}`;
          stripe.script(pm, {
            decline_code: 'do_not_honor',
            network_decline_code: '05',
            network_advice_code: '03',
            brand: 'mastercard',
          });
          return pm;
        },
        chargesFor: stripeCharges,
        processedFor: (key) =>
          [...stripe.intents.values()].filter(
            (s) => (s.pi.metadata as Record<string, string> | undefined)?.['retain_attempt'] === key,
          ).length,
        refundsOf: (id) => stripe.refunds.filter((r) => r['payment_intent'] === id),
      },
      {
        name: 'adyen',
        fake: adyen,
        merchant: ma,
        client: new ApiClient(apps[0]!.url, ma.api_key),
        approved: () => `shopper${++n}|8415000000${String(n).padStart(6, '0')}`,
        mac03: () => {
          const id = `8415990000${String(++n).padStart(6, '0')}`;
          adyen.script(id, {
            refusalReason: 'Refused',
            refusalReasonCode: '2',
            refusalReasonRaw: '05 : Do not honor',
            merchantAdviceCode: '03: Do not try again',
            brand: 'mc',
          });
          return `shopper${n}|${id}`;
        },
        chargesFor: adyenCharges,
        processedFor: (key) => {
          const refs = new Set(adyenCharges(key).map((c) => c.body['reference']));
          return [...adyen.payments.values()].filter((p) => refs.has(p.body['reference'])).length;
        },
        refundsOf: (psp) => adyen.refunds.filter((r) => r['paymentPspReference'] === psp),
      },
    );
  });
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.stop()));
    await stripe.close();
    await adyen.close();
    rmSync(dir, { recursive: true, force: true });
    await closeTestDb();
  });

  const tokenTxn = (token: string, overrides: Record<string, unknown> = {}) =>
    txn({ payment_method: { id: token, is_tokenized: true }, amount: 19.99, currency: 'EUR', ...overrides });

  const finalOf = (w: Wire, id: string) =>
    waitFor(
      async () => {
        const r = await w.client.request('GET', `/v1/retain/transactions/${id}?related=true`);
        return FINAL.includes(r.json?.data?.[0]?.status) ? r.json.data : null;
      },
      { timeoutMs: 45_000, what: `final status of ${id}` },
    );

  const submit = async (w: Wire, t: Record<string, unknown>) => {
    const r = await w.client.submit([t]);
    expect(r.status, JSON.stringify(r.json)).toBe(200);
    return finalOf(w, t['id'] as string);
  };

  const expectOneMitCharge = (w: Wire, vid: string, token: string) => {
    const charges = w.chargesFor(vid);
    expect(charges.length).toBeGreaterThanOrEqual(1);
    expect(w.processedFor(vid)).toBe(1);
    const body = charges[0]!.body;
    if (w.name === 'stripe') {
      expect(body).toMatchObject({ amount: '1999', currency: 'eur', off_session: 'recurring', confirm: 'true' });
      expect(body['payment_method']).toBe(token);
      expect(charges[0]!.raw).not.toMatch(/card%5Bnumber%5D|card\[number\]|payment_method_data/);
    } else {
      const [shopper, stored] = token.split('|');
      expect(body).toMatchObject({
        amount: { value: 1999, currency: 'EUR' },
        shopperInteraction: 'ContAuth',
        recurringProcessingModel: 'Subscription',
        shopperReference: shopper,
        paymentMethod: { type: 'scheme', storedPaymentMethodId: stored },
      });
      expect(charges[0]!.raw).not.toMatch(/"number"|encryptedCardNumber/);
    }
  };

  it('stripe: a payment method Stripe no longer has (resource_missing) is settled as not charged, never left unknown', async () => {
    const w = wires.find((x) => x.name === 'stripe')!;
    const token = `pm_gone${++n}`;
    stripe.missing.add(token);
    const t = tokenTxn(token);
    expect((await w.client.submit([t])).status).toBe(200);
    // Stripe refused the request: nothing was charged, so the attempt is settled (96, soft) and the
    // schedule goes on, instead of an attempt unknown for ever that no stop could close.
    const [, first] = await waitFor(
      async () => {
        const r = await w.client.request('GET', `/v1/retain/transactions/${t['id']}?related=true`);
        const data = r.json?.data;
        return data?.[1]?.status === 'Failed' ? data : null;
      },
      { timeoutMs: 30_000, what: 'the first attempt settled' },
    );
    expect(first.auth_code).toBe('96');
    expect(stripe.succeeded().filter((pi) => pi['payment_method'] === token)).toHaveLength(0);
  });

  it('stripe: a bare pm_… attached to a customer is charged with that customer (read from Stripe)', async () => {
    const w = wires.find((x) => x.name === 'stripe')!;
    const token = `pm_attached${++n}`;
    stripe.attach(token, `cus_A${n}`);
    const [submitted, ...tries] = await submit(w, tokenTxn(token));
    expect(submitted.status).toBe('Captured');
    expect(tries.map((a: any) => a.status)).toEqual(['Captured']);
    expect(w.chargesFor(tries[0].vid)[0]!.body).toMatchObject({ payment_method: token, customer: `cus_A${n}` });
  });

  it("an attempt's lookups and its refund go to the account that charged it, even after the merchant's account was removed", async () => {
    // A merchant of its own on Stripe. Its charge goes through but the answer is lost, and every
    // lookup fails: the attempt is unknown. Then the operator removes the account (the merchant's
    // new charges would go to the app's sandbox).
    const m = await createMerchant();
    processorSet(m.login, 'stripe', { secret_key: stripe.secretKey, api_base: stripeBase });
    const client = new ApiClient(apps[0]!.url, m.api_key);
    // PaymentIntents only: the PaymentMethod is read first (GET /v1/payment_methods/{id}).
    stripe.failNext('charge-then-reset', 1, { method: 'POST', path: '/v1/payment_intents' });
    stripe.failNext('5xx', 10_000, { path: /^\/v1\/payment_intents/ });
    const t = tokenTxn('pm_card_visa');
    try {
      expect((await client.submit([t])).status).toBe(200);
      const db = await testDb();
      await waitFor(
        async () => {
          const rows = await db.query(
            `SELECT a.vid FROM attempts a JOIN transactions t ON t.id = a.transaction_id
              WHERE t.merchant_txn_id = $1 AND a.state = 'unknown'`,
            [t['id']],
          );
          return rows.length ? rows : null;
        },
        { timeoutMs: 20_000, what: 'the attempt unknown' },
      );
      const r = spawnSync(process.execPath, [cliMain, 'processor', 'remove', '--login', m.login], { encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(0);
      // Stripe stays down a little longer: the reconciliation ticks after the removal (every tick
      // here), and a lookup begun before it ends with its failure.
      await new Promise((resolve) => setTimeout(resolve, 3000));
    } finally {
      stripe.clearFaults();
    }
    // The reconciliation asks Stripe (the account that charged), finds the capture, records it once.
    const w = { client } as Wire;
    const [submitted, ...tries] = await finalOf(w, t['id'] as string);
    expect(submitted.status).toBe('Captured');
    expect(tries.map((a: any) => a.status)).toEqual(['Captured']);
    const db = await testDb();
    const [row] = await db.query(`SELECT processor_transaction_id FROM transactions WHERE merchant_txn_id = $1`, [
      t['id'],
    ]);
    expect(row.processor_transaction_id).toMatch(/^pi_/);
    const [{ n }] = await db.query(`SELECT count(*)::int AS n FROM sandbox_operations WHERE idempotency_key = $1`, [
      tries[0].vid,
    ]);
    expect(n).toBe(0);
    // Its refund goes to Stripe too, not to the sandbox the merchant's new charges now use.
    expect((await client.request('POST', '/v1/retain/refunds', { refunds: [{ id: t['id'] }] })).status).toBe(200);
    await waitFor(() => stripe.refunds.some((x) => x['payment_intent'] === row.processor_transaction_id), {
      timeoutMs: 20_000,
      what: 'the refund at Stripe',
    });
  });

  it('stripe: a partial refund Stripe cannot express (KWD 1.005: its last digit must be 0) is refused at the call, RET009', async () => {
    const w = wires.find((x) => x.name === 'stripe')!;
    const t = tokenTxn(w.approved(), { amount: 10, currency: 'KWD' });
    const [submitted] = await submit(w, t);
    expect(submitted.status).toBe('Captured');
    // Accepted, it would be answered `200 received` and fail a day later in the batch ("refund failed").
    const refused = await w.client.request('POST', '/v1/retain/refunds', { refunds: [{ id: t['id'], amount: 1.005 }] });
    expect(refused.status).toBe(207);
    expect(refused.json.rejected).toEqual([{ id: t['id'], errors: [expect.objectContaining({ code: 'RET009' })] }]);
    expect(refused.json.rejected[0].errors[0].message).toMatch(/amount/);
    const db = await testDb();
    const count = async () =>
      (
        await db.query(
          `SELECT count(*)::int AS n FROM refunds r JOIN transactions t ON t.id = r.transaction_id WHERE t.merchant_txn_id = $1`,
          [t['id']],
        )
      )[0].n;
    expect(await count()).toBe(0);
    // An amount Stripe takes is accepted as usual.
    const ok = await w.client.request('POST', '/v1/retain/refunds', { refunds: [{ id: t['id'], amount: 1.01 }] });
    expect(ok.status, JSON.stringify(ok.json)).toBe(200);
    expect(await count()).toBe(1);
  });

  it('stripe: a stop whose amount Stripe could not refund (KWD 1.005) is refused at the call, RET009', async () => {
    // A capture in flight turns a stop into a refund of its amount: accepted, that refund failed in the
    // batch and the customer stayed charged though the merchant had stopped (the refunds audit, session 25).
    const w = wires.find((x) => x.name === 'stripe')!;
    const pm = `pm_funds${++n}`;
    stripe.script(pm, { decline_code: 'insufficient_funds', network_decline_code: '51', brand: 'visa' });
    const t = tokenTxn(pm, { amount: 10, currency: 'KWD' });
    expect((await w.client.submit([t])).status).toBe(200);
    const refused = await w.client.request('POST', '/v1/retain/refunds', { refunds: [{ id: t['id'], amount: 1.005 }] });
    expect(refused.status, JSON.stringify(refused.json)).toBe(207);
    expect(refused.json.rejected).toEqual([{ id: t['id'], errors: [expect.objectContaining({ code: 'RET009' })] }]);
    expect(refused.json.rejected[0].errors[0].message).toBe(
      'Schema validation error: amount cannot be refunded in KWD by stripe',
    );
    const ok = await w.client.request('POST', '/v1/retain/refunds', { refunds: [{ id: t['id'], amount: 1.01 }] });
    expect(ok.status, JSON.stringify(ok.json)).toBe(200);
  });

  it('stripe: the network rules count a saved payment method as one card: after its 41, it is never charged again', async () => {
    // Stripe never gives the card number back, so the card is known by its PaymentMethod.
    const w = wires.find((x) => x.name === 'stripe')!;
    const pm = `pm_lost${++n}`;
    stripe.script(pm, { decline_code: 'lost_card', network_decline_code: '41', brand: 'visa' });
    const [first, ...firstTries] = await submit(w, tokenTxn(pm));
    expect(first.status).toBe('Cancelled');
    expect(firstTries.map((a: any) => a.auth_code)).toEqual(['41']);
    // Another subscription on the same saved card (attached to a customer this time): no attempt.
    const [second, ...secondTries] = await submit(w, tokenTxn(`cus_R${n}|${pm}`));
    expect(second.status).toBe('Cancelled');
    expect(secondTries).toHaveLength(0);
    expect(stripe.received('POST', '/v1/payment_intents').filter((r) => r.body['payment_method'] === pm)).toHaveLength(
      1,
    );
  });

  it("stripe: a saved payment method's network is learned from Stripe's answer: after its Mastercard MAC 03, another subscription on it is never charged", async () => {
    // Sent without a BIN, a pm_… has no network at review; Stripe's decline names the card's brand.
    const w = wires.find((x) => x.name === 'stripe')!;
    const pm = w.mac03();
    const [first, ...firstTries] = await submit(w, tokenTxn(pm));
    expect(first.status).toBe('Cancelled');
    expect(firstTries.map((a: any) => [a.auth_code, a.status])).toEqual([['05', 'Failed']]);
    // MAC 03 (revocation of all authorizations) stops every attempt on that card, for good.
    const [second, ...secondTries] = await submit(w, tokenTxn(`cus_M${n}|${pm}`));
    expect(second.status).toBe('Cancelled');
    expect(secondTries).toHaveLength(0);
    expect(stripe.received('POST', '/v1/payment_intents').filter((r) => r.body['payment_method'] === pm)).toHaveLength(
      1,
    );
  });

  it('stripe: a saved payment method sent without a BIN, with Mastercard advice code 03, is never charged (decisions §16: obeyed from the first attempt)', async () => {
    const w = wires.find((x) => x.name === 'stripe')!;
    const pm = `pm_advice${++n}`;
    stripe.script(pm, 'succeeded');
    const [t, ...tries] = await submit(w, tokenTxn(pm, { auth_code: '05', network_advice_code: '03' }));
    expect(t.status).toBe('Cancelled');
    expect(tries).toHaveLength(0);
    expect(stripe.received('POST', '/v1/payment_intents').filter((r) => r.body['payment_method'] === pm)).toHaveLength(
      0,
    );
  });

  for (const name of ['stripe', 'adyen'] as const) {
    const wire = () => wires.find((w) => w.name === name)!;

    it(`${name}: recovers a transaction with one merchant-initiated charge keyed by the attempt vid`, async () => {
      const w = wire();
      const token = w.approved();
      const t = tokenTxn(token);
      const [submitted, ...tries] = await submit(w, t);
      expect(submitted.status).toBe('Captured');
      expect(tries).toHaveLength(1);
      expect(tries[0].status).toBe('Captured');
      expectOneMitCharge(w, tries[0].vid, token);
      // The sandbox never saw it.
      const db = await testDb();
      const [{ count }] = await db.query(
        `SELECT count(*)::int AS count FROM sandbox_operations WHERE idempotency_key = $1`,
        [tries[0].vid],
      );
      expect(count).toBe(0);
    });

    it(`${name}: a decline with Mastercard advice code 03 ends the retries`, async () => {
      const w = wire();
      const t = tokenTxn(w.mac03());
      const [submitted, ...tries] = await submit(w, t);
      expect(submitted.status).toBe('Cancelled');
      expect(tries).toHaveLength(1);
      expect(tries[0].status).toBe('Failed');
      expect(tries[0].auth_code).toBe('05');
      expect(w.processedFor(tries[0].vid)).toBe(1);
    });

    it(`${name}: a charge that went through but timed out is recorded once, never charged again`, async () => {
      const w = wire();
      const token = w.approved();
      w.fake.failNext(
        'charge-then-timeout',
        1,
        name === 'stripe' ? { method: 'POST', path: '/v1/payment_intents' } : {},
      );
      const t = tokenTxn(token);
      const [submitted, ...tries] = await submit(w, t);
      expect(submitted.status).toBe('Captured');
      expect(tries.map((a: any) => a.status)).toEqual(['Captured']);
      expect(w.processedFor(tries[0].vid)).toBe(1);
      // The timed-out request and its lookup replay carried the same key and the same request.
      const charges = w.chargesFor(tries[0].vid);
      expect(new Set(charges.map((c) => c.raw)).size).toBe(1);
      // Adyen has no lookup by reference: the outcome came from replaying the original request.
      if (name === 'adyen') expect(charges).toHaveLength(2);
    });

    it(`${name}: refunds a recovered transaction through the merchant's processor`, async () => {
      const w = wire();
      const t = tokenTxn(w.approved());
      const [submitted] = await submit(w, t);
      expect(submitted.status).toBe('Captured');
      const db = await testDb();
      const [{ processor_transaction_id: ptid }] = await db.query(
        `SELECT processor_transaction_id FROM transactions WHERE merchant_txn_id = $1`,
        [t['id']],
      );
      expect(ptid).toBeTruthy();
      // The processor does not answer the first refund: sent again with the same key, once.
      w.fake.failNext('5xx', 1, { method: 'POST', path: name === 'stripe' ? '/v1/refunds' : /\/refunds$/ });
      const r = await w.client.request('POST', '/v1/retain/refunds', { refunds: [{ id: t['id'] }] });
      expect(r.status, JSON.stringify(r.json)).toBe(200);
      await waitFor(
        async () => {
          const s = await w.client.request('GET', `/v1/retain/transactions/${t['id']}`);
          return s.json?.data?.[0]?.status === 'Refunded' ? true : null;
        },
        { timeoutMs: 30_000, what: 'refund completed' },
      );
      const refunds = w.refundsOf(ptid);
      expect(refunds).toHaveLength(1);
      // Sent twice (the first got a 500), both times with the refund's own key.
      const sent = w.fake.received(
        'POST',
        name === 'stripe' ? '/v1/refunds' : new RegExp(`/payments/${ptid}/refunds$`),
      );
      const keys = sent
        .filter((q) => name === 'adyen' || q.body['payment_intent'] === ptid)
        .map((q) => q.headers['idempotency-key']);
      expect(keys).toHaveLength(2);
      expect(new Set(keys).size).toBe(1);
      if (name === 'stripe') expect(refunds[0]).toMatchObject({ amount: 1999 });
      else expect(refunds[0]).toMatchObject({ amount: { value: 1999, currency: 'EUR' } });
    });
  }
});
