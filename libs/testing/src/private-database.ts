import { randomBytes } from 'node:crypto';
import { copyDatabase, dropDatabase, migrate } from '@retain/db';
import { afterAll, beforeAll } from 'vitest';
import { closeTestDb } from './fixtures';

/**
 * A private database (migrated) and queue prefix for the describe block that calls it, before any
 * hook that starts apps: the apps it starts, testDb() and createMerchant() use them; after its last
 * afterAll the run's are restored and the private database dropped. For files whose sweeps or timing
 * must not meet what other files left in the worker's shared database: a retention window, a backlog
 * of Captured transactions ahead in the settlement check, other merchants' due attempts ahead in the
 * tick, every merchant's outcomes in the learned slot statistics (a 26-second recovery window has no
 * room for them).
 */
export function usePrivateDatabase(tag: string): void {
  const run = { url: '', prefix: '' };
  let privateUrl = '';
  beforeAll(async () => {
    run.url = process.env['DATABASE_URL']!;
    run.prefix = process.env['QUEUE_PREFIX']!;
    const url = new URL(run.url);
    url.pathname = `${url.pathname}_${tag}${randomBytes(3).toString('hex')}`;
    privateUrl = url.toString();
    await createMigrated(privateUrl);
    await closeTestDb();
    process.env['DATABASE_URL'] = privateUrl;
    process.env['QUEUE_PREFIX'] = `{${tag}${randomBytes(4).toString('hex')}}`;
  });
  afterAll(async () => {
    await closeTestDb();
    process.env['DATABASE_URL'] = run.url;
    process.env['QUEUE_PREFIX'] = run.prefix;
    if (privateUrl) await dropDatabase(privateUrl);
  });
}

/**
 * A migrated database: a copy of the run's migrated one (global-setup.ts leaves it without
 * connections), which costs a fraction of applying every migration again; migrated from scratch
 * when the file runs outside `npm test`.
 */
async function createMigrated(url: string): Promise<void> {
  const template = process.env['RETAIN_TEST_DB_NAME'];
  if (!template) {
    await migrate(url);
    return;
  }
  await copyDatabase(url, template);
}
