/// <reference lib="dom" />
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type RunningApp } from '@retain/testing';
import { launchChromium, shot } from './chromium';

// /docs (Swagger UI) shares the portal's origin and its session cookie (Path=/): a script injected
// there could call the API as the logged-in merchant. It gets a policy of its own: scripts from the
// service only, no framing, no form posts elsewhere; and Swagger UI must still work under it.
describe('the API documentation (/docs) under its own Content-Security-Policy', () => {
  let app: RunningApp;
  let browser: Browser;

  beforeAll(async () => {
    app = await startApp('intake-api');
    browser = await launchChromium();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await app?.stop();
  });

  it('answers /docs and its assets with a policy that allows only its own scripts and forbids framing', async () => {
    for (const path of ['/docs', '/docs/swagger-ui-init.js']) {
      const res = await fetch(`${app.url}${path}`);
      expect(res.status, path).toBe(200);
      const csp = res.headers.get('content-security-policy') ?? '';
      const directives = new Map(
        csp
          .split(';')
          .map((d) => d.trim().split(/\s+/))
          .filter((d) => d[0])
          .map(([name, ...values]) => [name!, values]),
      );
      expect(directives.get('script-src'), path).toEqual(["'self'"]);
      expect(directives.get('frame-ancestors'), path).toEqual(["'none'"]);
      expect(directives.get('object-src'), path).toEqual(["'none'"]);
      expect(directives.get('base-uri'), path).toEqual(["'none'"]);
      expect(directives.get('form-action'), path).toEqual(["'self'"]);
      expect(directives.get('connect-src'), path).toEqual(["'self'"]);
    }
  });

  it('renders every operation in a browser with no policy violation', async () => {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const violations: string[] = [];
    page.on('console', (m) => {
      if (/Content Security Policy|Refused to/i.test(m.text())) violations.push(m.text());
    });
    page.on('pageerror', (e) => violations.push(e.message));
    await page.goto(`${app.url}/docs`);
    await page.locator('.opblock').first().waitFor({ timeout: 30_000 });
    const operations = await page.locator('.opblock-summary-path').allTextContents();
    expect(operations).toEqual(expect.arrayContaining(['/retain/transactions', '/retain/refunds']));
    // An operation opens (Swagger UI's own script at work).
    await page.locator('.opblock-summary', { hasText: '/retain/refunds' }).first().click();
    await page.locator('.opblock-body').first().waitFor({ timeout: 10_000 });
    await shot(page, 'docs');
    expect(violations).toEqual([]);
    await page.close();
  });
});
