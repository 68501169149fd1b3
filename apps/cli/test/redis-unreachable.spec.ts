import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { closeTestDb } from '@retain/testing';

const main = path.resolve(__dirname, '../../../dist/apps/cli/src/main.js');

// README Operator CLI: every command prints one JSON object, errors `{"error": ...}` on stderr and
// exit 1. A command that talks to Redis makes one connection attempt: an unreachable Redis is that
// error, promptly, not an endless reconnect loop (nor ioredis's "Unhandled error event" traces).
describe('retain commands with Redis unreachable', () => {
  afterAll(() => closeTestDb());

  it.each([
    [['refunds', 'batch-now', '--timeout', '2']],
    [['queues', '--timeout', '2']],
    [['jobs', 'redrive', '--all']],
  ])('%j exits 1 with one JSON error, without ioredis traces', (args) => {
    const started = Date.now();
    const r = spawnSync(process.execPath, [main, ...args], {
      env: { ...process.env, REDIS_URL: 'redis://127.0.0.1:1' },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(r.signal, 'killed by the test timeout: the command hung').toBeNull();
    expect(r.status).toBe(1);
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(r.stdout).toBe('');
    expect(r.stderr).not.toMatch(/Unhandled error event/);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!).error).toMatch(/redis|connect|closed/i);
  });
});
