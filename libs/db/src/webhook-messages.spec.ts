import { MAX_WEBHOOK_RETRY_STEP, parseDuration } from '@retain/config';
import type { DataSource, QueryRunner } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodes, type PlanNode } from '../test/plans';
import { scratchDatabaseUrl } from '../test/scratch-database';
import { scratchMerchant } from '../test/scratch-merchant';
import { createDataSource, dropDatabase, migrate } from './data-source';
import {
  CLAIM_NEXT_DUE_SQL,
  WebhookMessagesRepository,
  duePushesSql,
} from './repositories/webhook-messages.repository';

/** Merchant A's backlog: new messages announced before anyone else's, and retries. */
const A_FRESH = 20_000;
const A_WAITING = 3_000;
const A_DUE = 500;
/** Merchants with a retry hours away only: pending, nothing due. */
const IDLE_MERCHANTS = 60;

// The dispatcher's claim and its grouped record of attempts (real Postgres), on a database of its own:
// the claim spans every merchant, so no other file's pushes may be in it.
describe('webhook messages: the claim and the record (real Postgres)', () => {
  const url = scratchDatabaseUrl('pushes');
  let db: DataSource;
  const merchant = { a: '', b: '', c: '' };

  /** `n` messages of a merchant: new (next_attempt_at NULL) or retried, due at `next` (SQL); oldest first. */
  const insert = (merchantId: string, n: number, next: string | null, age = "interval '1 hour'") =>
    db.query(
      `INSERT INTO webhook_messages (message_id, merchant_id, event_name, payload_id, body, attempt_count,
         next_attempt_at, created_at)
       SELECT substr(md5(random()::text) || md5(random()::text), 1, 27), $1, 'retry succeeded', 'p', '{}'::jsonb,
              ${next === null ? 0 : 1}, ${next ?? 'NULL'}, now() - ${age} + g * interval '1 millisecond'
         FROM generate_series(1, $2::int) AS g`,
      [merchantId, n],
    );

  beforeAll(async () => {
    await migrate(url);
    db = createDataSource(url, 2);
    await db.initialize();
    merchant.a = (await scratchMerchant(db, 'a_')).merchantId;
    merchant.b = (await scratchMerchant(db, 'b_')).merchantId;
    merchant.c = (await scratchMerchant(db, 'c_')).merchantId;
    await insert(merchant.a, A_FRESH, null);
    await insert(merchant.a, A_WAITING, "now() + interval '1 hour'", "interval '2 hours'");
    await insert(merchant.a, A_DUE, "now() - interval '1 minute'", "interval '2 hours'");
    await db.query(
      `UPDATE webhook_messages SET status = 'delivered', delivered_at = now()
        WHERE id IN (SELECT id FROM webhook_messages WHERE merchant_id = $1 AND next_attempt_at IS NULL LIMIT 5000)`,
      [merchant.a],
    );
    for (let i = 0; i < IDLE_MERCHANTS; i++) {
      await insert((await scratchMerchant(db, `idle${i}_`)).merchantId, 1, "now() + interval '5 hours'");
    }
    // B's push comes last; C has two retries due.
    await insert(merchant.b, 1, null, "interval '0 seconds'");
    await insert(merchant.c, 2, "now() - interval '10 seconds'");
  }, 120_000);
  afterAll(async () => {
    await db.destroy();
    await dropDatabase(url);
  });

  /** Runs `fn` in a transaction rolled back: each test claims from the same rows. */
  const rolledBack = async <T>(fn: (runner: QueryRunner) => Promise<T>): Promise<T> => {
    const runner = db.createQueryRunner();
    await runner.startTransaction();
    try {
      return await fn(runner);
    } finally {
      await runner.rollbackTransaction();
      await runner.release();
    }
  };
  /** The claim's rows counted per merchant, and its share. */
  const claim = (exclude: string[] = []) =>
    rolledBack(async (runner) => {
      const [rows]: [{ merchant_id: string; attempt_count: number; share: number }[], number] = await runner.query(
        CLAIM_NEXT_DUE_SQL,
        [64, 60, exclude],
      );
      const per = { a: 0, b: 0, c: 0, other: 0 };
      for (const r of rows) {
        const who = (Object.keys(merchant) as (keyof typeof merchant)[]).find((k) => merchant[k] === r.merchant_id);
        per[who ?? 'other']++;
      }
      return { per, share: rows[0]?.share };
    });

  it("claims B's push and C's retries beside a share of A's backlog, announced before them", async () => {
    // Three merchants with work due: a third of 64 each, of new messages and of retries.
    expect(await claim()).toEqual({ per: { a: 22 + 22, b: 1, c: 2, other: 0 }, share: 22 });
  });

  it('gives a merchant alone the whole claim, and a merchant left out nothing', async () => {
    // A alone (B and C left out): 64 new messages and 64 retries, as the oldest-first claim took.
    expect(await claim([merchant.b, merchant.c])).toEqual({ per: { a: 128, b: 0, c: 0, other: 0 }, share: 64 });
    expect(await claim([merchant.a])).toEqual({ per: { a: 0, b: 1, c: 2, other: 0 }, share: 32 });
  });

  /** The claim's plan, and its reads: every scan of webhook_messages by index, none reading A's backlog through. */
  const expectIndexedClaim = async () => {
    const plan = await rolledBack(async (runner) => {
      const [row] = await runner.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${CLAIM_NEXT_DUE_SQL}`, [64, 60, []]);
      return (row['QUERY PLAN'] ?? row)[0] as { Plan: PlanNode & Record<string, number> };
    });
    const list = nodes(plan.Plan) as (PlanNode & Record<string, unknown>)[];
    const shape = list.map((n) => `${n['Node Type']} ${n['Index Name'] ?? n['Relation Name'] ?? ''}`).join(' > ');
    const scans = list.filter((n) => n['Relation Name'] === 'webhook_messages' && /Scan/.test(n['Node Type']));
    expect(scans.length, shape).toBeGreaterThan(0);
    for (const n of scans) {
      expect(n['Node Type'], shape).toMatch(/^Index (Only )?Scan$/);
      expect(n['Index Name'], shape).toMatch(/^webhook_messages_(pending_merchant|fresh_merchant|pkey)$/);
    }
    const sortsOfScans = list.filter(
      (n) => n['Node Type'] === 'Sort' && (n.Plans ?? []).some((c) => c['Relation Name'] === 'webhook_messages'),
    );
    expect(sortsOfScans, shape).toHaveLength(0);
    // Pages the scans read (about 650 here): some 3 a probe, one probe per merchant with pending messages
    // (63) to find them and two to find each one's oldest due work, then the claimed rows. Reading A's
    // 20,000 messages through would take tens of thousands.
    const pages = scans.reduce((sum, n) => sum + Number(n['Shared Hit Blocks']) + Number(n['Shared Read Blocks']), 0);
    expect(pages, shape).toBeLessThan(1000);
  };

  it('claims by index, with statistics never gathered', async () => {
    await expectIndexedClaim();
  });

  it('claims by index after ANALYZE', async () => {
    await db.query(`ANALYZE webhook_messages`);
    await expectIndexedClaim();
  });

  // KEDA scales the dispatcher on this count (k8s/base/keda-scaledobjects.yaml, checked by test/deploy).
  it('counts the pushes waiting for a dispatcher: new and due, capped, by index', async () => {
    const count = async (cap: number) => Number((await db.query(duePushesSql(cap)))[0].count);
    // A's 15,000 new and 500 due, B's new one and C's two due; not the retries hours away, not the delivered.
    expect(await count(100_000)).toBe(A_FRESH - 5000 + A_DUE + 1 + 2);
    expect(await count(1280)).toBe(1280);
    // Claimed (leased) messages are in a dispatcher's hands: not waiting.
    expect(
      await rolledBack(async (runner) => {
        const [claimed] = await runner.query(CLAIM_NEXT_DUE_SQL, [64, 60, []]);
        return (
          A_FRESH - 5000 + A_DUE + 3 - Number((await runner.query(duePushesSql(100_000)))[0].count) - claimed.length
        );
      }),
    ).toBe(0);
    // Polled every 15 s: the cap bounds what it reads, however long the backlog.
    const [row] = await db.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${duePushesSql(1280)}`);
    const plan = (row['QUERY PLAN'] ?? row)[0] as { Plan: PlanNode };
    const list = nodes(plan.Plan) as (PlanNode & Record<string, unknown>)[];
    const shape = list.map((n) => `${n['Node Type']} ${n['Index Name'] ?? n['Relation Name'] ?? ''}`).join(' > ');
    const scans = list.filter((n) => n['Relation Name'] === 'webhook_messages' && /Scan/.test(n['Node Type']));
    const pages = scans.reduce((sum, n) => sum + Number(n['Shared Hit Blocks']) + Number(n['Shared Read Blocks']), 0);
    expect(pages, shape).toBeLessThan(200);
  });

  it('records a batch holding the longest retry delay WEBHOOK_RETRY_SCHEDULE allows, jitter (20%) included', async () => {
    type Claim = { message_id: string; attempt_count: number; replay_count: number };
    const [longest, next]: Claim[] = await db.query(
      `SELECT message_id, attempt_count, replay_count FROM webhook_messages WHERE merchant_id = $1 AND status = 'pending' LIMIT 2`,
      [merchant.c],
    );
    const delayMs = Math.round(parseDuration(MAX_WEBHOOK_RETRY_STEP)! * 1.2);
    const record = (claim: Claim, delay_ms: number) => ({
      ...claim,
      outbox_id: null,
      log: {
        attempt: 1,
        attempted_at: new Date().toISOString(),
        url: 'https://x.example/h',
        latency_ms: 3,
        error: null,
      },
      status: 'pending' as const,
      status_code: 503,
      delay_ms,
      last_error: 'HTTP 503',
    });
    await new WebhookMessagesRepository(db).recordAttempts([record(longest!, delayMs), record(next!, 5000)]);
    const rows: { message_id: string; wait_ms: number }[] = await db.query(
      `SELECT message_id, extract(epoch FROM next_attempt_at - now()) * 1000 AS wait_ms FROM webhook_messages
        WHERE message_id = ANY($1)`,
      [[longest!.message_id, next!.message_id]],
    );
    const wait = new Map(rows.map((r) => [r.message_id, Number(r.wait_ms)]));
    expect(wait.get(longest!.message_id)).toBeGreaterThan(delayMs - 60_000);
    expect(wait.get(next!.message_id)).toBeLessThan(60_000);
  });

  it('records a delivered push whose claim Postgres lost in a crash (asynchronous commit), not a failed one', async () => {
    const m = (await scratchMerchant(db, 'lost_')).merchantId;
    await insert(m, 3, "now() - interval '1 second'");
    type Row = { message_id: string; attempt_count: number; replay_count: number };
    const rows: Row[] = await db.query(
      `SELECT message_id, attempt_count, replay_count FROM webhook_messages WHERE merchant_id = $1 ORDER BY id`,
      [m],
    );
    // Each was claimed (attempt_count + 1) and sent; the claim's commit was lost: the row still has the old count.
    const claim = (r: Row, bump = 1) => ({ ...r, attempt_count: r.attempt_count + bump });
    const result = (c: Row, status: 'delivered' | 'pending', code: number) => ({
      ...c,
      outbox_id: null,
      log: {
        attempt: c.attempt_count,
        attempted_at: new Date().toISOString(),
        url: 'https://x.example/h',
        latency_ms: 3,
        error: null,
      },
      status,
      status_code: code,
      delay_ms: status === 'pending' ? 5000 : null,
      last_error: status === 'pending' ? 'HTTP 503' : null,
    });
    // The third was claimed again since by another dispatcher (its lease ran out): two claims newer.
    await db.query(`UPDATE webhook_messages SET attempt_count = attempt_count + 2 WHERE message_id = $1`, [
      rows[2]!.message_id,
    ]);
    await new WebhookMessagesRepository(db).recordAttempts([
      result(claim(rows[0]!), 'delivered', 202),
      result(claim(rows[1]!), 'pending', 503),
      result(claim(rows[2]!), 'delivered', 202),
    ]);
    const after: { message_id: string; status: string }[] = await db.query(
      `SELECT message_id, status FROM webhook_messages WHERE merchant_id = $1 ORDER BY id`,
      [m],
    );
    expect(after.map((r) => r.status)).toEqual(['delivered', 'pending', 'pending']);
  });
});
