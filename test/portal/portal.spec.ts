/// <reference lib="dom" />
import type { Browser, BrowserContext, Page } from 'playwright-core';
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
import { accessible as accessibleNow, launchChromium, reportErrors, shot as shotOf } from './chromium';

// A day of the schedule in 8.6 s. Not the 1,000,000 of other e2e tests: at that scale the 30-day
// window is 2.6 s from the submission, and in a full run this file's review can wait longer than that
// behind the review jobs earlier files left in the shared queues (the transactions end Cancelled).
const ENV = {
  RETRY_TIME_SCALE: '10000',
  JOB_LOCK_MS: '2000',
  REFUND_BATCH_CRON: '*/1 * * * * *',
  WEBHOOK_RETRY_SCHEDULE: '50ms,50ms',
  WEBHOOK_ALLOW_PRIVATE: 'true',
};

// Issue 13: the merchant portal in a real browser (Debian's chromium driven by playwright-core):
// log in, the overview's figures equal the analytics API's, find a transaction and open its
// timeline, refund it, replay a dead push, rotate the webhook secret, log out. Every step takes a
// screenshot (tmp/portal-screenshots) and every page passes axe-core without a serious violation.
describe('the merchant portal in headless Chromium', () => {
  // Its own database and queues: its apps serve this file's work, not a backlog earlier files left.
  usePrivateDatabase('ptl');
  const apps: RunningApp[] = [];
  let receiver: WebhookReceiver;
  let merchant: TestMerchant;
  let api: ApiClient;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let base = '';
  const captured: string[] = [];

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    receiver.status = 500; // every push dies (two quick attempts) until the receiver recovers
    apps.push(
      ...(await Promise.all([
        startApp('intake-api', { env: ENV }),
        startApp('submission-validator', { env: ENV }),
        startApp('retry-worker', { env: ENV }),
        startApp('refund-batcher', { env: ENV }),
        startApp('webhook-dispatcher', { env: ENV }),
      ])),
    );
    base = apps[0]!.url;
    merchant = await createMerchant(receiver.url);
    api = new ApiClient(base, merchant.api_key);
    const batch = [txn({ amount: 25 }), txn({ amount: 40 }), txn({ auth_code: '05' }, '4000000000000069')];
    expect((await api.submit(batch)).status).toBe(200);
    for (const t of batch.slice(0, 2)) captured.push(t['id'] as string);
    // Both approved transactions captured (and the third ended): the retry worker has done its part.
    const states = async () =>
      Promise.all(
        batch.map(async (t) => {
          const r = await api.request('GET', `/v1/retain/transactions/${t['id']}?related=true`);
          const rows = (r.json?.data ?? []) as { status: string; next_activity?: string; retry_plan?: unknown }[];
          return {
            status: rows[0]?.status,
            attempts: rows.length - 1,
            next: rows[0]?.next_activity,
            plan: rows[0]?.retry_plan,
          };
        }),
      );
    try {
      await waitFor(
        async () => {
          const s = await states();
          return s.filter((x) => x.status === 'Captured').length === 2 && s[2]!.status === 'Cancelled';
        },
        { timeoutMs: 100_000, what: 'two captured and the third ended' },
      );
    } catch (err) {
      throw new Error(`${(err as Error).message}: ${JSON.stringify(await states())}`);
    }
    await waitFor(
      async () => {
        const r = await api.request('GET', '/v1/retain/webhook-messages?status=dead');
        return (r.json.data as unknown[]).length >= 1;
      },
      { timeoutMs: 60_000, what: 'a dead push' },
    );
    browser = await launchChromium();
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
    page = await context.newPage();
    reportErrors(page);
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    for (const a of apps) await a.stop();
    await receiver.stop();
    await closeTestDb();
  });

  const shot = (name: string, p: Page = page) => shotOf(p, name);
  /** axe-core on the page as it stands (evaluated through the DevTools protocol: the page's CSP stays in force). */
  const accessible = (p: Page = page) => accessibleNow(p);

  it('1. logs in with the merchant login and API key', async () => {
    await page.goto(`${base}/portal/`);
    await page.getByLabel('Login').waitFor();
    await accessible();
    await shot('01-login');
    await page.getByLabel('Login').fill(merchant.login);
    await page.getByLabel('API key').fill(merchant.api_key);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    // The session is an HttpOnly cookie: the page's script cannot read it, and nothing is stored.
    expect(await page.evaluate(() => document.cookie)).toBe('');
    expect(await page.evaluate(() => JSON.stringify({ ...localStorage, ...sessionStorage }))).toBe('{}');
  });

  it('2. the overview shows the analytics API figures', async () => {
    const usd = page.locator('[data-currency="USD"]');
    await usd.waitFor();
    const analytics = (await api.request('GET', '/v1/retain/analytics')).json.currencies[0];
    const money = (n: number, c = 'USD') =>
      new Intl.NumberFormat('en-US', { style: 'currency', currency: c, maximumFractionDigits: 2 }).format(n);
    await expect
      .poll(() => page.getByTestId('recovered_count-USD').textContent())
      .toBe(String(analytics.totals.recovered_count));
    expect(await page.getByTestId('failed_amount-USD').textContent()).toBe(money(analytics.totals.failed_amount));
    expect(await page.getByTestId('recovered_amount-USD').textContent()).toBe(money(analytics.totals.recovered_amount));
    expect(await page.getByTestId('recovery_rate-USD').textContent()).toBe(
      `${(analytics.totals.recovery_rate * 100).toFixed(1)}%`,
    );
    expect(await page.getByTestId('network_fees_avoided-USD').textContent()).toBe(
      money(analytics.network_fees_avoided),
    );
    expect(analytics.totals.recovered_count).toBe(2);
    // The per-day table shows amounts as money, as the figures above do (its CSV keeps the numbers).
    const day = analytics.series.find((s: { recovered_count: number }) => s.recovered_count > 0);
    const days = page.getByRole('table', { name: 'Days with activity (USD)' });
    const cells = await days.getByRole('row').filter({ hasText: day.period_start }).getByRole('cell').allTextContents();
    expect(cells).toEqual(
      expect.arrayContaining([money(day.failed_amount), money(day.recovered_amount), String(day.attempts)]),
    );
    await accessible();
    await shot('02-overview');
    // At phone width the same page stays usable (no horizontal scroll of the page).
    const phone = await context.newPage();
    await phone.setViewportSize({ width: 390, height: 844 });
    await phone.goto(`${base}/portal/#/overview`);
    await phone.getByTestId('recovered_count-USD').waitFor();
    expect(await phone.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth + 1)).toBe(true);
    await shot('02b-overview-phone', phone);
    await phone.close();
  });

  it('3. finds a transaction and opens its timeline', async () => {
    await page.getByRole('link', { name: 'Transactions' }).click();
    await page.getByLabel('Transaction id').fill(captured[0]!);
    await page.getByRole('button', { name: 'Open' }).click();
    await page.getByTestId('timeline').waitFor();
    expect(await page.getByTestId('status').textContent()).toBe('Captured');
    expect(await page.getByTestId('timeline').textContent()).toContain('Attempt 1: Captured');
    // Card numbers are shown masked only.
    expect(await page.content()).not.toContain('4111111111111111');
    await accessible();
    await shot('03-transaction-timeline');
  });

  it('4. refunds it, with the API rules: too much is refused with its code, the rest is accepted', async () => {
    await page.getByLabel(/Amount/).fill('1000');
    await page.getByRole('button', { name: 'Refund / stop', exact: true }).click();
    await page.getByRole('button', { name: 'Yes, refund / stop' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('RET027');
    await page.getByLabel(/Amount/).fill('');
    await page.getByRole('button', { name: 'Refund / stop', exact: true }).click();
    await page.getByRole('button', { name: 'Yes, refund / stop' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('refunds received');
    await expect
      .poll(async () => (await api.request('GET', `/v1/retain/transactions/${captured[0]}`)).json.data[0].status, {
        timeout: 30_000,
      })
      .toMatch(/Refund Requested|Refunded/);
    await shot('04-refund');
  });

  it('5. replays a dead push', async () => {
    receiver.status = 202;
    await page.getByRole('link', { name: 'Pushes' }).click();
    await page.getByLabel('Status').selectOption('dead');
    const replay = page.getByRole('button', { name: /^Replay/ }).first();
    await replay.waitFor();
    await accessible();
    await shot('05-pushes-dead');
    const before = receiver.received.filter((p) => p.answered === 202).length;
    await replay.click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('Replaying');
    await waitFor(() => receiver.received.filter((p) => p.answered === 202).length > before, {
      timeoutMs: 30_000,
      what: 'the replayed push delivered',
    });
    await shot('05b-pushes-replayed');
  });

  it('6. rotates the webhook secret: shown once, copied, never stored', async () => {
    await page.getByRole('link', { name: 'Settings' }).click();
    await page.getByRole('button', { name: 'Rotate webhook secret' }).click();
    await page.getByRole('button', { name: 'Yes, rotate the webhook secret' }).click();
    const field = page.getByLabel('New webhook secret', { exact: true });
    await field.waitFor();
    await page.getByRole('button', { name: 'Copy' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toContain('copied to your clipboard');
    const secret = await page.evaluate(() => navigator.clipboard.readText());
    expect(secret).toMatch(/^whsec_/);
    expect(secret).toBe(await field.inputValue());
    expect(secret).not.toBe(merchant.webhook_secret);
    expect(await page.evaluate(() => JSON.stringify({ ...localStorage, ...sessionStorage }))).toBe('{}');
    await accessible();
    await shot('06-settings-rotated');
    // Once the merchant says it is stored, it is gone from the page.
    await page.getByRole('button', { name: 'I have stored the secret' }).click();
    expect(await page.content()).not.toContain(secret);
    // Pushes are signed with the new secret once the dispatcher's 5 s merchant cache has expired.
    await new Promise((r) => setTimeout(r, 5500));
    const { Webhook } = await import('standardwebhooks');
    const n = receiver.received.length;
    expect((await api.request('POST', '/v1/retain/merchant/webhook/test')).status).toBe(202);
    const push = await waitFor(() => receiver.received.slice(n).find((p) => p.body.header['event_name'] === 'test'), {
      timeoutMs: 30_000,
      what: 'the test push',
    });
    expect(() => new Webhook(secret).verify(push.raw, push.headers as Record<string, string>)).not.toThrow();
  });

  it('7. logs out: the session ends on the server', async () => {
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.getByLabel('Login').waitFor();
    expect(await page.getByRole('status').textContent()).toContain('logged out');
    const status = await page.evaluate(
      async () => (await fetch('/v1/retain/session', { headers: { 'X-Requested-With': 'retain-portal' } })).status,
    );
    expect(status).toBe(401);
    await shot('07-logged-out');
  });

  it('serves the portal with a CSP that allows no inline script and hashed assets cached for a year', async () => {
    const index = await fetch(`${base}/portal/`);
    expect(index.status).toBe(200);
    const csp = index.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(index.headers.get('cache-control')).toBe('no-cache');
    const html = await index.text();
    const asset = /src="(\/portal\/assets\/index-[A-Za-z0-9_-]+\.js)"/.exec(html)![1]!;
    const js = await fetch(`${base}${asset}`);
    expect(js.status).toBe(200);
    expect(js.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
  });
});
