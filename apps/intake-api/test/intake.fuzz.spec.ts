import { unsafeTextDetail } from '@retain/api-contract';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApiClient,
  closeTestDb,
  createMerchant,
  startApp,
  testDb,
  txn,
  uniqueId,
  type RunningApp,
  type TestMerchant,
} from '@retain/testing';

/**
 * Property-based fuzzing of POST /v1/retain/transactions and /v1/retain/refunds through the real
 * app on the real Postgres (issue 9): arbitrary mutations of valid requests never answer 5xx, never
 * half-save a batch (the rows saved are exactly the items reported accepted), and never put a card
 * number in a response. FUZZ_SEED=<n> replays a run; FUZZ_RUNS=<n> runs longer.
 */
const SEED = Number(process.env['FUZZ_SEED'] ?? 20261123);
const RUNS = Number(process.env['FUZZ_RUNS'] ?? 120);
const PANS = ['4111111111111111', '5555555555554444', '4000000000000077', '378282246310005'];

// ---- hostile values -------------------------------------------------------------------------

/** Number text that JSON can carry but a JS number literal cannot say (replaced after stringify). */
const RAW = (text: string): string => `@@RAW:${text}@@`;
const rawNumber = fc
  .constantFrom(
    '1e400',
    '-1e400',
    '1E-400',
    '-0',
    '123456789012345678901234567890.5',
    '0.0000000000000000000000001',
    '19.990000000000000000001',
    '1e-25',
  )
  .map(RAW);

const oddChar = fc.constantFrom(
  '\u0000',
  '\ud800',
  '\udfff',
  '\ud83d\ude00',
  'é',
  '\u202e',
  '\ufeff',
  '%00',
  '\\',
  '"',
  ' ',
  '\n',
  '名',
);
const hostileString = fc.oneof(
  fc.string({ maxLength: 24 }),
  fc.string({ unit: fc.oneof(oddChar, fc.string({ minLength: 1, maxLength: 1 })), maxLength: 12 }),
  // Long text (shrinks towards the shortest length that fails).
  fc.integer({ min: 100, max: 70_000 }).map((n) => 'x'.repeat(n)),
  fc.constantFrom(
    '2026-11-20T10:15:00Z',
    '0000-01-01T00:00:00Z',
    '0001-01-01T00:30:00+01:00',
    '9999-12-31T23:59:59-01:00',
    '2026-02-30T00:00:00Z',
    'USD',
    'XXX',
    'jpy',
    '202912',
    '209913',
    'US',
    'Failed',
    'Captured',
    'retain:x',
  ),
  fc.constantFrom(...PANS).map((p) => `${p}\u0000`),
);
const hostileNumber = fc.oneof(
  fc.double(),
  fc.integer(),
  fc.constantFrom(0, -0, -1, 1e-25, 5e-324, 1e308, 1e21, 0.001, 0.015, 2 ** 53 + 2, 19.99, 0.01, 100000000),
  rawNumber,
);
let depthSeed = 0;
const deepNest = fc.integer({ min: 10, max: 2000 }).map((n) => {
  let v: unknown = `deep${depthSeed++}`;
  for (let i = 0; i < n; i++) v = i % 2 ? [v] : { k: v };
  return v;
});
const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: hostileString },
  { weight: 3, arbitrary: hostileNumber },
  { weight: 1, arbitrary: fc.boolean() },
  { weight: 1, arbitrary: fc.constantFrom(null, [], {}) },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: deepNest },
);

// ---- transaction mutations ------------------------------------------------------------------

const FIELD_PATHS = [
  'amount',
  'currency',
  'timestamp',
  'status',
  'division_number',
  'auth_code',
  'avs_code',
  'cvn_code',
  'payment_network_transaction_id',
  'processor_transaction_id',
  'previous_billing_count',
  'is_network_token',
  'cryptogram',
  'eci_indicator',
  'billing_descriptor',
  'network_advice_code',
  'account',
  'account.id',
  'account.external_id',
  'account.email',
  'subscription',
  'subscription.id',
  'subscription.starts',
  'subscription.affiliate',
  'payment_method',
  'payment_method.id',
  'payment_method.is_tokenized',
  'payment_method.account_holder',
  'payment_method.primary',
  'payment_method.billing_address',
  'payment_method.billing_address.line1',
  'payment_method.billing_address.city',
  'payment_method.billing_address.country',
  'payment_method.billing_address.postal_code',
  'payment_method.credit_card',
  'payment_method.credit_card.account',
  'payment_method.credit_card.account_hash',
  'payment_method.credit_card.expiration_date',
  'metadata',
  'metadata.plan',
  'extra',
  'account.extra',
  'payment_method.credit_card.extra',
  'vid',
  'refunds',
];

type Mutation =
  | { kind: 'set'; path: string; value: unknown }
  | { kind: 'delete'; path: string }
  | { kind: 'metadata-key'; key: string; value: unknown }
  | { kind: 'id'; value: unknown }
  | { kind: 'replace-item'; value: unknown };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record({
      kind: fc.constant('set' as const),
      path: fc.constantFrom(...FIELD_PATHS),
      value: hostileValue,
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('delete' as const), path: fc.constantFrom(...FIELD_PATHS) }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('metadata-key' as const),
      key: fc.oneof(
        hostileString,
        fc.constantFrom(...PANS),
        fc.constantFrom(...PANS).map((p) => `retain:${p}`),
      ),
      value: hostileValue,
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('id' as const),
      value: fc.oneof(hostileString, fc.constantFrom(null, 42, true, [], {})),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('replace-item' as const), value: hostileValue }) },
);

/** A batch: per item, the card it carries and the mutations applied to it (none = a valid item). */
const batchPlan = fc.array(
  fc.record({
    pan: fc.constantFrom(...PANS),
    mutations: fc.oneof(
      { weight: 1, arbitrary: fc.constant<Mutation[]>([]) },
      { weight: 3, arbitrary: fc.array(mutation, { minLength: 1, maxLength: 3 }) },
    ),
  }),
  { minLength: 1, maxLength: 6 },
);

function setPath(root: Record<string, unknown>, path: string, value: unknown, remove = false): void {
  const segs = path.split('.');
  let cur: Record<string, unknown> = root;
  for (const s of segs.slice(0, -1)) {
    const next = cur[s];
    if (typeof next !== 'object' || next === null || Array.isArray(next)) {
      if (remove) return;
      cur[s] = {};
    }
    cur = cur[s] as Record<string, unknown>;
  }
  if (remove) delete cur[segs.at(-1)!];
  else cur[segs.at(-1)!] = value;
}

/** Builds the item with a fresh unique id, so every run (and every shrink step) is a new transaction. */
function buildItem(pan: string, mutations: Mutation[]): unknown {
  let item: unknown = txn({}, pan);
  for (const m of mutations) {
    if (typeof item !== 'object' || item === null || Array.isArray(item)) break;
    const t = item as Record<string, unknown>;
    switch (m.kind) {
      case 'set':
        setPath(t, m.path, structuredClone(m.value));
        break;
      case 'delete':
        setPath(t, m.path, undefined, true);
        break;
      case 'metadata-key':
        if (typeof t['metadata'] !== 'object' || t['metadata'] === null || Array.isArray(t['metadata']))
          t['metadata'] = {};
        (t['metadata'] as Record<string, unknown>)[m.key] = structuredClone(m.value);
        break;
      case 'id':
        // Still unique within and across batches: a string id keeps a fresh prefix.
        t['id'] = typeof m.value === 'string' ? `${uniqueId('fz')}${m.value}` : m.value;
        break;
      case 'replace-item':
        item = structuredClone(m.value);
        break;
    }
  }
  return item;
}

const toBody = (value: unknown): string =>
  JSON.stringify(value).replace(/"@@RAW:([^@"]*)@@"/g, (_m, text: string) => text);

/** The id the service reports a rejected item under (decisions §4; index when the id is unusable). */
function reportedId(item: unknown, index: number, list: string): string {
  const id = typeof item === 'object' && item !== null ? (item as Record<string, unknown>)['id'] : undefined;
  if (typeof id === 'string' && id.length > 0 && id.length <= 128 && unsafeTextDetail(id) === null) return id;
  return `${list}[${index}]`;
}

function expectNoCardNumber(text: string, headers: Headers): void {
  const all = text + JSON.stringify([...headers.entries()]);
  for (const pan of PANS) {
    expect(all).not.toContain(pan);
    expect(all).not.toContain(`${pan.slice(0, 6)}${pan.slice(6, -4)}`);
  }
}

// ---- the properties -------------------------------------------------------------------------

describe('fuzzing the intake and refund endpoints (fast-check)', () => {
  let api: RunningApp;
  let merchant: TestMerchant;
  let client: ApiClient;

  beforeAll(async () => {
    api = await startApp('intake-api');
    merchant = await createMerchant();
    client = new ApiClient(api.url, merchant.api_key);
  });
  afterAll(async () => {
    await api.stop();
    await closeTestDb();
  });

  it('POST /transactions: no 5xx, the rows saved are exactly the accepted items, no card number echoed', async () => {
    const db = await testDb();
    await fc.assert(
      fc.asyncProperty(batchPlan, async (plan) => {
        const items = plan.map((p) => buildItem(p.pan, p.mutations));
        const r = await client.request('POST', '/v1/retain/transactions', toBody({ transactions: items }));
        expect(r.status, r.text.slice(0, 300)).toBeLessThan(500);
        expect([200, 207, 400]).toContain(r.status);
        expectNoCardNumber(r.text, r.headers);

        const ids = items.map((it, i) => reportedId(it, i, 'transactions'));
        const saved: string[] = (
          await db.query(
            `SELECT t.merchant_txn_id FROM transactions t JOIN submissions s ON s.id = t.submission_id
              WHERE s.request_id = $1`,
            [r.headers.get('x-request-id')],
          )
        ).map((row: { merchant_txn_id: string }) => row.merchant_txn_id);
        let accepted: string[];
        if (r.status === 400) {
          expect(r.json.code).toBe('RET400');
          accepted = [];
        } else if (r.status === 200) {
          expect(r.text).toBe('');
          accepted = ids;
        } else {
          const rejected: string[] = r.json.rejected.map((e: { id: string }) => e.id);
          expect(r.json.error_count).toBe(rejected.length);
          expect(r.json.success_count + r.json.error_count).toBe(items.length);
          for (const e of r.json.rejected) expect(e.errors.length).toBeGreaterThan(0);
          accepted = ids.filter((id) => !rejected.includes(id));
          expect(accepted).toHaveLength(r.json.success_count);
        }
        expect(saved.sort()).toEqual([...accepted].sort());
        // Nothing of a rejected item was saved under another submission either.
        const stringIds = ids.filter((id) => !/^transactions\[\d+\]$/.test(id));
        const [{ n }] = await db.query(
          `SELECT count(*)::int AS n FROM transactions t JOIN merchants m ON m.id = t.merchant_id
            WHERE m.login = $1 AND t.merchant_txn_id = ANY($2::text[])`,
          [merchant.login, stringIds],
        );
        expect(n).toBe(accepted.length);
      }),
      { numRuns: RUNS, seed: SEED, verbose: 1 },
    );
  });

  it('POST /refunds: no 5xx, a refund row for exactly the accepted refunds and stops, no card number echoed', async () => {
    const db = await testDb();
    type Target = 'fresh0' | 'fresh1' | 'fresh2' | 'unknown' | 'hostile' | 'wrong-type' | 'missing';
    const refundPlan = fc.array(
      fc.record({
        target: fc.constantFrom<Target>('fresh0', 'fresh1', 'fresh2', 'unknown', 'hostile', 'wrong-type', 'missing'),
        idText: hostileString,
        wrongId: fc.constantFrom(null, 42, true, [], {}),
        amount: fc.option(fc.oneof(hostileNumber, hostileValue), { nil: undefined }),
        extra: fc.option(
          fc.oneof(
            hostileValue,
            fc.constantFrom(...PANS).map((p) => `${p}\ud800`),
          ),
          { nil: undefined },
        ),
      }),
      { minLength: 1, maxLength: 6 },
    );
    await fc.assert(
      fc.asyncProperty(refundPlan, async (plan) => {
        // Three fresh transactions: two still in retry (an accepted item stops one), one captured (an
        // accepted item refunds it, up to the 19.99 captured).
        const fresh = [txn(), txn(), txn()];
        expect((await client.submit(fresh)).status).toBe(200);
        const freshIds = fresh.map((t) => t['id'] as string);
        await db.query(
          `UPDATE transactions SET status = 'Captured', captured_amount_minor = amount_minor WHERE merchant_txn_id = $1`,
          [freshIds[2]],
        );
        const used = new Set<string>();
        const items = plan.map((p) => {
          const item: Record<string, unknown> = {};
          const n = Number(p.target.replace('fresh', ''));
          if (p.target.startsWith('fresh') && !used.has(freshIds[n]!)) {
            used.add(freshIds[n]!);
            item['id'] = freshIds[n];
          } else if (p.target === 'hostile') item['id'] = `${uniqueId('fz')}${p.idText}`;
          else if (p.target === 'wrong-type') item['id'] = p.wrongId;
          else if (p.target !== 'missing') item['id'] = uniqueId('unknown');
          if (p.amount !== undefined) item['amount'] = structuredClone(p.amount);
          if (p.extra !== undefined) item['note'] = structuredClone(p.extra);
          return item;
        });
        const r = await client.request('POST', '/v1/retain/refunds', toBody({ refunds: items }));
        expect(r.status, r.text.slice(0, 300)).toBeLessThan(500);
        expect([200, 207, 400]).toContain(r.status);
        expectNoCardNumber(r.text, r.headers);

        const ids = items.map((it, i) => reportedId(it, i, 'refunds'));
        let rejected: string[] = [];
        if (r.status === 400) {
          expect(r.json.code).toBe('RET400');
          rejected = ids;
        } else if (r.status === 207) {
          rejected = r.json.rejected.map((e: { id: string }) => e.id);
          expect(r.json.error_count).toBe(rejected.length);
        }
        if (r.status !== 400) {
          expect(r.json.message).toBe(`${items.length - rejected.length} refunds received for processing`);
        }
        const rows: { merchant_txn_id: string; status: string; refunds: number; empty: number }[] = await db.query(
          `SELECT t.merchant_txn_id, t.status, (SELECT count(*)::int FROM refunds r WHERE r.transaction_id = t.id) AS refunds,
                  (SELECT count(*)::int FROM refunds r WHERE r.transaction_id = t.id AND r.amount_minor <= 0) AS empty
             FROM transactions t WHERE t.merchant_txn_id = ANY($1::text[])`,
          [freshIds],
        );
        for (const row of rows) {
          const captured = row.merchant_txn_id === freshIds[2];
          const accepted = used.has(row.merchant_txn_id) && !rejected.includes(row.merchant_txn_id);
          expect(row.refunds, row.merchant_txn_id).toBe(accepted ? 1 : 0);
          expect(row.empty, 'a refund or stop of nothing').toBe(0);
          if (captured) expect(row.status).toBe(accepted ? 'Refund Requested' : 'Captured');
          else if (accepted) expect(['Stop Requested', 'Stopped']).toContain(row.status);
          else expect(row.status).toBe('Failed');
        }
      }),
      { numRuns: Math.ceil(RUNS / 2), seed: SEED, verbose: 1 },
    );
  });
});
