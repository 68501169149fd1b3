import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const main = path.resolve(__dirname, '../../../dist/apps/cli/src/main.js');
const run = (args: string[]) => spawnSync(process.execPath, [main, ...args], { env: process.env, encoding: 'utf8' });

// README Operator CLI: errors are `{"error": ...}` on stderr, exit 1, nothing on stdout; usage
// errors too (commander wrote its own text before). Help stays text, on stdout, exit 0.
describe('retain usage errors', () => {
  it.each([
    [['merchant', 'create'], /--login/],
    [['merchant', 'create', '--login', 'x', '--bogus'], /--bogus/],
    [['frobnicate'], /frobnicate/],
    [['merchant', 'frobnicate'], /frobnicate/],
    [['webhooks', 'log'], /message_id/],
    [['merchant'], /merchant.*create.*set-webhook/],
    [[], /create|merchant/],
  ])('%j: one JSON error on stderr, exit 1', (args, message) => {
    const r = run(args);
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    const lines = r.stderr.trim().split('\n');
    expect(lines, r.stderr).toHaveLength(1);
    const body = JSON.parse(lines[0]!);
    expect(Object.keys(body)).toEqual(['error']);
    expect(body.error).toMatch(message);
    expect(body.error).not.toMatch(/^error: /);
  });

  it('--help is text on stdout, exit 0', () => {
    const r = run(['merchant', 'create', '--help']);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/Usage: retain merchant create/);
    expect(r.stderr).toBe('');
  });
});
