import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '@retain/config';
import { ProcessorAccountsRepository } from '@retain/db';
import {
  ApiClient,
  closeTestDb,
  createMerchant,
  startApp,
  testDb,
  txn,
  waitFor,
  type RunningApp,
  usePrivateDatabase,
} from '@retain/testing';

// decisions §13: the review checks that a transaction can be charged by the processor account it maps to.
describe('post-submission review with merchants processor accounts', () => {
  // Its own database and queues: its apps serve this file's work, not a backlog earlier files left.
  usePrivateDatabase('rpa');
  let api: RunningApp;
  let validator: RunningApp;

  beforeAll(async () => {
    [api, validator] = await Promise.all([startApp('intake-api'), startApp('submission-validator')]);
  });
  afterAll(async () => {
    await Promise.all([api.stop(), validator.stop()]);
    await closeTestDb();
  });

  const row = async (id: string) =>
    (await (await testDb()).query(`SELECT review_status FROM transactions WHERE merchant_txn_id = $1`, [id]))[0];
  const reviewed = async (id: string): Promise<string[]> => {
    const [r] = await (
      await testDb()
    ).query(
      `SELECT review_status FROM transactions WHERE merchant_txn_id = $1 AND review_status IN ('passed', 'rejected')`,
      [id],
    );
    return r ? [r.review_status] : [];
  };

  /** Submits the transactions in one POST and waits for their review: each one's review_status, in order. */
  const reviewStatuses = async (client: ApiClient, txns: Record<string, unknown>[]): Promise<string[]> => {
    expect((await client.submit(txns)).status).toBe(200);
    const ids = txns.map((t) => t['id'] as string);
    await waitFor(async () => (await Promise.all(ids.map(reviewed))).every((e) => e.length > 0), {
      what: 'review done',
    });
    return (await Promise.all(ids.map(row))).map((r) => r.review_status);
  };
  /** The rejected entries of the merchant's `validation failed` push. */
  const rejectedPushed = async (merchantId: string): Promise<unknown[]> => {
    const [failed] = await (
      await testDb()
    ).query(`SELECT body FROM webhook_messages WHERE merchant_id = $1 AND event_name = 'validation failed'`, [
      merchantId,
    ]);
    return failed.body.content.rejected;
  };

  it('a clear card mapped to a tokens-only account fails with RET011; tokens of the account and clear cards of a raw-card account pass', async () => {
    const merchant = await createMerchant();
    const db = await testDb();
    const [{ id: merchantId }] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [merchant.login]);
    const accounts = new ProcessorAccountsRepository(db, loadConfig('cli').cardKeys);
    await accounts.set(merchantId, '', 'stripe', { secret_key: 'sk_test_reviewaccount' });
    await accounts.set(merchantId, 'EU1', 'adyen', {
      api_key: 'AQE_review',
      merchant_account: 'ShopECOM',
      raw_card_data: true,
    });

    const clearToStripe = txn();
    const stripeToken = txn({
      payment_method: { id: 'cus_R1|pm_1Q2w3E4r5T6y', is_tokenized: true, credit_card: { account: '424242' } },
    });
    const sandboxTokenToStripe = txn({
      payment_method: { id: 'tok_sandbox_1111', is_tokenized: true, credit_card: { account: '411111' } },
    });
    const clearToAdyen = txn({ division_number: 'EU1' });
    const client = new ApiClient(api.url, merchant.api_key);
    expect(await reviewStatuses(client, [clearToStripe, stripeToken, sandboxTokenToStripe, clearToAdyen])).toEqual([
      'rejected',
      'passed',
      'rejected',
      'passed',
    ]);
    const rejected = await client.request('GET', `/v1/retain/transactions/${clearToStripe['id']}`);
    expect(JSON.stringify(rejected.json)).not.toContain('sk_test_reviewaccount');
  });

  // decisions §13, §15: the account's next payment method is an alternative only where the
  // transaction's own processor account can charge it (the rule the review applies to a submitted one).
  describe("the fallback to the account's next payment method", () => {
    const setUp = async () => {
      const merchant = await createMerchant();
      const db = await testDb();
      const [{ id: merchantId }] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [merchant.login]);
      // Division US: a Stripe account (tokens only); any other division: the sandbox (the app's processor).
      await new ProcessorAccountsRepository(db, loadConfig('cli').cardKeys).set(merchantId, 'US', 'stripe', {
        secret_key: 'sk_test_review_fallback',
      });
      const client = new ApiClient(api.url, merchant.api_key);
      const submitReviewed = async (t: Record<string, unknown>) => {
        expect((await client.submit([t])).status).toBe(200);
        await waitFor(async () => (await reviewed(t['id'] as string)).length > 0, { what: 'review done' });
      };
      const final = async (t: Record<string, unknown>) => {
        const [got] = (await client.request('GET', `/v1/retain/transactions/${t['id']}`)).json.data;
        const pushes = await db.query(
          `SELECT body FROM webhook_messages WHERE merchant_id = $1 AND event_name = 'retry failed'
              AND body->'header'->>'transaction_id' = $2`,
          [merchantId, t['id']],
        );
        return {
          status: got.status,
          payment_method_id: got.payment_method.id,
          next_activity: got.next_activity,
          pushes: pushes.map((p: any) => ({ status: p.body.content.status, pm: p.body.content.payment_method.id })),
        };
      };
      const ended = async (pmId: string) =>
        (
          await db.query(
            `SELECT ended_at IS NOT NULL AS ended FROM payment_methods WHERE merchant_id = $1 AND pm_id = $2`,
            [merchantId, pmId],
          )
        ).map((r: any) => r.ended);
      return { submitReviewed, final, ended };
    };

    it('a Stripe saved method of division US is no alternative for a hard decline in a sandbox division', async () => {
      const { submitReviewed, final, ended } = await setUp();
      const account = { id: `cus-9-${Date.now()}`, email: 'jane@example.com' };
      // t1: division US, a Stripe saved method, a soft decline: remembered for the customer.
      const t1 = txn({
        account,
        division_number: 'US',
        payment_method: { id: 'cus_A|pm_1', is_tokenized: true, credit_card: { account: '424242' } },
      });
      await submitReviewed(t1);
      // t2: division EU (the sandbox), a clear card, lost (41): never retried, its card ends.
      const t2 = txn({ account, division_number: 'EU', auth_code: '41' }, '4100000000000019');
      const ownPm = (t2['payment_method'] as any).id;
      await submitReviewed(t2);
      // The sandbox cannot charge `cus_A|pm_1` (declined 14 "Unknown sandbox token", a hard decline
      // that would end it for the whole account): t2 ends here, on its own payment method.
      expect(await final(t2)).toEqual({
        status: 'Cancelled',
        payment_method_id: ownPm,
        next_activity: null,
        pushes: [{ status: 'Cancelled', pm: ownPm }],
      });
      expect(await ended('cus_A|pm_1')).toEqual([false]);
      expect((await final(t1)).status).toBe('Failed');
    });

    it('a clear card of a sandbox division is no alternative in a tokens-only division', async () => {
      const { submitReviewed, final, ended } = await setUp();
      const account = { id: `cus-10-${Date.now()}`, email: 'jane@example.com' };
      // t1: division EU (the sandbox), a clear card: remembered for the customer.
      const t1 = txn({ account, division_number: 'EU' }, '4000000000000077');
      await submitReviewed(t1);
      // t2: division US (Stripe, no raw card data), a saved method declined 41.
      const t2 = txn({
        account,
        division_number: 'US',
        auth_code: '41',
        payment_method: { id: 'cus_B|pm_2', is_tokenized: true, credit_card: { account: '424242' } },
      });
      await submitReviewed(t2);
      expect(await final(t2)).toEqual({
        status: 'Cancelled',
        payment_method_id: 'cus_B|pm_2',
        next_activity: null,
        pushes: [{ status: 'Cancelled', pm: 'cus_B|pm_2' }],
      });
      expect(await ended((t1['payment_method'] as any).id)).toEqual([false]);
    });
  });

  it("an amount the account's processor has no units for (Adyen: IDR whole rupiah) fails with RET012; a whole one passes", async () => {
    const merchant = await createMerchant();
    const db = await testDb();
    const [{ id: merchantId }] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [merchant.login]);
    const accounts = new ProcessorAccountsRepository(db, loadConfig('cli').cardKeys);
    await accounts.set(merchantId, '', 'adyen', {
      api_key: 'AQE_units',
      merchant_account: 'ShopECOM',
      raw_card_data: true,
    });
    // ISO 4217 gives IDR two decimals; Adyen counts it with none (docs.adyen.com currency codes).
    const fraction = txn({ amount: 150000.5, currency: 'IDR' });
    const whole = txn({ amount: 150000, currency: 'IDR' });
    const client = new ApiClient(api.url, merchant.api_key);
    expect(await reviewStatuses(client, [fraction, whole])).toEqual(['rejected', 'passed']);
  });

  it('Stripe three-decimal currencies: an amount whose last digit is not 0 (KWD 1.005) fails with RET012; KWD 1.010 passes', async () => {
    const merchant = await createMerchant();
    const db = await testDb();
    const [{ id: merchantId }] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [merchant.login]);
    await new ProcessorAccountsRepository(db, loadConfig('cli').cardKeys).set(merchantId, '', 'stripe', {
      secret_key: 'sk_test_review_fils',
    });
    // docs.stripe.com/currencies: three-decimal amounts must end in 0; Stripe refuses 1005 fils every time.
    const pm = { id: 'cus_R1|pm_1Q2w3E4r5T6y', is_tokenized: true, credit_card: { account: '424242' } };
    const fils = txn({ amount: 1.005, currency: 'KWD', payment_method: pm });
    const tens = txn({ amount: 1.01, currency: 'KWD', payment_method: pm });
    const client = new ApiClient(api.url, merchant.api_key);
    expect(await reviewStatuses(client, [fils, tens])).toEqual(['rejected', 'passed']);
    expect(await rejectedPushed(merchantId)).toEqual([
      { id: fils['id'], errors: [expect.objectContaining({ code: 'RET012' })] },
    ]);
  });

  it("Stripe's minimum charge: USD 0.30 on the Stripe division fails with RET012; USD 0.50 passes", async () => {
    const merchant = await createMerchant();
    const db = await testDb();
    const [{ id: merchantId }] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [merchant.login]);
    // Division US: a Stripe account; any other division: the sandbox (no minimum).
    await new ProcessorAccountsRepository(db, loadConfig('cli').cardKeys).set(merchantId, 'US', 'stripe', {
      secret_key: 'sk_test_review_minimum',
    });
    // docs.stripe.com/currencies: Stripe's minimum charge in USD is 0.50 (400 amount_too_small below it).
    const pm = { id: 'cus_M1|pm_1Q2w3E4r5T6y', is_tokenized: true, credit_card: { account: '424242' } };
    const small = txn({ amount: 0.3, currency: 'USD', division_number: 'US', payment_method: pm });
    const enough = txn({ amount: 0.5, currency: 'USD', division_number: 'US', payment_method: pm });
    const client = new ApiClient(api.url, merchant.api_key);
    expect(await reviewStatuses(client, [small, enough])).toEqual(['rejected', 'passed']);
    expect(await rejectedPushed(merchantId)).toEqual([
      { id: small['id'], errors: [expect.objectContaining({ code: 'RET012' })] },
    ]);
  });

  it("Stripe's maximum charge (eight digits): USD 1,000,000.00 fails with RET012; USD 999,999.99 and a larger IDR pass", async () => {
    const merchant = await createMerchant();
    const db = await testDb();
    const [{ id: merchantId }] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [merchant.login]);
    await new ProcessorAccountsRepository(db, loadConfig('cli').cardKeys).set(merchantId, 'US', 'stripe', {
      secret_key: 'sk_test_review_maximum',
    });
    // Stripe's API reference (PaymentIntent amount): "supports up to eight digits (e.g., a value of 99999999
    // for a USD charge of $999,999.99)"; above it every attempt is refused. IDR takes up to twelve.
    const pm = { id: 'cus_X1|pm_1Q2w3E4r5T6y', is_tokenized: true, credit_card: { account: '424242' } };
    const over = txn({ amount: 1_000_000, currency: 'USD', division_number: 'US', payment_method: pm });
    const most = txn({ amount: 999_999.99, currency: 'USD', division_number: 'US', payment_method: pm });
    const rupiah = txn({ amount: 15_000_000, currency: 'IDR', division_number: 'US', payment_method: pm });
    const sandbox = txn({ amount: 1_000_000, currency: 'USD' });
    const client = new ApiClient(api.url, merchant.api_key);
    expect(await reviewStatuses(client, [over, most, rupiah, sandbox])).toEqual([
      'rejected',
      'passed',
      'passed',
      'passed',
    ]);
    expect(await rejectedPushed(merchantId)).toEqual([
      { id: over['id'], errors: [expect.objectContaining({ code: 'RET012' })] },
    ]);
  });

  it('an ISO 4217 fund code (CLF, a unit of account) fails with RET012 at Stripe and at Adyen; CLP passes; the sandbox takes it', async () => {
    const merchant = await createMerchant();
    const db = await testDb();
    const [{ id: merchantId }] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [merchant.login]);
    const accounts = new ProcessorAccountsRepository(db, loadConfig('cli').cardKeys);
    // Division US: Stripe; EU: Adyen; any other: the sandbox.
    await accounts.set(merchantId, 'US', 'stripe', { secret_key: 'sk_test_review_funds' });
    await accounts.set(merchantId, 'EU', 'adyen', { api_key: 'AQE_review_funds', merchant_account: 'ShopECOM' });
    // Neither Stripe's nor Adyen's list of currencies has a fund code: every attempt would be refused.
    const stripePm = { id: 'cus_F1|pm_1Q2w3E4r5T6y', is_tokenized: true, credit_card: { account: '424242' } };
    const adyenPm = { id: 'shopper-7|8415718415172200', is_tokenized: true, credit_card: { account: '411111' } };
    const stripeFund = txn({ amount: 1.5, currency: 'CLF', division_number: 'US', payment_method: stripePm });
    const stripePeso = txn({ amount: 1500, currency: 'CLP', division_number: 'US', payment_method: stripePm });
    const adyenFund = txn({ amount: 1.5, currency: 'CLF', division_number: 'EU', payment_method: adyenPm });
    const adyenPeso = txn({ amount: 1500, currency: 'CLP', division_number: 'EU', payment_method: adyenPm });
    const sandboxFund = txn({ amount: 1.5, currency: 'CLF' });
    const all = [stripeFund, stripePeso, adyenFund, adyenPeso, sandboxFund];
    const client = new ApiClient(api.url, merchant.api_key);
    expect(await reviewStatuses(client, all)).toEqual(['rejected', 'passed', 'rejected', 'passed', 'passed']);
    expect(await rejectedPushed(merchantId)).toEqual(
      expect.arrayContaining(
        [stripeFund, adyenFund].map((t) => ({ id: t['id'], errors: [expect.objectContaining({ code: 'RET012' })] })),
      ),
    );
  });

  it('an Adyen stored payment method without its shopperReference fails with RET011; with it, or a network token, it passes', async () => {
    const merchant = await createMerchant();
    const db = await testDb();
    const [{ id: merchantId }] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [merchant.login]);
    await new ProcessorAccountsRepository(db, loadConfig('cli').cardKeys).set(merchantId, '', 'adyen', {
      api_key: 'AQE_review_shopper',
      merchant_account: 'ShopECOM',
    });
    const token = (id: string, extra: Record<string, unknown> = {}) =>
      txn({ payment_method: { id, is_tokenized: true, credit_card: { account: '411111' } }, ...extra });
    const bare = token('8415718415172200');
    const withShopper = token('shopper-42|8415718415172200');
    const networkToken = token('4895370012003478', {
      is_network_token: 1,
      cryptogram: 'AgAAAAAABk4DWZ4C28yUQAAAAAA=',
      eci_indicator: '05',
    });
    const all = [bare, withShopper, networkToken];
    const client = new ApiClient(api.url, merchant.api_key);
    expect(await reviewStatuses(client, all)).toEqual(['rejected', 'passed', 'passed']);
    expect(await rejectedPushed(merchantId)).toEqual([
      { id: bare['id'], errors: [expect.objectContaining({ code: 'RET011' })] },
    ]);
  });

  it('a network token sent without its BIN is reviewed under its own network (its number says it), so the network rules apply', async () => {
    const merchant = await createMerchant();
    const db = await testDb();
    const [{ id: merchantId }] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [merchant.login]);
    await new ProcessorAccountsRepository(db, loadConfig('cli').cardKeys).set(merchantId, '', 'stripe', {
      secret_key: 'sk_test_review_network',
    });
    const t = txn({
      payment_method: { id: '5555555555554444', is_tokenized: true },
      is_network_token: 1,
      cryptogram: 'AgAAAAAABk4DWZ4C28yUQAAAAAA=',
      eci_indicator: '05',
    });
    delete (t['payment_method'] as Record<string, unknown>)['credit_card'];
    expect((await new ApiClient(api.url, merchant.api_key).submit([t])).status).toBe(200);
    await waitFor(async () => (await reviewed(t['id'] as string)).length > 0, { what: 'review done' });
    const [r] = await db.query(`SELECT review_status, card_network FROM transactions WHERE merchant_txn_id = $1`, [
      t['id'],
    ]);
    expect(r).toEqual({ review_status: 'passed', card_network: 'mastercard' });
  });

  it("a token id as long as the account's processor takes (Stripe: 255) is reviewed and remembered, not stuck", async () => {
    const merchant = await createMerchant();
    const db = await testDb();
    const [{ id: merchantId }] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [merchant.login]);
    await new ProcessorAccountsRepository(db, loadConfig('cli').cardKeys).set(merchantId, '', 'stripe', {
      secret_key: 'sk_test_reviewlongtoken',
    });
    // 203 characters: under Stripe's limit, over the 128 the payment-method table once held.
    const longId = `cus_R1|pm_${'a'.repeat(193)}`;
    const long = txn({ payment_method: { id: longId, is_tokenized: true, credit_card: { account: '424242' } } });
    const client = new ApiClient(api.url, merchant.api_key);
    expect((await client.submit([long])).status).toBe(200);
    await waitFor(async () => (await reviewed(long['id'] as string)).length > 0, { what: 'review done' });
    expect((await row(long['id'] as string)).review_status).toBe('passed');
    const [pm] = await db.query(`SELECT pm_id FROM payment_methods WHERE merchant_id = $1`, [merchantId]);
    expect(pm?.pm_id).toBe(longId);
  });
});
