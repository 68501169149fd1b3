import { Pool } from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import {
  MemorySandboxLedger,
  PgSandboxLedger,
  decodeLedgerJson,
  encodeLedgerJson,
  type Queryable,
} from './sandbox-ledger';
import { SandboxProcessor } from './sandbox.processor';

describe('ledger JSON', () => {
  it('round-trips bigint values', () => {
    const value = { amountMinor: 12345678901234567890n, nested: [{ fee: -3n }], text: '12', n: 1 };
    expect(decodeLedgerJson(encodeLedgerJson(value))).toEqual(value);
  });
  it('the memory ledger stores copies, first writer wins', async () => {
    const ledger = new MemorySandboxLedger();
    const result = { outcome: 'approved', amountMinor: 5n };
    await ledger.putIfAbsent('k', 'charge', result);
    result.outcome = 'changed';
    expect((await ledger.putIfAbsent('k', 'charge', { outcome: 'other' })).result).toEqual({
      outcome: 'approved',
      amountMinor: 5n,
    });
  });
});

// Against the test run's database (libs/testing global setup: migrations applied).
describe.skipIf(!process.env['DATABASE_URL'])('PgSandboxLedger on Postgres', () => {
  const pool = new Pool({ connectionString: process.env['DATABASE_URL'], max: 4 });
  const db: Queryable = { query: async (sql, params) => (await pool.query(sql, params as unknown[])).rows };
  const key = (name: string) => `spec_${name}_${Date.now().toString(36)}_${Math.random().toString(36).slice(2)}`;
  afterAll(() => pool.end());

  it('stores once, returns the stored row, keeps bigint', async () => {
    const ledger = new PgSandboxLedger(db);
    const k = key('once');
    expect(await ledger.get(k)).toBeNull();
    const first = await ledger.putIfAbsent(k, 'charge', { outcome: 'approved', amountMinor: 1999n });
    expect(first).toMatchObject({ key: k, kind: 'charge', result: { outcome: 'approved', amountMinor: 1999n } });
    const second = await ledger.putIfAbsent(k, 'refund', { outcome: 'other' });
    expect(second.result).toEqual(first.result);
    expect(second.kind).toBe('charge');
  });

  it('two processes racing on one key agree, and the card is charged once', async () => {
    const k = key('race');
    const a = new SandboxProcessor(new PgSandboxLedger(db));
    const b = new SandboxProcessor(new PgSandboxLedger(db));
    const charge = (p: SandboxProcessor, attemptNumber: number) =>
      p.charge({
        idempotencyKey: k,
        attemptNumber,
        amountMinor: 1999n,
        currency: 'USD',
        instrument: { kind: 'pan', pan: '4000000000000077' },
        originalResponseCode: '51',
        divisionNumber: 'd',
        at: new Date(),
      });
    const results = await Promise.all([charge(a, 1), charge(b, 3), charge(a, 3), charge(b, 1)]);
    expect(new Set(results.map((r) => JSON.stringify(r))).size).toBe(1);
    const rows = await db.query(`SELECT count(*)::int AS n FROM sandbox_operations WHERE idempotency_key = $1`, [k]);
    expect(rows[0].n).toBe(1);
    expect(await a.lookupCharge(k)).toEqual(results[0]);
  });
});
