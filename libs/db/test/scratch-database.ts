import { randomBytes } from 'node:crypto';
import { Client } from 'pg';

/**
 * The URL of a database of its own, next to the run's (not created yet: `migrate` creates it), for
 * the specs of libs/db that need one: the migrations' round trip, or statistics no other file's
 * writes may reach. Test support: never built into dist/.
 */
export function scratchDatabaseUrl(tag: string): string {
  const url = new URL(process.env['DATABASE_URL']!);
  url.pathname = `/retain_${tag}_${randomBytes(4).toString('hex')}`;
  return url.toString();
}

/** Drops the database of that URL, whoever is still connected. */
export async function dropDatabase(databaseUrl: string): Promise<void> {
  const admin = new URL(databaseUrl);
  const name = admin.pathname.slice(1);
  admin.pathname = '/postgres';
  const c = new Client({ connectionString: admin.toString() });
  await c.connect();
  try {
    await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  } finally {
    await c.end();
  }
}
