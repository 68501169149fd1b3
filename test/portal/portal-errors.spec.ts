/// <reference lib="dom" />
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApiClient,
  closeTestDb,
  createMerchant,
  startApp,
  testDb,
  txn,
  type RunningApp,
  type TestMerchant,
  usePrivateDatabase,
} from '@retain/testing';
import { launchChromium, logIn, reportErrors, shot } from './chromium';

/** What a proxy in front of intake-api answers when intake-api is away: HTML, not the API's JSON. */
const BAD_GATEWAY = {
  status: 502,
  contentType: 'text/html',
  body: '<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>',
};

// The portal when a request fails without an API answer: a proxy's HTML error page, no answer at all
// (network down). The page says what happened in words the merchant can act on, and an error stays on
// screen only until the next request of that page succeeds.
describe('the portal when a request fails', () => {
  usePrivateDatabase('pte');
  let app: RunningApp;
  let merchant: TestMerchant;
  let browser: Browser;
  let page: Page;
  let base = '';

  beforeAll(async () => {
    app = await startApp('intake-api');
    base = app.url;
    merchant = await createMerchant();
    expect((await new ApiClient(base, merchant.api_key).submit([txn(), txn()])).status).toBe(200);
    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    reportErrors(page);
    await logIn(page, base, merchant);
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await app?.stop();
    await closeTestDb();
  });

  const alert = () => page.getByRole('alert');
  const rows = () => page.getByTestId('transactions').locator('tbody tr');

  it('a login without an answer says Retain could not be reached', async () => {
    const fresh = await (await browser.newContext()).newPage();
    await fresh.goto(`${base}/portal/`);
    await fresh.route('**/v1/retain/session', (route) =>
      route.request().method() === 'POST' ? route.abort('internetdisconnected') : route.continue(),
    );
    await fresh.getByLabel('Login').fill(merchant.login);
    await fresh.getByLabel('API key').fill(merchant.api_key);
    await fresh.getByRole('button', { name: 'Log in' }).click();
    await expect
      .poll(() => fresh.getByRole('alert').textContent(), { timeout: 30_000 })
      .toMatch(/could not reach Retain/i);
    await shot(fresh, 'error-login-network');
    await fresh.unrouteAll();
    await fresh.getByRole('button', { name: 'Log in' }).click();
    await fresh.getByRole('heading', { name: 'Overview' }).waitFor({ timeout: 30_000 });
  });

  it("a proxy's HTML error page is reported by its status, not as unreadable JSON; the next good answer clears it", async () => {
    await page.goto(`${base}/portal/#/transactions`);
    await expect.poll(() => rows().count(), { timeout: 30_000 }).toBe(2);
    await page.route('**/v1/retain/transactions?*', (route) => route.fulfill(BAD_GATEWAY));
    await page.getByLabel('Status').selectOption('Captured');
    await expect.poll(() => alert().textContent(), { timeout: 30_000 }).toMatch(/502/);
    const said = (await alert().textContent()) ?? '';
    expect(said).not.toMatch(/JSON|token|<html/i);
    // The rows of the filter before are not shown under this one.
    expect(await rows().textContent()).toBe('Nothing to show.');
    await shot(page, 'error-list-bad-gateway');
    await page.unrouteAll();
    await page.getByLabel('Status').selectOption('Failed');
    await expect.poll(() => rows().count(), { timeout: 30_000 }).toBe(2);
    expect(await alert().count()).toBe(0);
  });

  it('no answer at all says Retain could not be reached', async () => {
    await page.goto(`${base}/portal/#/transactions`);
    await expect.poll(() => rows().count(), { timeout: 30_000 }).toBe(2);
    await page.route('**/v1/retain/transactions?*', (route) => route.abort('internetdisconnected'));
    await page.getByLabel('Status').selectOption('Captured');
    await expect.poll(() => alert().textContent(), { timeout: 30_000 }).toMatch(/could not reach Retain/i);
    expect(await alert().textContent()).not.toContain('Failed to fetch');
    await shot(page, 'error-list-network');
    await page.unrouteAll();
  });

  it('the overview never shows what it found for another range under a range whose request failed', async () => {
    const nothing = page.getByText('No failed transactions submitted in this range.');
    await page.goto(`${base}/portal/#/overview`);
    await page.getByLabel('From').fill('2025-01-01');
    await page.getByLabel('To').fill('2025-01-02');
    await nothing.waitFor({ timeout: 30_000 });
    await page.route('**/v1/retain/analytics?*', (route) => route.fulfill(BAD_GATEWAY));
    await page.getByLabel('To').fill('2025-01-03');
    await expect.poll(() => alert().textContent(), { timeout: 30_000 }).toMatch(/502/);
    expect(await nothing.count()).toBe(0);
    await shot(page, 'error-overview-bad-gateway');
    await page.unrouteAll();
  });

  it('the overview shows the last range asked for, even when an earlier range answers after it', async () => {
    const nothing = page.getByText('No failed transactions submitted in this range.');
    await page.goto(`${base}/portal/#/overview`);
    await page.getByLabel('From').fill('2025-01-01');
    await page.getByLabel('To').fill('2025-01-05');
    await nothing.waitFor({ timeout: 30_000 });
    // The next range's request is slow (3 s); the one after it, which has today's two transactions, is not.
    await page.route('**/v1/retain/analytics?*', async (route) => {
      if (route.request().url().includes('to=2025-01-06')) await new Promise((r) => setTimeout(r, 3000));
      await route.continue();
    });
    await page.getByLabel('To').fill('2025-01-06');
    await page.getByLabel('To').fill(new Date().toISOString().slice(0, 10));
    await page.locator('section[data-currency="USD"]').waitFor({ timeout: 30_000 });
    // The slow answer for 2025-01-06 came meanwhile: it is not shown under today's range.
    await new Promise((r) => setTimeout(r, 4000));
    expect({ usd: await page.locator('section[data-currency="USD"]').count(), nothing: await nothing.count() }).toEqual(
      {
        usd: 1,
        nothing: 0,
      },
    );
    await page.unrouteAll();
  });

  it("a transaction's pushes that could not be read are not shown as none", async () => {
    const t = txn();
    expect((await new ApiClient(base, merchant.api_key).submit([t])).status).toBe(200);
    await page.route('**/v1/retain/webhook-messages?*', (route) => route.fulfill(BAD_GATEWAY));
    await page.goto(`${base}/portal/#/transactions/${String(t['id'])}`);
    await expect.poll(() => alert().textContent(), { timeout: 30_000 }).toMatch(/pushes.*502/i);
    const pushes = page.locator('table', { has: page.getByText('Pushes of this transaction') });
    expect(await pushes.getByText('Nothing to show.').count()).toBe(0);
    await page.unrouteAll();
  });

  it('a double click on Send test push sends one (its button waits for the answer)', async () => {
    const testPushes = async (): Promise<number> =>
      (
        await (
          await testDb()
        ).query(
          `SELECT count(*)::int AS n FROM webhook_messages w JOIN merchants m ON m.id = w.merchant_id
            WHERE m.login = $1 AND w.event_name = 'test'`,
          [merchant.login],
        )
      )[0].n;
    await page.goto(`${base}/portal/#/pushes`);
    const send = page.getByRole('button', { name: 'Send test push' });
    await send.waitFor({ timeout: 30_000 });
    const before = await testPushes();
    await send.dblclick();
    await page.getByText('Test push sent').waitFor({ timeout: 30_000 });
    await new Promise((r) => setTimeout(r, 1000));
    expect((await testPushes()) - before).toBe(1);
  });

  it('the webhook URL that could not be read is never saved over: the page says so and Save waits', async () => {
    await new ApiClient(base, merchant.api_key).request('PUT', '/v1/retain/merchant/webhook', {
      url: 'https://hooks.example.com/kept',
    });
    await page.goto(`${base}/portal/#/overview`); // the pushes page is opened afresh below
    await page.route('**/v1/retain/merchant/webhook', (route) =>
      route.request().method() === 'GET' ? route.fulfill(BAD_GATEWAY) : route.continue(),
    );
    await page.goto(`${base}/portal/#/pushes`);
    await expect.poll(() => alert().textContent(), { timeout: 30_000 }).toMatch(/webhook URL.*502/i);
    expect(await page.getByRole('button', { name: 'Save' }).isDisabled()).toBe(true);
    await shot(page, 'error-webhook-url-unread');
    await page.unrouteAll();
    const stored = await new ApiClient(base, merchant.api_key).request('GET', '/v1/retain/merchant/webhook');
    expect(stored.json).toMatchObject({ url: 'https://hooks.example.com/kept' });
  });
});
