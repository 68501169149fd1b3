/// <reference lib="dom" />
import type { Browser, Page, Request } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApiClient,
  WebhookReceiver,
  closeTestDb,
  createMerchant,
  startApp,
  txn,
  waitFor,
  type RunningApp,
  type TestMerchant,
  usePrivateDatabase,
} from '@retain/testing';
import { focusWhenShown, launchChromium, logIn, reportErrors, shot } from './chromium';

const ENV = { RETRY_TIME_SCALE: '10000', JOB_LOCK_MS: '2000', WEBHOOK_ALLOW_PRIVATE: 'true' };

// The portal's "Refund / stop" form in a real browser: what the merchant types is what is refunded,
// once, on the transaction the page shows. Refunds are read back through the API.
describe('refunds from the merchant portal', () => {
  usePrivateDatabase('ptr');
  const apps: RunningApp[] = [];
  let receiver: WebhookReceiver;
  let merchant: TestMerchant;
  let api: ApiClient;
  let browser: Browser;
  let page: Page;
  let base = '';
  const captured: string[] = [];

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    apps.push(
      ...(await Promise.all([
        startApp('intake-api', { env: ENV }),
        startApp('submission-validator', { env: ENV }),
        startApp('retry-worker', { env: ENV }),
        startApp('webhook-dispatcher', { env: ENV }),
      ])),
    );
    base = apps[0]!.url;
    merchant = await createMerchant(receiver.url);
    api = new ApiClient(base, merchant.api_key);
    const batch = [txn({ amount: 50 }), txn({ amount: 50 }), txn({ amount: 50 })];
    expect((await api.submit(batch)).status).toBe(200);
    captured.push(...batch.map((t) => t['id'] as string));
    await waitFor(
      async () => {
        const s = await Promise.all(captured.map(async (id) => (await transaction(id)).status));
        return s.every((x) => x === 'Captured');
      },
      { timeoutMs: 100_000, what: 'three captured transactions' },
    );
    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    reportErrors(page);
    await logIn(page, base, merchant);
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    for (const a of apps) await a.stop();
    await receiver?.stop();
    await closeTestDb();
  });

  const transaction = async (id: string) => (await api.request('GET', `/v1/retain/transactions/${id}`)).json.data[0];
  /** The refund amounts of a transaction, as the API shows them. */
  const refunds = async (id: string): Promise<number[]> =>
    ((await transaction(id)).refunds ?? []).map((r: { amount: number }) => r.amount);
  /** Opens a transaction's page by `id` and waits for transaction `shows` (the same unless an attempt's id). */
  const open = async (id: string, shows = id) => {
    await page.goto(`${base}/portal/#/transactions/${encodeURIComponent(id)}`);
    await page.getByRole('heading', { level: 1, name: `Transaction ${shows}` }).waitFor({ timeout: 10_000 });
  };
  const refundPosts = (): Request[] => {
    const seen: Request[] = [];
    page.on('request', (r) => {
      if (r.method() === 'POST' && new URL(r.url()).pathname === '/v1/retain/refunds') seen.push(r);
    });
    return seen;
  };
  const button = () => page.getByRole('button', { name: 'Refund / stop', exact: true });
  const yes = () => page.getByRole('button', { name: 'Yes, refund / stop' });
  /** "Refund / stop", then yes to the question it asks. */
  const refundNow = async () => {
    await button().click();
    await yes().click();
  };

  it('refunds the amount typed, a comma as decimal separator; an amount it cannot read is refused on the page and never sent', async () => {
    await open(captured[0]!);
    const posts = refundPosts();
    await page.getByLabel(/Amount/).fill('5,50');
    await refundNow();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('1 refunds received');
    expect(await refunds(captured[0]!)).toEqual([5.5]);
    expect(posts.map((r) => r.postDataJSON())).toEqual([{ refunds: [{ id: captured[0], amount: 5.5 }] }]);

    for (const [typed, says] of [
      ['$5', /digits/],
      ['Infinity', /digits/],
      ['1e3', /digits/],
      ['-1', /digits/],
      ['5.5.5', /digits/],
      ['0', /greater than 0/],
      ['5.555', /at most 2 decimals/],
      ['1,000', /thousands separator/],
    ] as const) {
      await page.getByLabel(/Amount/).fill(typed);
      await button().click();
      await expect.poll(() => page.getByRole('alert').textContent(), { timeout: 2000 }).toMatch(says);
      expect(await page.getByLabel(/Amount/).getAttribute('aria-invalid')).toBe('true');
    }
    await shot(page, 'refund-amount-refused');
    expect(posts).toHaveLength(1);
    expect(await refunds(captured[0]!)).toEqual([5.5]);
  });

  it('a double click on "Yes, refund / stop" sends one request, with an Idempotency-Key, and makes one refund', async () => {
    await open(captured[1]!);
    const posts = refundPosts();
    // The answer comes a second late: long enough for the second click to land while it is awaited.
    const disabledInFlight: boolean[] = [];
    await page.route('**/v1/retain/refunds', async (route) => {
      await new Promise((r) => setTimeout(r, 1000));
      disabledInFlight.push(await button().isDisabled());
      await route.continue();
    });
    await page.getByLabel(/Amount/).fill('5');
    await button().click();
    await yes().dblclick();
    await expect
      .poll(() => page.getByRole('status').textContent(), { timeout: 10_000 })
      .toContain('1 refunds received');
    await Promise.all(posts.map((r) => r.response()));
    await page.unrouteAll();
    expect(await refunds(captured[1]!)).toEqual([5]);
    expect(posts).toHaveLength(1);
    expect(posts[0]!.headers()['idempotency-key']).toMatch(/^[\x21-\x7e]{1,255}$/);
    expect(disabledInFlight).toEqual([true]);
    expect(await button().isDisabled()).toBe(false);
  });

  it('a submission whose answer was lost is sent again with the same key and refunds once; a new one gets a new key', async () => {
    await open(captured[1]!);
    const posts = refundPosts();
    let lose = true;
    // The first answer is lost on the way back: the refund is made, the page gets a network error.
    await page.route('**/v1/retain/refunds', async (route) => {
      if (!lose) return route.continue();
      lose = false;
      await route.fetch();
      await route.abort('connectionreset');
    });
    await page.getByLabel(/Amount/).fill('2');
    await refundNow();
    await expect.poll(() => page.getByRole('alert').textContent(), { timeout: 10_000 }).toMatch(/again/);
    await shot(page, 'refund-answer-lost');
    await refundNow();
    await expect
      .poll(() => page.getByRole('status').textContent(), { timeout: 10_000 })
      .toContain('1 refunds received');
    expect(await refunds(captured[1]!)).toEqual([5, 2]);
    // Pressed again after an answer: another partial refund, as the merchant asked.
    await refundNow();
    await expect.poll(() => posts.length).toBe(3);
    await expect.poll(() => refunds(captured[1]!)).toEqual([5, 2, 2]);
    await page.unrouteAll();
    const keys = posts.map((r) => r.headers()['idempotency-key']);
    expect(keys[0]).toBeTruthy();
    expect(keys[1]).toBe(keys[0]);
    expect(keys[2]).toBeTruthy();
    expect(keys[2]).not.toBe(keys[0]);
  });

  it("a transaction opened by an attempt's retain_transaction_id refunds and lists the pushes of its transaction", async () => {
    const id = captured[2]!;
    const rows = (await api.request('GET', `/v1/retain/transactions/${id}?related=true`)).json.data;
    const attempt = rows[1].retain_transaction_id as string;
    expect(attempt).toBeTruthy();
    expect(attempt).not.toBe(id);
    await waitFor(
      async () =>
        ((await api.request('GET', `/v1/retain/webhook-messages?transaction_id=${id}`)).json.data as unknown[]).length >
        0,
      { what: 'the transaction has a push' },
    );
    await open(attempt, id);
    const pushes = page.getByRole('table', { name: /Pushes of this transaction/ });
    await expect.poll(() => pushes.textContent()).toContain('retry succeeded');
    await page.getByLabel(/Amount/).fill('1');
    await refundNow();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('1 refunds received');
    expect(await refunds(id)).toEqual([1]);
    await shot(page, 'refund-by-attempt-id');
  });

  it('asks before anything is sent, naming the amount and the transaction; Cancel sends nothing', async () => {
    await open(captured[0]!);
    const posts = refundPosts();
    await page.getByLabel(/Amount/).fill('3');
    // The focus is on the answer as soon as it is shown, and nothing has been sent yet.
    expect(await focusWhenShown(page, 'Yes, refund / stop', () => button().click())).toBe('Yes, refund / stop');
    const question = page.getByRole('group', { name: 'Confirm refund / stop' });
    expect(await question.textContent()).toContain(`Refund $3.00 of transaction ${captured[0]}?`);
    await shot(page, 'refund-confirm');
    await question.getByRole('button', { name: 'Cancel' }).click();
    expect(await question.count()).toBe(0);
    // An empty amount says what it does.
    await page.getByLabel(/Amount/).fill('');
    await button().click();
    await expect
      .poll(() => question.textContent({ timeout: 1000 }).catch(() => null), { timeout: 5000 })
      .toMatch(/all that can be refunded/);
    await question.getByRole('button', { name: 'Cancel' }).click();
    await page.waitForTimeout(500);
    expect(posts).toHaveLength(0);
    expect(await refunds(captured[0]!)).toEqual([5.5]);
    expect(await page.getByRole('status').count()).toBe(0);
  });
});
