import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { closeTestDb, testDb } from '@retain/testing';

const main = path.resolve(__dirname, '../../../dist/apps/cli/src/main.js');
const run = (args: string[]) => spawnSync(process.execPath, [main, ...args], { env: process.env, encoding: 'utf8' });
const cliError = (...args: string[]): string => {
  const r = run(args);
  expect(r.status, r.stdout).toBe(1);
  expect(r.stdout).toBe('');
  return JSON.parse(r.stderr.trim().split('\n').pop()!).error;
};
const stored = async (login: string): Promise<number> =>
  (await (await testDb()).query(`SELECT count(*)::int AS n FROM merchants WHERE login = $1`, [login]))[0].n;
const fresh = (): string => `mc-${randomBytes(5).toString('hex')}`;

// The CLI creates what the API and the portal can use: the same rules, or exit 1 and nothing stored.
describe('retain merchant create', () => {
  afterAll(() => closeTestDb());

  it('refuses a login with a colon (Basic login:api_key splits at the first one, decisions §2)', async () => {
    const login = `${fresh()}:me`;
    expect(cliError('merchant', 'create', '--login', login)).toMatch(/login.*:/);
    expect(await stored(login)).toBe(0);
  });

  it('refuses an empty login (the portal refuses one) and one longer than 128 characters', async () => {
    expect(cliError('merchant', 'create', '--login', '')).toMatch(/login/);
    expect(await stored('')).toBe(0);
    expect(cliError('merchant', 'create', '--login', 'x'.repeat(129))).toMatch(/login.*128/);
  });

  it('refuses an empty --webhook-url, and one with credentials or a fragment, as PUT /merchant/webhook does', async () => {
    for (const url of [
      '',
      'https://u:pw@hooks.example.com/retain',
      'https://hooks.example.com/retain#x',
      'ftp://h/x',
    ]) {
      const login = fresh();
      expect(cliError('merchant', 'create', '--login', login, '--webhook-url', url), url).toMatch(/webhook URL/);
      expect(await stored(login)).toBe(0);
    }
  });

  it('set-webhook refuses a URL with credentials, keeping the URL', async () => {
    const login = fresh();
    const r = run(['merchant', 'create', '--login', login, '--webhook-url', 'https://hooks.example.com/a']);
    expect(r.status, r.stderr).toBe(0);
    expect(cliError('merchant', 'set-webhook', '--login', login, '--url', 'https://u:pw@hooks.example.com/b')).toMatch(
      /webhook URL/,
    );
    const [row] = await (await testDb()).query(`SELECT webhook_url FROM merchants WHERE login = $1`, [login]);
    expect(row.webhook_url).toBe('https://hooks.example.com/a');
  });

  it('creates a merchant with a plain login and URL: one JSON object on one line, the fields of decisions §11', async () => {
    const login = fresh();
    const r = run(['merchant', 'create', '--login', login, '--webhook-url', 'https://hooks.example.com/retain']);
    expect(r.status, r.stderr).toBe(0);
    // One line (a caller reading the last line of npm's output gets the whole object), exactly
    // {merchant_vid, login, api_key, webhook_secret}.
    expect(r.stdout.trimEnd().split('\n')).toHaveLength(1);
    const printed = JSON.parse(r.stdout) as Record<string, string>;
    expect(Object.keys(printed).sort()).toEqual(['api_key', 'login', 'merchant_vid', 'webhook_secret']);
    expect(printed).toMatchObject({
      login,
      api_key: expect.stringMatching(/^rk_/),
      webhook_secret: expect.stringMatching(/^whsec_/),
    });
    const [row] = await (await testDb()).query(`SELECT webhook_url FROM merchants WHERE login = $1`, [login]);
    expect(row.webhook_url).toBe('https://hooks.example.com/retain');
  });
});
