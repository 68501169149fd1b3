import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startApp, type RunningApp } from '@retain/testing';

const root = path.resolve(__dirname, '..', '..');

// The built-in development card key (decisions §10): a warning when used, and refused outside
// NODE_ENV development and test: card data sealed with a key published in the source is readable by anyone.
/** The app's first `warn` line whose message names `variable`. */
const warningNaming = (running: RunningApp, variable: string) =>
  running
    .logs()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: string; msg: string })
    .find((l) => l.level === 'warn' && l.msg.includes(variable));

describe('the development card key', () => {
  let app: RunningApp | undefined;
  afterAll(async () => {
    await app?.stop();
  });

  it('logs a warning naming CARD_DATA_KEY when an app starts with it', async () => {
    app = await startApp('retry-worker', { env: { NODE_ENV: 'development', CARD_DATA_KEY: '' } });
    expect(warningNaming(app, 'CARD_DATA_KEY')?.msg).toMatch(/development card key/i);
  });

  it('logs a warning naming CARD_FINGERPRINT_KEY when CARD_DATA_KEY is set but the fingerprints use the built-in key', async () => {
    const dev = await startApp('retry-worker', {
      env: { NODE_ENV: 'development', CARD_DATA_KEY: randomBytes(32).toString('base64'), CARD_FINGERPRINT_KEY: '' },
    });
    try {
      expect(warningNaming(dev, 'CARD_FINGERPRINT_KEY')?.msg).toMatch(/development fingerprint key/i);
    } finally {
      await dev.stop();
    }
  });

  it('starts with a bare base64 CARD_DATA_KEY (decisions §11 gives no format) under NODE_ENV=production', async () => {
    const bare = randomBytes(32).toString('base64');
    const prod = await startApp('retry-worker', {
      env: { NODE_ENV: 'production', CARD_DATA_KEY: bare, CARD_FINGERPRINT_KEY: randomBytes(32).toString('base64') },
    });
    try {
      expect(prod.logs()).not.toContain(bare);
      expect(prod.logs()).not.toMatch(/development card key/i);
    } finally {
      await prod.stop();
    }
  });

  // 'staging' is no NODE_ENV (production, development, test): it stops the app too, naming NODE_ENV.
  it.each([
    ['production', 'CARD_DATA_KEY'],
    ['staging', 'NODE_ENV'],
  ])('stops with exit code 78 and the variable name under NODE_ENV=%s', (nodeEnv, variable) => {
    const env: Record<string, string> = { ...(process.env as Record<string, string>), NODE_ENV: nodeEnv };
    delete env['CARD_DATA_KEY'];
    const r = spawnSync(process.execPath, [path.join(root, 'dist', 'apps', 'retry-worker', 'src', 'main.js')], {
      env,
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.status).toBe(78);
    expect(r.stderr).toContain(variable);
  });

  // The migration Job too (the deploy audit, session 25: it exited 1 with "migration failed"): a
  // configuration error is no failed migration, and an orchestrator tells the two apart by the code.
  it('the migrator stops with exit code 78 and the variable name on a bad configuration', () => {
    const env: Record<string, string> = { ...(process.env as Record<string, string>), NODE_ENV: 'staging' };
    const r = spawnSync(process.execPath, [path.join(root, 'dist', 'libs', 'db', 'src', 'migrate.cli.js')], {
      env,
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.status).toBe(78);
    expect(r.stderr).toContain('NODE_ENV');
  });

  // Worker options read when a processor class is declared (JOB_LOCK_MS, RETRY_ATTEMPT_CONCURRENCY): a bad
  // value stops each worker the same way, not with a stack trace and exit 1 while its module loads.
  it.each([
    ['retry-worker', 'JOB_LOCK_MS', 'abc'],
    ['webhook-dispatcher', 'JOB_LOCK_MS', '5'],
    ['retry-worker', 'RETRY_ATTEMPT_CONCURRENCY', '0'],
  ])('%s stops with exit code 78 naming %s=%s', (app, variable, value) => {
    const env: Record<string, string> = { ...(process.env as Record<string, string>), [variable]: value };
    const r = spawnSync(process.execPath, [path.join(root, 'dist', 'apps', app, 'src', 'main.js')], {
      env,
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect({ status: r.status, stderr: r.stderr.trim().split('\n') }).toEqual({
      status: 78,
      stderr: [expect.stringContaining(variable)],
    });
  });
});
