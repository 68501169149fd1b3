import { afterAll } from 'vitest';
import { killLeftoverApps } from './apps';

// This worker's own database (a copy of the run's migrated one) and queue prefix: test files run in
// parallel workers (global-setup.ts), and what one file's apps do must not reach another's.
const pool = process.env['VITEST_POOL_ID'];
const name = process.env['RETAIN_TEST_DB_NAME'];
if (pool && name && process.env['DATABASE_URL']) {
  const url = new URL(process.env['DATABASE_URL']);
  url.pathname = `/${name}_w${pool}`;
  process.env['DATABASE_URL'] = url.toString();
  process.env['QUEUE_PREFIX'] = `{${process.env['RETAIN_TEST_QUEUE_PREFIX']}w${pool}}`;
}

// Runs in every test file (vitest.config.ts setupFiles). After hooks run in reverse order, so this
// comes after the file's own afterAll: it only kills app processes a failed test left running.
afterAll(killLeftoverApps);
