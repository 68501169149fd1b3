import { groupCommit } from '@retain/domain';

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

type LedgerRow = { idempotency_key: string; kind: StoredOpKind; result: string; created_at: Date | string };

const toOp = (row: LedgerRow): StoredOp => ({
  key: row.idempotency_key,
  kind: row.kind,
  result: decodeLedgerJson(row.result),
  createdAt: new Date(row.created_at),
});

/**
 * Postgres ledger over `sandbox_operations` (created by the db migrations). INSERT ... ON
 * CONFLICT DO NOTHING then SELECT: two processes racing on one key both read the winner's row.
 * Concurrent calls are group-committed (one SELECT, one INSERT per batch): the sandbox stands in
 * for a remote processor, and a statement per charge made it the retry worker's busiest caller.
 */
export class PgSandboxLedger implements SandboxLedger {
  private readonly getGrouped: (key: string) => Promise<StoredOp | null>;
  private readonly putGrouped: (op: { key: string; kind: StoredOpKind; json: string }) => Promise<StoredOp | null>;

  constructor(private readonly db: Queryable) {
    this.getGrouped = groupCommit(async (keys) => {
      const rows: LedgerRow[] = await this.db.query(
        `SELECT idempotency_key, kind, result::text AS result, created_at FROM sandbox_operations
          WHERE idempotency_key = ANY($1::text[])`,
        [[...new Set(keys)]],
      );
      const byKey = new Map(rows.map((r) => [r.idempotency_key, toOp(r)]));
      return keys.map((k) => byKey.get(k) ?? null);
    });
    this.putGrouped = groupCommit(async (ops) => {
      // One row per key (the first writer of the batch wins, like two statements in a row).
      const first = new Map<string, (typeof ops)[number]>();
      for (const op of ops) if (!first.has(op.key)) first.set(op.key, op);
      const rows: LedgerRow[] = await this.db.query(
        `INSERT INTO sandbox_operations (idempotency_key, kind, result)
         SELECT x.k, x.kind, x.result::jsonb FROM unnest($1::text[], $2::text[], $3::text[]) AS x(k, kind, result)
         ON CONFLICT (idempotency_key) DO NOTHING
         RETURNING idempotency_key, kind, result::text AS result, created_at`,
        [[...first.keys()], [...first.values()].map((o) => o.kind), [...first.values()].map((o) => o.json)],
      );
      const byKey = new Map(rows.map((r) => [r.idempotency_key, toOp(r)]));
      return ops.map((op) => byKey.get(op.key) ?? null);
    });
  }

  get(key: string): Promise<StoredOp | null> {
    return this.getGrouped(key);
  }

  async putIfAbsent(key: string, kind: StoredOpKind, result: unknown): Promise<StoredOp> {
    // One round trip when this writer wins (the usual case); the loser reads the winner's row.
    const inserted = await this.putGrouped({ key, kind, json: encodeLedgerJson(result) });
    if (inserted) return inserted;
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
