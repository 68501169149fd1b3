import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { closeTestDb, testDb } from '@retain/testing';

const main = path.resolve(__dirname, '../../../dist/apps/cli/src/main.js');
const run = (args: string[]) => spawnSync(process.execPath, [main, ...args], { env: process.env, encoding: 'utf8' });
const cli = (...args: string[]): any => {
  const r = run(args);
  if (r.status !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout);
};
const cliError = (...args: string[]): string => {
  const r = run(args);
  expect(r.status, r.stdout).toBe(1);
  expect(r.stdout).toBe('');
  return JSON.parse(r.stderr.trim().split('\n').pop()!).error;
};
const storedUrl = async (login: string): Promise<string | null> =>
  (await (await testDb()).query(`SELECT webhook_url FROM merchants WHERE login = $1`, [login]))[0].webhook_url;

// decisions §11: `merchant set-webhook`. Rotating the secret alone must not take the URL away (every
// push would then end `no_endpoint`, never delivered); removing the URL is asked for by name.
describe('retain merchant set-webhook', () => {
  afterAll(() => closeTestDb());

  const created = (url: string) =>
    cli('merchant', 'create', '--login', `wh-${randomBytes(5).toString('hex')}`, '--webhook-url', url);

  it('keeps the webhook URL when only the secret is rotated, and prints the URL in force', async () => {
    const m = created('https://hooks.example.com/retain');
    const out = cli('merchant', 'set-webhook', '--login', m.login, '--rotate-secret');
    expect(out.webhook_url).toBe('https://hooks.example.com/retain');
    expect(out.webhook_secret).toMatch(/^whsec_/);
    expect(out.webhook_secret).not.toBe(m.webhook_secret);
    expect(await storedUrl(m.login)).toBe('https://hooks.example.com/retain');
  });

  it('changes the URL with --url (or --webhook-url), keeping the secret unless asked', async () => {
    const m = created('https://hooks.example.com/a');
    const out = cli('merchant', 'set-webhook', '--login', m.login, '--url', 'https://hooks.example.com/b');
    expect(out).toEqual({ merchant_vid: m.merchant_vid, login: m.login, webhook_url: 'https://hooks.example.com/b' });
    expect(
      cli('merchant', 'set-webhook', '--login', m.login, '--webhook-url', 'https://hooks.example.com/c').webhook_url,
    ).toBe('https://hooks.example.com/c');
    expect(await storedUrl(m.login)).toBe('https://hooks.example.com/c');
  });

  it('removes the URL only with --clear-url', async () => {
    const m = created('https://hooks.example.com/retain');
    const out = cli('merchant', 'set-webhook', '--login', m.login, '--clear-url');
    expect(out.webhook_url).toBeNull();
    expect(out.webhook_secret).toBeUndefined();
    expect(await storedUrl(m.login)).toBeNull();
  });

  it('refuses --url with --clear-url, and a call that changes nothing, leaving the URL as it was', async () => {
    const m = created('https://hooks.example.com/retain');
    expect(
      cliError('merchant', 'set-webhook', '--login', m.login, '--url', 'https://hooks.example.com/x', '--clear-url'),
    ).toMatch(/--url.*--clear-url|--clear-url.*--url/);
    expect(cliError('merchant', 'set-webhook', '--login', m.login)).toMatch(/--url.*--clear-url.*--rotate-secret/);
    expect(await storedUrl(m.login)).toBe('https://hooks.example.com/retain');
  });
});
