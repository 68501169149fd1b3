/// <reference lib="dom" />
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApiClient,
  closeTestDb,
  createMerchant,
  startApp,
  txn,
  waitFor,
  type RunningApp,
  type TestMerchant,
  usePrivateDatabase,
} from '@retain/testing';
import { launchChromium, logIn, reportErrors, shot } from './chromium';

const ENV = { RETRY_TIME_SCALE: '10000', JOB_LOCK_MS: '2000' };
const PARTIAL_CARD = '4000000000003220';

// A partial authorization (decisions §15) in the merchant portal: the page tells the merchant what was
// captured (and so what can be refunded), as the API's partial_amount does, not only what was asked.
describe('a partial authorization in the merchant portal', () => {
  usePrivateDatabase('ppa');
  const apps: RunningApp[] = [];
  let merchant: TestMerchant;
  let api: ApiClient;
  let browser: Browser;
  let page: Page;
  let base = '';
  let id = '';

  beforeAll(async () => {
    apps.push(
      ...(await Promise.all([
        startApp('intake-api', { env: ENV }),
        startApp('submission-validator', { env: ENV }),
        startApp('retry-worker', { env: ENV }),
      ])),
    );
    base = apps[0]!.url;
    merchant = await createMerchant();
    api = new ApiClient(base, merchant.api_key);
    const t = txn({ amount: 19.99 }, PARTIAL_CARD);
    id = t['id'] as string;
    expect((await api.submit([t])).status).toBe(200);
    await waitFor(
      async () => (await api.request('GET', `/v1/retain/transactions/${id}`)).json.data[0].status === 'Captured',
      { timeoutMs: 100_000, what: 'Captured' },
    );
    browser = await launchChromium();
    page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    reportErrors(page);
    await logIn(page, base, merchant);
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    for (const a of apps) await a.stop();
    await closeTestDb();
  });

  it('shows the captured part beside the amount asked, on the transaction and on its attempt', async () => {
    await page.goto(`${base}/portal/#/transactions/${encodeURIComponent(id)}`);
    await page.getByRole('heading', { level: 1, name: `Transaction ${id}` }).waitFor({ timeout: 10_000 });
    await expect.poll(() => page.getByTestId('partial-amount').textContent(), { timeout: 10_000 }).toBe('$9.99');
    expect(await page.getByTestId('timeline').textContent()).toContain('captured $9.99 of $19.99');
    await shot(page, 'partial-authorization');
    // The list says it too.
    await page.goto(`${base}/portal/#/transactions`);
    await expect
      .poll(() => page.getByTestId('transactions').textContent(), { timeout: 10_000 })
      .toContain('$19.99 (captured $9.99)');
  });
});
