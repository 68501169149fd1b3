/// <reference lib="dom" />
import type { Browser, BrowserContext, Page, Route } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  closeTestDb,
  createMerchant,
  startApp,
  testDb,
  type RunningApp,
  type TestMerchant,
  usePrivateDatabase,
} from '@retain/testing';
import { accessible, launchChromium, logIn, reportErrors, shot } from './chromium';

// The portal when its session ends under it (decisions §14: 12 h, 30 min idle, logout) and when its
// address names nothing it can read: it returns to the login form saying the session ended, and a
// malformed address shows "not found" instead of a blank page.
describe('the portal when its session ends, and at a malformed address', () => {
  usePrivateDatabase('pts');
  let app: RunningApp;
  let browser: Browser;
  let base = '';
  const contexts: BrowserContext[] = [];
  const errors: string[] = [];

  beforeAll(async () => {
    app = await startApp('intake-api');
    base = app.url;
    browser = await launchChromium();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await app?.stop();
    await closeTestDb();
  });

  const newPage = async (context?: BrowserContext): Promise<Page> => {
    if (!context) {
      context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      contexts.push(context);
    }
    const page = await context.newPage();
    reportErrors(page);
    page.on('pageerror', (e) => errors.push(e.message));
    return page;
  };
  /** The login form, with what it says about the session. */
  const loginShown = async (page: Page): Promise<string> => {
    await page.getByLabel('Login').waitFor({ timeout: 10_000 });
    return (await page.getByRole('status').textContent()) ?? '';
  };

  it('an expired session returns the portal to its login form, saying so; logging in again goes back to the page', async () => {
    const merchant: TestMerchant = await createMerchant();
    const page = await newPage();
    await logIn(page, base, merchant);
    // The page's own list request answered first: one reaching the API after the session ended would
    // return the portal to the login form before the click below. Its answer is waited for itself:
    // `networkidle` can resolve before a loaded machine's page has even sent it.
    const listed = page.waitForResponse((r) => new URL(r.url()).pathname === '/v1/retain/transactions');
    await page.getByRole('link', { name: 'Transactions' }).click();
    await page.getByRole('heading', { name: 'Transactions' }).waitFor();
    await listed;
    // 31 minutes without a request (the database clock, as the session's own expiry).
    const db = await testDb();
    await db.query(
      `UPDATE portal_sessions SET last_seen_at = now() - interval '31 minutes'
        WHERE merchant_id = (SELECT id FROM merchants WHERE login = $1)`,
      [merchant.login],
    );
    await page.getByRole('link', { name: 'Pushes' }).click();
    expect(await loginShown(page)).toMatch(/session has ended/i);
    // Nothing of the logged-in portal is left on screen.
    expect(await page.getByRole('button', { name: 'Log out' }).count()).toBe(0);
    expect(await page.content()).not.toContain('Authentication required');
    await accessible(page);
    await shot(page, 'session-expired');
    await page.getByLabel('Login').fill(merchant.login);
    await page.getByLabel('API key').fill(merchant.api_key);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Pushes' }).waitFor({ timeout: 10_000 });
    expect(await page.getByRole('status').count()).toBe(0);
  });

  it('logged out in another tab: the next write returns to the login form instead of failing on the page', async () => {
    const merchant = await createMerchant();
    const page = await newPage();
    await logIn(page, base, merchant);
    await page.getByRole('link', { name: 'Settings' }).click();
    // Settings reads nothing; logIn waited for the overview's read (one reaching the API after the
    // logout would show the login form before the write below).
    await page.getByRole('heading', { name: 'Settings' }).waitFor();
    // Another tab of the same browser logs out: the session ends on the server for both.
    const other = await newPage(page.context());
    await other.goto(`${base}/portal/`);
    await other.getByRole('button', { name: 'Log out' }).click();
    await other.getByLabel('Login').waitFor();
    await page.getByRole('button', { name: 'Rotate webhook secret' }).click();
    await page.getByRole('button', { name: 'Yes, rotate the webhook secret' }).click();
    expect(await loginShown(page)).toMatch(/session has ended/i);
    expect(await page.content()).not.toContain('RET401');
    await shot(page, 'session-ended-elsewhere');
  });

  it('a logout the server did not answer says so and keeps the portal: the session is still live', async () => {
    const merchant = await createMerchant();
    const page = await newPage();
    await logIn(page, base, merchant);
    const sessionStatus = () =>
      page.evaluate(
        async () => (await fetch('/v1/retain/session', { headers: { 'X-Requested-With': 'retain-portal' } })).status,
      );
    // No answer (the connection drops), then a failing server: either way the session was not ended.
    for (const fail of [
      (route: Route) => route.abort('connectionreset'),
      (route: Route) =>
        route.fulfill({ status: 503, json: { code: 'RET900', message: 'Unable to submit, please try again' } }),
    ]) {
      await page.route('**/v1/retain/session', (route) =>
        route.request().method() === 'DELETE' ? fail(route) : route.continue(),
      );
      await page.getByRole('button', { name: 'Log out' }).click();
      await expect
        .poll(
          () =>
            page
              .getByRole('alert')
              .textContent({ timeout: 1000 })
              .catch(() => null),
          { timeout: 10_000 },
        )
        .toMatch(/not logged out.*try again/i);
      expect(await page.getByRole('button', { name: 'Log out' }).count()).toBe(1);
      expect(await page.getByLabel('API key').count()).toBe(0);
      expect(await sessionStatus()).toBe(200);
      await page.unrouteAll();
    }
    await shot(page, 'logout-not-answered');
    // Pressed again with the server answering: logged out, on the server too.
    await page.getByRole('button', { name: 'Log out' }).click();
    expect(await loginShown(page)).toMatch(/logged out/i);
    expect(await page.getByRole('alert').count()).toBe(0);
    expect(await sessionStatus()).toBe(401);
  });

  it('a malformed transaction address shows "not found" with the way back, not a blank page', async () => {
    const merchant = await createMerchant();
    const page = await newPage();
    await logIn(page, base, merchant);
    const before = errors.length;
    for (const bad of ['%', '%E0%A4%A', 'abc%zz']) {
      await page.goto(`${base}/portal/#/transactions/${bad}`);
      await page.getByRole('heading', { name: 'Transaction not found' }).waitFor({ timeout: 10_000 });
      expect(await page.getByRole('alert').textContent()).toContain(bad);
      // The header stays: the merchant is still logged in.
      expect(await page.getByRole('button', { name: 'Log out' }).count()).toBe(1);
    }
    expect(errors.slice(before)).toEqual([]);
    await accessible(page);
    await shot(page, 'transaction-malformed-address');
    await page.getByRole('link', { name: 'Back to transactions' }).click();
    await page.getByRole('heading', { name: 'Transactions' }).waitFor();
  });
});
