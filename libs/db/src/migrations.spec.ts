import { Client } from 'pg';
import { describe, expect, it, vi } from 'vitest';
import { scratchDatabaseUrl } from '../test/scratch-database';
import { MIGRATIONS, dropDatabase, ensureDatabase, migrate, revertLast } from './data-source';

// Every migration has a real down(): apply all, revert all, apply again, on a scratch database.
describe('migrations', () => {
  it('apply, revert and re-apply cleanly', async () => {
    const scratch = scratchDatabaseUrl('mig');
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
      await dropDatabase(scratch);
    }
  });

  // Two migration runs at once (a Job retried while the first still runs, two deploys, `npm run migrate`
  // beside the Job) on a fresh database: they take turns (a session advisory lock), both succeed, and
  // the migrations are applied once.
  it('two runs at once on a fresh database both succeed, applying each migration once', async () => {
    const scratch = scratchDatabaseUrl('migrace');
    try {
      const runs = await Promise.allSettled([migrate(scratch), migrate(scratch), migrate(scratch)]);
      expect(runs.map((r) => (r.status === 'rejected' ? String(r.reason) : 'ok'))).toEqual(['ok', 'ok', 'ok']);
      const applied = runs.flatMap((r) => (r.status === 'fulfilled' ? r.value : []));
      expect(applied.sort()).toEqual(MIGRATIONS.map((m) => m.name).sort());
      const c = new Client({ connectionString: scratch });
      await c.connect();
      try {
        const r = await c.query(`SELECT count(*)::int AS n FROM migrations`);
        expect(r.rows[0].n).toBe(MIGRATIONS.length);
      } finally {
        await c.end();
      }
    } finally {
      await dropDatabase(scratch);
    }
  });

  it("the migration Job connects only to its own database when it exists (a role without access to 'postgres', PgBouncer)", async () => {
    const connect = vi.spyOn(Client.prototype, 'connect');
    try {
      await ensureDatabase(process.env['DATABASE_URL']!);
      const databases = connect.mock.contexts.map((c) => (c as unknown as { database: string }).database);
      expect(databases.length).toBeGreaterThan(0);
      expect(databases).not.toContain('postgres');
    } finally {
      connect.mockRestore();
    }
  });
});
