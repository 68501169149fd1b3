import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DataSource, EntityManager } from 'typeorm';
import { createDataSource } from './data-source';
import { inTransactionWithRetry, pgErrorCode } from './transaction-retry';

/** Postgres itself raises the error (a real QueryFailedError with that SQLSTATE). */
const raise = (m: EntityManager, sqlstate: string) =>
  m.query(`DO $$ BEGIN RAISE EXCEPTION 'probe' USING ERRCODE = '${sqlstate}'; END $$`);

describe('inTransactionWithRetry (real Postgres)', () => {
  let ds: DataSource;

  beforeAll(async () => {
    ds = createDataSource(process.env['DATABASE_URL']!, 4);
    await ds.initialize();
    await ds.query(`CREATE TABLE IF NOT EXISTS retry_probe (id int PRIMARY KEY, n int NOT NULL DEFAULT 0)`);
    await ds.query(`TRUNCATE retry_probe`);
    await ds.query(`INSERT INTO retry_probe (id) VALUES (1), (2)`);
  });
  afterAll(async () => {
    await ds.query(`DROP TABLE IF EXISTS retry_probe`);
    await ds.destroy();
  });

  it.each(['40P01', '40001'])('runs a transaction aborted with %s again; the failed run left nothing', async (code) => {
    let runs = 0;
    const retries: string[] = [];
    const result = await inTransactionWithRetry(
      ds,
      async (m) => {
        runs++;
        await m.query(`UPDATE retry_probe SET n = n + 1 WHERE id = 1`);
        if (runs === 1) await raise(m, code);
        return 'done';
      },
      { onRetry: (r) => retries.push(`${r.code}#${r.attempt}`) },
    );
    expect(result).toBe('done');
    expect(runs).toBe(2);
    expect(retries).toEqual([`${code}#1`]);
    const [{ n }] = await ds.query(`SELECT n FROM retry_probe WHERE id = 1`);
    expect(n).toBe(1);
    await ds.query(`UPDATE retry_probe SET n = 0`);
  });

  it('gives up after the attempts and throws the database error as it came', async () => {
    let runs = 0;
    const err = await inTransactionWithRetry(
      ds,
      async (m) => {
        runs++;
        await raise(m, '40001');
      },
      { attempts: 3, baseDelayMs: 1 },
    ).catch((e: unknown) => e);
    expect(runs).toBe(3);
    expect(pgErrorCode(err)).toBe('40001');
  });

  it('never retries other errors', async () => {
    let runs = 0;
    const err = await inTransactionWithRetry(ds, async (m) => {
      runs++;
      await m.query(`INSERT INTO retry_probe (id) VALUES (1)`);
    }).catch((e: unknown) => e);
    expect(runs).toBe(1);
    expect(pgErrorCode(err)).toBe('23505');
  });

  it('a real deadlock (two transactions locking two rows in opposite orders): both commit', async () => {
    let ready = 0;
    let release: () => void = () => undefined;
    const bothHoldFirstRow = new Promise<void>((resolve) => (release = resolve));
    const retries: string[] = [];
    const run = (first: number, second: number) =>
      inTransactionWithRetry(
        ds,
        async (m) => {
          await m.query(`UPDATE retry_probe SET n = n + 1 WHERE id = $1`, [first]);
          // The first run of each waits for the other to hold its first row: a certain deadlock.
          if (++ready === 2) release();
          await bothHoldFirstRow;
          await m.query(`UPDATE retry_probe SET n = n + 1 WHERE id = $1`, [second]);
        },
        { onRetry: (r) => retries.push(r.code) },
      );
    await Promise.all([run(1, 2), run(2, 1)]);
    // Usually one of the two is chosen as the victim; on a loaded machine both deadlock checks may fire
    // before either abort lands, and both run again (seen in a full parallel run).
    expect(retries.length).toBeGreaterThanOrEqual(1);
    expect(new Set(retries)).toEqual(new Set(['40P01']));
    const rows: { id: number; n: number }[] = await ds.query(`SELECT id, n FROM retry_probe ORDER BY id`);
    expect(rows).toEqual([
      { id: 1, n: 2 },
      { id: 2, n: 2 },
    ]);
  });
});
