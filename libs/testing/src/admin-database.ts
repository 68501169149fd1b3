import { Client } from 'pg';

/**
 * Runs statements, one after another, on the `postgres` database of the server `url` names: where
 * CREATE and DROP DATABASE run (neither can run inside the database it creates or drops).
 */
export async function onAdminDatabase(url: string, sql: string[]): Promise<void> {
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const c = new Client({ connectionString: admin.toString() });
  await c.connect();
  try {
    for (const q of sql) await c.query(q);
  } finally {
    await c.end();
  }
}
