import { randomBytes } from 'node:crypto';
import { migrate } from '@retain/db';
import { Client } from 'pg';

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
  const prefix = `{rt${randomBytes(4).toString('hex')}}`;
  process.env['DATABASE_URL'] = testUrl;
  process.env['QUEUE_PREFIX'] = prefix;
  return async () => {
    if (process.env['KEEP_TEST_DB']) return;
    const admin = new URL(base);
    admin.pathname = '/postgres';
    const c = new Client({ connectionString: admin.toString() });
    await c.connect();
    try {
      await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    } finally {
      await c.end();
    }
  };
}
