/// <reference lib="dom" />
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeTestDb, createMerchant, startApp, type RunningApp, usePrivateDatabase } from '@retain/testing';
import { launchChromium, logIn, reportErrors, shot } from './chromium';

// The portal used with the keyboard alone: the skip link is the first stop and takes the focus to the
// page's content, on the page the merchant is on (the portal routes by the address's #fragment, so
// a plain link to #main would be a route of its own).
describe('the portal with the keyboard', () => {
  usePrivateDatabase('ptk');
  let app: RunningApp;
  let browser: Browser;
  let page: Page;
  let base = '';

  beforeAll(async () => {
    app = await startApp('intake-api');
    base = app.url;
    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    reportErrors(page);
    await logIn(page, base, await createMerchant());
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await app?.stop();
    await closeTestDb();
  });

  for (const [hash, heading] of [
    ['#/transactions', 'Transactions'],
    ['#/pushes', 'Pushes'],
    ['#/settings', 'Settings'],
  ] as const) {
    it(`"Skip to content" on ${heading} moves the focus to that page's content and stays on ${heading}`, async () => {
      // A fresh load: the focus starts at the top of the document.
      await page.goto(`${base}/portal/${hash}`);
      await page.reload();
      await page.getByRole('heading', { level: 1, name: heading }).waitFor({ timeout: 10_000 });
      await page.keyboard.press('Tab');
      expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to content');
      await page.keyboard.press('Enter');
      await expect.poll(() => page.evaluate(() => document.activeElement?.id)).toBe('main');
      expect(await page.evaluate(() => location.hash)).toBe(hash);
      expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe(heading);
      // The next Tab goes on from the content, not from the navigation.
      await page.keyboard.press('Tab');
      expect(await page.evaluate(() => document.activeElement?.closest('main') !== null)).toBe(true);
      await shot(page, `keyboard-skip-${heading.toLowerCase()}`);
    });
  }
});
