/// <reference lib="dom" />
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventName } from '@retain/domain';
import { announce } from '@retain/queues';
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
import { TRANSACTION_STATUSES } from '@retain/domain';
import { launchChromium, logIn, reportErrors, shot } from './chromium';

// The transaction list of a merchant with more transactions than one page: every one of them can be
// reached page by page, and every status the API knows can be filtered on. The push log too.
describe("the portal's transaction list and push log", () => {
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

  it('pages through a push log longer than one page (100), newest first, and back', async () => {
    const db = await testDb();
    const [{ id: merchantId }] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [merchant.login]);
    // No dispatcher runs: the pushes stay pending, as for a merchant whose endpoint is down.
    await db.transaction((m) =>
      announce(
        m,
        Array.from({ length: 105 }, (_, i) => ({
          merchantId,
          eventName: EventName.RetrySucceeded,
          payloadId: String(i).padStart(40, 'q'),
          merchantTransactionId: `inv-log-${i}`,
          content: { id: `inv-log-${i}` },
        })),
      ),
    );
    const api = new ApiClient(base, merchant.api_key);
    const first = (await api.request('GET', '/v1/retain/webhook-messages?limit=100')).json;
    const second = (await api.request('GET', first.next)).json;
    const expected = [...first.data, ...second.data].map((m: { message_id: string }) => m.message_id);
    expect(expected).toHaveLength(105);
    const pushes = async (): Promise<string[]> => {
      await page.getByTestId('pushes').locator('tbody tr td').first().waitFor({ timeout: 10_000 });
      return page.getByTestId('pushes').locator('tbody tr td:first-child').allTextContents();
    };
    await page.goto(`${base}/portal/#/pushes`);
    await expect.poll(pushes).toEqual(expected.slice(0, 100));
    const pager = page.getByRole('group', { name: 'Pages of pushes' });
    expect(await pager.getByRole('button', { name: 'Previous page' }).isDisabled()).toBe(true);
    await pager.getByRole('button', { name: 'Next page' }).click();
    await expect.poll(pushes).toEqual(expected.slice(100));
    expect(await pager.getByRole('button', { name: 'Next page' }).isDisabled()).toBe(true);
    await shot(page, 'pushes-page-2');
    await pager.getByRole('button', { name: 'Previous page' }).click();
    await expect.poll(pushes).toEqual(expected.slice(0, 100));
  });

  it('offers every status the API lists by', async () => {
    await page.goto(`${base}/portal/#/transactions`);
    const options = await page.getByLabel('Status').locator('option').allTextContents();
    expect(options.slice(1).sort()).toEqual([...TRANSACTION_STATUSES].sort());
  });

  it('long values (an id of 128 characters, a long login) wrap instead of widening the page', async () => {
    const long = await createMerchant(null, `m_${'longlogin'.repeat(6)}`);
    const id = `tx_${'L'.repeat(121)}_end`;
    expect(id).toHaveLength(128);
    expect((await new ApiClient(base, long.api_key).submit([txn({ id })])).status).toBe(200);
    for (const width of [390, 1280]) {
      const phone = await (await browser.newContext({ viewport: { width, height: 844 } })).newPage();
      reportErrors(phone);
      await logIn(phone, base, long);
      await phone.goto(`${base}/portal/#/transactions/${encodeURIComponent(id)}`);
      await phone.getByTestId('timeline').waitFor({ timeout: 10_000 });
      expect(await phone.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth + 1)).toBe(true);
      // Every figure is shown whole (the masked card number too), none cut at its box's edge.
      const clipped = await phone.evaluate(() =>
        [...document.querySelectorAll('h1, .figures dd')]
          .filter((e) => e.scrollWidth > e.clientWidth + 1)
          .map((e) => e.textContent),
      );
      expect(clipped).toEqual([]);
      await shot(phone, `long-id-${width}`);
      await phone.close();
    }
  });

  it('says it is loading, not that there is nothing, while the list or the overview is on its way', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    await page.route(/\/v1\/retain\/(transactions|analytics)\?/, async (route) => {
      await held;
      await route.continue();
    });
    await page.goto(`${base}/portal/#/pushes`);
    await page.goto(`${base}/portal/#/transactions`);
    const body = page.getByTestId('transactions').locator('tbody');
    await body.waitFor({ timeout: 10_000 });
    expect(await body.textContent()).toBe('Loading…');
    expect(await page.getByText('Nothing to show.').count()).toBe(0);
    await page.goto(`${base}/portal/#/overview`);
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    expect(await page.getByRole('main').getByText('Loading…').count()).toBe(1);
    release();
    await page.getByRole('heading', { level: 2, name: 'USD' }).waitFor({ timeout: 10_000 });
    expect(await page.getByText('Loading…').count()).toBe(0);
    await page.goto(`${base}/portal/#/transactions`);
    await expect.poll(() => body.locator('tr').count(), { timeout: 10_000 }).toBe(50);
    await page.unrouteAll();
  });
});
