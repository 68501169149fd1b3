import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { closeTestDb } from '@retain/testing';

// decisions §11: `npm run retain -- merchant create --login <login>` prints one JSON object. npm
// writes its own "> retain@… retain" banner to stdout unless its log level is silent (.npmrc).
describe('npm run retain', () => {
  afterAll(() => closeTestDb());

  it('prints exactly one JSON object on stdout, nothing of npm', () => {
    const login = `npm-run-${Date.now()}`;
    const r = spawnSync('npm', ['run', 'retain', '--', 'merchant', 'create', '--login', login], {
      cwd: path.resolve(__dirname, '../../..'),
      env: process.env,
      encoding: 'utf8',
    });
    expect(r.status, r.stderr).toBe(0);
    const printed = JSON.parse(r.stdout);
    expect(printed).toMatchObject({
      merchant_vid: expect.any(String),
      login,
      api_key: expect.stringMatching(/^rk_/),
      webhook_secret: expect.stringMatching(/^whsec_/),
    });
  });
});
