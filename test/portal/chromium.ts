/// <reference lib="dom" />
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { expect } from 'vitest';
import type { TestMerchant } from '@retain/testing';

// The browser of the portal's tests: Debian's chromium driven by playwright-core (as portal.spec.ts).
export const SHOTS = path.resolve(__dirname, '../../tmp/portal-screenshots');

export async function launchChromium(): Promise<Browser> {
  mkdirSync(SHOTS, { recursive: true });
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** Page errors and console errors go to the test's output. */
export function reportErrors(page: Page): void {
  page.on('pageerror', (e) => console.error('portal page error:', e.message));
  page.on('console', (m) => {
    if (m.type() === 'error') console.error('portal console:', m.text());
  });
}

/**
 * Logged in, on the overview, with its read answered: a test that then ends the session (expiry, logout,
 * rotation) knows no request of the overview can still reach the API after it. (`networkidle` does not
 * tell: a loaded machine's page may not have sent the read yet when it resolves.)
 */
export async function logIn(page: Page, base: string, merchant: Pick<TestMerchant, 'login' | 'api_key'>) {
  await page.goto(`${base}/portal/`);
  await page.getByLabel('Login').fill(merchant.login);
  await page.getByLabel('API key').fill(merchant.api_key);
  const overviewRead = page.waitForResponse((r) => new URL(r.url()).pathname === '/v1/retain/analytics');
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.getByRole('heading', { name: 'Overview' }).waitFor();
  await overviewRead;
}

/**
 * Presses `press` and returns where the focus is the moment a button labelled `label` appears: read by
 * a MutationObserver's callback, before the page's next frame. A question must take the focus as it is
 * shown, not a frame later (a key pressed meanwhile would go to what was focused before).
 */
export async function focusWhenShown(page: Page, label: string, press: () => Promise<void>): Promise<string | null> {
  await page.evaluate((label) => {
    const w = window as unknown as { focusWhenShown?: string | null };
    delete w.focusWhenShown;
    const observer = new MutationObserver(() => {
      if (![...document.querySelectorAll('button')].some((b) => b.textContent === label)) return;
      w.focusWhenShown = document.activeElement?.textContent ?? null;
      observer.disconnect();
    });
    observer.observe(document.body, { childList: true, subtree: true, characterData: true });
  }, label);
  await press();
  await page.waitForFunction(() => 'focusWhenShown' in window, undefined, { timeout: 10_000 });
  return page.evaluate(() => (window as unknown as { focusWhenShown: string | null }).focusWhenShown);
}

export async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

const AXE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

/** axe-core on the page as it stands: no serious or critical violation. */
export async function accessible(page: Page): Promise<void> {
  await page.evaluate(AXE);
  const result = await page.evaluate(async () => {
    const axe = (globalThis as unknown as { axe: { run: (c: unknown, o: unknown) => Promise<any> } }).axe;
    return axe.run(document, { resultTypes: ['violations'] });
  });
  const bad = (result.violations as { id: string; impact: string }[]).filter(
    (v) => v.impact === 'serious' || v.impact === 'critical',
  );
  expect(bad.map((v) => `${v.id} (${v.impact})`)).toEqual([]);
}
