import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDataSource } from './data-source';
import { MIN_CONNECTIONS, MIN_SHARED_BUFFERS_BYTES, checkPostgresSettings } from './postgres-settings';

// The migration Job reads the server's settings and warns about each one the service needs
// (autovacuum, track_counts, shared_buffers): checked against what the server itself says.
describe('Postgres settings check (real Postgres)', () => {
  let db: DataSource;
  beforeAll(async () => {
    db = createDataSource(process.env.DATABASE_URL!, 1);
    await db.initialize();
  });
  afterAll(async () => {
    await db.destroy();
  });

  it('reports the server settings and warns exactly about the ones below what the service needs', async () => {
    const report = await checkPostgresSettings(db);
    const [{ autovacuum }] = await db.query(`SHOW autovacuum`);
    const [{ bytes }] = await db.query(`SELECT pg_size_bytes(current_setting('shared_buffers'))::text AS bytes`);
    expect(report.autovacuum).toBe(autovacuum);
    expect(report.sharedBuffersBytes).toBe(Number(bytes));
    expect(report.warnings.some((w) => w.startsWith('autovacuum is off'))).toBe(autovacuum !== 'on');
    expect(report.warnings.some((w) => w.startsWith('shared_buffers'))).toBe(Number(bytes) < MIN_SHARED_BUFFERS_BYTES);
    // Pools: 20 (intake-api, webhook-dispatcher) or 10 per process; k8s/base's minimum replicas hold 110.
    const [{ max }] = await db.query(`SELECT current_setting('max_connections')::int AS max`);
    expect(report.maxConnections).toBe(max);
    expect(report.warnings.some((w) => w.startsWith('max_connections'))).toBe(max < MIN_CONNECTIONS);
  });
});
