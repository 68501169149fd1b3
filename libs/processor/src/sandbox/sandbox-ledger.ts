/**
 * The sandbox's record of operations by idempotency key: the same key never charges or refunds
 * twice, and an attempt whose outcome is unknown can be looked up. Results are stored as JSON;
 * bigint values are written as `{"$bigint":"<digits>"}` so they come back as bigint.
 */
/** `update`: an expiry the sandbox account updater issued (the sandbox processor approves it). */
export type StoredOpKind = 'charge' | 'refund' | 'update';

export interface StoredOp {
  key: string;
  kind: StoredOpKind;
  result: unknown;
  createdAt: Date;
}

export interface SandboxLedger {
  get(key: string): Promise<StoredOp | null>;
  /** Stores the result unless the key exists; returns what is stored (the first writer wins). */
  putIfAbsent(key: string, kind: StoredOpKind, result: unknown): Promise<StoredOp>;
}

/** Anything with a `query` returning rows: a TypeORM DataSource or EntityManager fits. */
export interface Queryable {
  query(sql: string, params?: unknown[]): Promise<any[]>;
}

export const encodeLedgerJson = (value: unknown): string =>
  JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? { $bigint: v.toString() } : v));

export const decodeLedgerJson = (text: string): unknown =>
  JSON.parse(text, (_k, v: unknown) =>
    v !== null &&
    typeof v === 'object' &&
    Object.keys(v).length === 1 &&
    typeof (v as { $bigint?: unknown }).$bigint === 'string'
      ? BigInt((v as { $bigint: string }).$bigint)
      : v,
  );

/**
 * Postgres ledger over `sandbox_operations` (created by the db migrations). INSERT ... ON
 * CONFLICT DO NOTHING then SELECT: two processes racing on one key both read the winner's row.
 */
export class PgSandboxLedger implements SandboxLedger {
  constructor(private readonly db: Queryable) {}

  async get(key: string): Promise<StoredOp | null> {
    const rows: { kind: StoredOpKind; result: string; created_at: Date | string }[] = await this.db.query(
      `SELECT kind, result::text AS result, created_at FROM sandbox_operations WHERE idempotency_key = $1`,
      [key],
    );
    const row = rows[0];
    return row
      ? { key, kind: row.kind, result: decodeLedgerJson(row.result), createdAt: new Date(row.created_at) }
      : null;
  }

  async putIfAbsent(key: string, kind: StoredOpKind, result: unknown): Promise<StoredOp> {
    // One round trip when this writer wins (the usual case); the loser reads the winner's row.
    const inserted: { kind: StoredOpKind; result: string; created_at: Date | string }[] = await this.db.query(
      `INSERT INTO sandbox_operations (idempotency_key, kind, result) VALUES ($1, $2, $3::jsonb)
       ON CONFLICT (idempotency_key) DO NOTHING RETURNING kind, result::text AS result, created_at`,
      [key, kind, encodeLedgerJson(result)],
    );
    const row = inserted[0];
    if (row) return { key, kind: row.kind, result: decodeLedgerJson(row.result), createdAt: new Date(row.created_at) };
    const stored = await this.get(key);
    if (!stored) throw new Error('sandbox ledger: row missing right after insert');
    return stored;
  }
}

/** In-memory ledger for unit tests and benchmarks; stores JSON like Postgres does. */
export class MemorySandboxLedger implements SandboxLedger {
  private readonly ops = new Map<string, { kind: StoredOpKind; json: string; createdAt: Date }>();

  async get(key: string): Promise<StoredOp | null> {
    const op = this.ops.get(key);
    return op ? { key, kind: op.kind, result: decodeLedgerJson(op.json), createdAt: op.createdAt } : null;
  }

  async putIfAbsent(key: string, kind: StoredOpKind, result: unknown): Promise<StoredOp> {
    if (!this.ops.has(key)) this.ops.set(key, { kind, json: encodeLedgerJson(result), createdAt: new Date() });
    return (await this.get(key))!;
  }

  get size(): number {
    return this.ops.size;
  }
}
