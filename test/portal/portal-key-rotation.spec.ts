/// <reference lib="dom" />
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiClient, closeTestDb, createMerchant, startApp, type RunningApp, usePrivateDatabase } from '@retain/testing';
import { accessible, focusWhenShown, launchChromium, logIn, reportErrors, shot } from './chromium';

// Rotating a credential from the portal commits on the server before the page sees the new value:
// the page must hand it to the merchant whatever the clipboard does (refused after an awaited fetch
// in Safari, absent on a plain-http origin), or the merchant is left with no key.
describe('credential rotation in the portal without a usable clipboard', () => {
  usePrivateDatabase('ptk');
  let app: RunningApp;
  let browser: Browser;
  let base = '';
  const contexts: BrowserContext[] = [];

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

  const pageWith = async (clipboard: 'refuses' | 'absent'): Promise<Page> => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    contexts.push(context);
    await context.addInitScript(
      clipboard === 'refuses'
        ? () => {
            Clipboard.prototype.writeText = () => Promise.reject(new DOMException('Write denied', 'NotAllowedError'));
          }
        : () => {
            Object.defineProperty(Navigator.prototype, 'clipboard', { get: () => undefined });
          },
    );
    const page = await context.newPage();
    reportErrors(page);
    return page;
  };
  const stored = (page: Page) => page.evaluate(() => JSON.stringify({ ...localStorage, ...sessionStorage }));

  it('the new API key is shown once in a read-only field, works, and logs the merchant in', async () => {
    const merchant = await createMerchant();
    const page = await pageWith('refuses');
    await logIn(page, base, merchant);
    await page.getByRole('link', { name: 'Settings' }).click();
    await page.getByRole('button', { name: 'Rotate API key' }).click();
    await page.getByRole('button', { name: 'Yes, rotate the API key' }).click();
    const field = page.getByLabel('New API key', { exact: true });
    await field.waitFor({ timeout: 10_000 });
    const key = await field.inputValue();
    expect(key).not.toBe(merchant.api_key);
    expect(await field.getAttribute('readonly')).not.toBeNull();
    expect(await page.getByRole('main').textContent()).toMatch(/will not be shown again/i);
    // It is the merchant's key now; the old one is revoked.
    expect((await new ApiClient(base, key).request('GET', '/v1/retain/merchant')).status).toBe(200);
    expect((await new ApiClient(base, merchant.api_key).request('GET', '/v1/retain/merchant')).status).toBe(401);
    // Copying fails here: the page says so, and the key stays on screen to be copied by hand.
    await page.getByRole('button', { name: 'Copy' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toMatch(/copy it/i);
    expect(await field.inputValue()).toBe(key);
    expect(page.url()).not.toContain(key);
    expect(await stored(page)).toBe('{}');
    await accessible(page);
    await shot(page, 'api-key-rotated-no-clipboard');
    // Once the merchant says it is stored: gone from the page, log in with it.
    await page.getByRole('button', { name: /stored/ }).click();
    await page.getByLabel('Login').waitFor();
    expect(await page.getByRole('status').textContent()).toContain('Log in with the new key');
    expect(await page.content()).not.toContain(key);
    await logIn(page, base, { login: merchant.login, api_key: key });
    expect(await stored(page)).toBe('{}');
  });

  it('without a clipboard at all, the new webhook secret is shown once and the key rotation too', async () => {
    const merchant = await createMerchant();
    const page = await pageWith('absent');
    await logIn(page, base, merchant);
    await page.getByRole('link', { name: 'Settings' }).click();
    await page.getByRole('button', { name: 'Rotate webhook secret' }).click();
    await page.getByRole('button', { name: 'Yes, rotate the webhook secret' }).click();
    const secretField = page.getByLabel('New webhook secret', { exact: true });
    await secretField.waitFor({ timeout: 10_000 });
    const secret = await secretField.inputValue();
    expect(secret).toMatch(/^whsec_/);
    expect(secret).not.toBe(merchant.webhook_secret);
    await page.getByRole('button', { name: 'Copy' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toMatch(/copy it/i);
    await page.getByRole('button', { name: /stored/ }).click();
    expect(await page.content()).not.toContain(secret);
    // Still logged in after a webhook secret rotation; now the API key.
    await page.getByRole('button', { name: 'Rotate API key' }).click();
    await page.getByRole('button', { name: 'Yes, rotate the API key' }).click();
    const keyField = page.getByLabel('New API key', { exact: true });
    await keyField.waitFor({ timeout: 10_000 });
    const key = await keyField.inputValue();
    expect((await new ApiClient(base, key).request('GET', '/v1/retain/merchant')).status).toBe(200);
    await page.getByRole('button', { name: /stored/ }).click();
    await logIn(page, base, { login: merchant.login, api_key: key });
  });

  /**
   * Settings, a rotation's button pressed and its question answered Cancel: the question says `says`, has the
   * focus on its Yes, and nothing was sent. Returns the page and the rotations it sends from then on.
   */
  const cancelRotation = async (merchant: { login: string; api_key: string }, credential: string, says: RegExp) => {
    const page = await pageWith('refuses');
    await logIn(page, base, merchant);
    await page.getByRole('link', { name: 'Settings' }).click();
    await page.getByRole('heading', { name: 'Settings' }).waitFor();
    const rotations: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'POST' && r.url().endsWith('/rotate')) rotations.push(r.url());
    });
    // The focus is on the answer as soon as it is shown.
    const yes = `Yes, rotate the ${credential}`;
    expect(
      await focusWhenShown(page, yes, () => page.getByRole('button', { name: `Rotate ${credential}` }).click()),
    ).toBe(yes);
    const question = page.getByRole('group', { name: `Confirm ${credential} rotation` });
    expect(await question.textContent()).toMatch(says);
    await accessible(page);
    await shot(page, `${credential.replace(' ', '-')}-rotation-confirm`);
    await question.getByRole('button', { name: 'Cancel' }).click();
    expect(await question.count()).toBe(0);
    await page.waitForLoadState('networkidle');
    expect(rotations).toEqual([]);
    return { page, rotations };
  };

  it('asks before rotating the API key, saying what stops working; Cancel keeps the key', async () => {
    const merchant = await createMerchant();
    const { page } = await cancelRotation(
      merchant,
      'API key',
      /current key stops working at once.*every portal session ends/i,
    );
    expect((await new ApiClient(base, merchant.api_key).request('GET', '/v1/retain/merchant')).status).toBe(200);
    expect(await page.getByRole('button', { name: 'Log out' }).count()).toBe(1);
  });

  it('asks before rotating the webhook secret, saying pushes fail verification until the endpoint has it; Cancel keeps it', async () => {
    const merchant = await createMerchant();
    const { page, rotations } = await cancelRotation(
      merchant,
      'webhook secret',
      /next push is signed with the new secret.*until it has the new secret/i,
    );
    // Asked again and confirmed: rotated, the new secret shown once.
    await page.getByRole('button', { name: 'Rotate webhook secret' }).click();
    await page.getByRole('button', { name: 'Yes, rotate the webhook secret' }).click();
    const field = page.getByLabel('New webhook secret', { exact: true });
    await field.waitFor({ timeout: 10_000 });
    expect(await field.inputValue()).not.toBe(merchant.webhook_secret);
    expect(rotations).toHaveLength(1);
  });
});
