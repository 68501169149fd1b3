import { randomBytes } from 'node:crypto';
import { migrate, onAdminDatabase } from '@retain/db';

/**
 * Once per `npm test` run (test processes inherit the environment set here): a fresh database (migrations applied) and a fresh BullMQ prefix, so a
 * run never sees another run's rows or jobs. The database is dropped at the end unless KEEP_TEST_DB.
 */
export default async function setup(): Promise<() => Promise<void>> {
  const base = process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/retain';
  const name = `retain_test_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
  const url = new URL(base);
  url.pathname = `/${name}`;
  const testUrl = url.toString();
  // The build output is what end-to-end tests run as processes.
  // eslint-disable-next-line @nx/enforce-module-boundaries -- the repo's build script, not a lib
  const { ensureBuilt } = await import('../../../tools/infra.mjs');
  ensureBuilt();
  await migrate(testUrl);
  const prefix = `rt${randomBytes(4).toString('hex')}`;
  process.env['DATABASE_URL'] = testUrl;
  process.env['QUEUE_PREFIX'] = `{${prefix}}`;
  // A retry worker that a test starts on the shared databases never sweeps them at start: other files'
  // rows dated long ago (retention.spec's, say) are not for its default retentions. A file that tests
  // the sweep runs on a private database (usePrivateDatabase) and sets its own.
  process.env['RETENTION_FIRST_SWEEP_DELAY'] ??= '12d';
  // Test files run in parallel workers (vitest.config.ts): each worker gets its own copy of the
  // migrated database and its own queue prefix (vitest.setup.ts picks them by VITEST_POOL_ID), so a
  // file's workers never take another file's due transactions, outbox rows or jobs.
  const workers = testWorkers();
  const copies = Array.from({ length: workers }, (_, i) => `${name}_w${i + 1}`);
  await onAdminDatabase(
    base,
    copies.map((copy) => `CREATE DATABASE "${copy}" TEMPLATE "${name}"`),
  );
  process.env['RETAIN_TEST_DB_NAME'] = name;
  process.env['RETAIN_TEST_QUEUE_PREFIX'] = prefix;
  return async () => {
    if (process.env['KEEP_TEST_DB']) return;
    await onAdminDatabase(
      base,
      [name, ...copies].map((db) => `DROP DATABASE IF EXISTS "${db}" WITH (FORCE)`),
    );
  };
}

/** How many test files run at once (RETAIN_TEST_WORKERS, default 2). */
export function testWorkers(): number {
  const n = Number(process.env['RETAIN_TEST_WORKERS'] ?? 2);
  return Number.isInteger(n) && n >= 1 ? n : 2;
}
