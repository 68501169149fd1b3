/// <reference lib="dom" />
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApiClient,
  closeTestDb,
  createMerchant,
  startApp,
  txn,
  type RunningApp,
  type TestMerchant,
  usePrivateDatabase,
} from '@retain/testing';
import { TRANSACTION_STATUSES } from '@retain/domain';
import { launchChromium, logIn, reportErrors, shot } from './chromium';

// The transaction list of a merchant with more transactions than one page: every one of them can be
// reached page by page, and every status the API knows can be filtered on.
describe("the portal's transaction list", () => {
  usePrivateDatabase('ptl2');
  let app: RunningApp;
  let merchant: TestMerchant;
  let browser: Browser;
  let page: Page;
  let base = '';
  let ids: string[] = [];

  beforeAll(async () => {
    app = await startApp('intake-api');
    base = app.url;
    merchant = await createMerchant();
    const api = new ApiClient(base, merchant.api_key);
    expect((await api.submit(Array.from({ length: 56 }, () => txn()))).status).toBe(200);
    // Newest first, as the list shows them.
    ids = ((await api.request('GET', '/v1/retain/transactions?limit=100')).json.data as { id: string }[]).map(
      (t) => t.id,
    );
    expect(ids).toHaveLength(56);
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

  /** The ids of the rows on screen, once the list has loaded. */
  const shown = async (): Promise<string[]> => {
    await page.getByTestId('transactions').locator('tbody tr a').first().waitFor({ timeout: 10_000 });
    return page.getByTestId('transactions').locator('tbody tr td:first-child').allTextContents();
  };

  it('pages through every transaction, newest first, and back', async () => {
    await page.goto(`${base}/portal/#/transactions`);
    await expect.poll(shown).toEqual(ids.slice(0, 50));
    expect(await page.getByRole('button', { name: 'Previous page' }).isDisabled()).toBe(true);
    await shot(page, 'list-page-1');
    await page.getByRole('button', { name: 'Next page' }).click();
    await expect.poll(shown).toEqual(ids.slice(50));
    expect(await page.getByRole('button', { name: 'Next page' }).isDisabled()).toBe(true);
    await shot(page, 'list-page-2');
    await page.getByRole('button', { name: 'Previous page' }).click();
    await expect.poll(shown).toEqual(ids.slice(0, 50));
    // A filter starts again from its first page.
    await page.getByRole('button', { name: 'Next page' }).click();
    await expect.poll(shown).toEqual(ids.slice(50));
    await page.getByLabel('Status').selectOption('Failed');
    await expect.poll(shown).toEqual(ids.slice(0, 50));
  });

  it('offers every status the API lists by', async () => {
    await page.goto(`${base}/portal/#/transactions`);
    const options = await page.getByLabel('Status').locator('option').allTextContents();
    expect(options.slice(1).sort()).toEqual([...TRANSACTION_STATUSES].sort());
  });
});
