// `npm test`: every test (unit, integration, end-to-end) against real PostgreSQL and Redis.
// Each run gets a fresh database with migrations applied (libs/testing/src/global-setup.ts).
// Extra arguments go to Vitest (e.g. `npm test -- libs/domain`). Ends with `N passed, M failed`.
import { spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { ensureBuilt, ensureDevJweKey, ensurePostgres, ensureRedis, root } from './infra.mjs';

ensureBuilt({ force: true });
const pg = await ensurePostgres(process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/retain');
const redis = await ensureRedis(process.env.REDIS_URL || 'redis://127.0.0.1:6379');
const report = path.join(root, 'tmp', 'vitest-report.json');
rmSync(report, { force: true });
const env = {
  ...process.env,
  DATABASE_URL: pg.databaseUrl,
  REDIS_URL: redis.redisUrl,
  CARD_JWE_PRIVATE_KEY_FILE: process.env.CARD_JWE_PRIVATE_KEY_FILE || ensureDevJweKey(),
  NX_DAEMON: 'false',
};
const vitest = path.join(root, 'node_modules', 'vitest', 'vitest.mjs');
const child = spawn(
  process.execPath,
  [vitest, 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${report}`, ...process.argv.slice(2)],
  { stdio: 'inherit', env, cwd: root },
);
const code = await new Promise((resolve) => child.on('exit', (c) => resolve(c ?? 1)));
await redis.stop();
await pg.stop();
let passed = 0;
let failed = 0;
let skipped = 0;
try {
  const r = JSON.parse(readFileSync(report, 'utf8'));
  passed = r.numPassedTests;
  failed = r.numFailedTests + (r.numFailedTestSuites > 0 && r.numFailedTests === 0 ? r.numFailedTestSuites : 0);
  skipped = r.numPendingTests + r.numTodoTests;
} catch {
  failed = Math.max(failed, 1);
}
process.stdout.write(`\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
process.exit(code === 0 && failed === 0 ? 0 : 1);
