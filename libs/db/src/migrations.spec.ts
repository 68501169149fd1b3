import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { describe, expect, it } from 'vitest';
import { MIGRATIONS, migrate, revertLast } from './data-source';

// Every migration has a real down(): apply all, revert all, apply again, on a scratch database.
describe('migrations', () => {
  it('apply, revert and re-apply cleanly', async () => {
    const url = new URL(process.env['DATABASE_URL']!);
    url.pathname = `/retain_mig_${randomBytes(4).toString('hex')}`;
    const scratch = url.toString();
    const tables = async (): Promise<string[]> => {
      const c = new Client({ connectionString: scratch });
      await c.connect();
      try {
        const r = await c.query(`SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`);
        return r.rows.map((x: { tablename: string }) => x.tablename);
      } finally {
        await c.end();
      }
    };
    try {
      expect(await migrate(scratch)).toHaveLength(MIGRATIONS.length);
      expect(await tables()).toEqual(
        expect.arrayContaining(['merchants', 'transactions', 'attempts', 'refunds', 'outbox', 'webhook_messages']),
      );
      for (let i = 0; i < MIGRATIONS.length; i++) await revertLast(scratch);
      expect((await tables()).filter((t) => t !== 'migrations')).toEqual([]);
      expect(await migrate(scratch)).toHaveLength(MIGRATIONS.length);
    } finally {
      const admin = new URL(scratch);
      const name = admin.pathname.slice(1);
      admin.pathname = '/postgres';
      const c = new Client({ connectionString: admin.toString() });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await c.end();
    }
  });
});
