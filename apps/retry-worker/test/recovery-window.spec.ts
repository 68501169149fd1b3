import { type TestingModule } from '@nestjs/testing';
import { loadConfig, type RetainConfig } from '@retain/config';
import { ProcessorThrottlesRepository } from '@retain/db';
import { recoveryWindowEnd } from '@retain/domain';
import { PgSandboxLedger, SandboxProcessor } from '@retain/processor';
import { QueueRegistry, createRedis } from '@retain/queues';
import { closeTestDb, insertAttemptRow, insertMerchantRow, insertTransactionRow, testDb } from '@retain/testing';
import type { Redis } from 'ioredis';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AttemptService } from '../src/attempts/attempt.service';
import { AttemptSchedulerService } from '../src/scheduler/attempt-scheduler.service';
import { attemptTestingModule } from './attempt-testing-module';

const DAY = 86_400_000;

// README, the retry policy: "no attempt is ever made after the window". The planner places every
// attempt inside it, but an attempt run late (a backlog, a worker down) or deferred (the processor's
// Retry-After) was charged past it (the policy audit of the sixteenth session).
describe('no attempt after the recovery window', () => {
  let mod: TestingModule;
  let db: DataSource;
  let redis: Redis;
  let queues: QueueRegistry;
  let attempts: AttemptService;
  const config: RetainConfig = { ...loadConfig('retry-worker'), retryTimeScale: 1 };

  beforeAll(async () => {
    db = await testDb();
    redis = createRedis(config.redisUrl);
    queues = new QueueRegistry(redis, config.queuePrefix);
    mod = await attemptTestingModule(db, queues, config, new SandboxProcessor(new PgSandboxLedger(db)));
    attempts = mod.get(AttemptService);
  });
  afterAll(async () => {
    await mod?.close();
    await queues?.close();
    redis?.disconnect();
    await closeTestDb();
  });

  const submittedAgo = (id: string, ms: number) =>
    db.query(
      `UPDATE transactions SET submitted_ts = now() - ($2::double precision * interval '1 millisecond'),
              failed_at = now() - ($2::double precision * interval '1 millisecond') WHERE id = $1`,
      [id, ms],
    );
  const charges = async (vid: string) =>
    (await db.query(`SELECT count(*)::int AS n FROM sandbox_operations WHERE idempotency_key = $1`, [vid]))[0]
      .n as number;
  const windowEndOf = async (id: string) => {
    const [{ submitted_ts }] = await db.query(`SELECT submitted_ts FROM transactions WHERE id = $1`, [id]);
    return recoveryWindowEnd({ startedAt: new Date(submitted_ts), timeScale: 1 });
  };

  it('an attempt planned inside the window but run after it (a backlog): never charged, the recovery ends', async () => {
    const merchantId = await insertMerchantRow(db);
    const t = await insertTransactionRow(db, merchantId, { status: 'In Retry', attemptCount: 1 });
    await submittedAgo(t.id, 31 * DAY); // the 30-day window ended a day ago
    const end = await windowEndOf(t.id);
    // Planned an hour before the window's end; the workers were down until now.
    await db.query(`UPDATE transactions SET next_attempt_at = $2 WHERE id = $1`, [
      t.id,
      new Date(end.getTime() - 3_600_000),
    ]);
    await mod.get(AttemptSchedulerService).scheduleDue();
    const [a] = await db.query(`SELECT id, vid FROM attempts WHERE transaction_id = $1`, [t.id]);
    await attempts.runMany([a.id]);
    const [txn] = await db.query(`SELECT status, next_attempt_at FROM transactions WHERE id = $1`, [t.id]);
    expect({ charges: await charges(a.vid), status: txn.status, next: txn.next_attempt_at }).toEqual({
      charges: 0,
      status: 'Cancelled',
      next: null,
    });
  });

  it('an attempt marked in flight before the window ended is never sent again after it: unknown, looked up by key only', async () => {
    // A timeout left it unknown; the reconciliation's replay (or a rerun of its job) after the window's end
    // would make its first authorization then, if the first request never arrived (the scale-out audit, session 25).
    const merchantId = await insertMerchantRow(db);
    const rerun = await insertTransactionRow(db, merchantId, { status: 'In Retry' });
    const looked = await insertTransactionRow(db, merchantId, { status: 'In Retry' });
    await submittedAgo(rerun.id, 30 * DAY + 20_000); // the windows ended 20 s ago
    await submittedAgo(looked.id, 30 * DAY + 20_000);
    const markedAt = new Date(Date.now() - 25_000);
    const pending = await insertAttemptRow(db, rerun, { retryNumber: 2, preparedAt: markedAt });
    const unknown = await insertAttemptRow(db, looked, { retryNumber: 2, preparedAt: markedAt, state: 'unknown' });
    await attempts.run(pending.id);
    expect(await attempts.lookUp((await attempts.chargeOf(unknown.id))!)).toBeNull();
    const [row] = await db.query(`SELECT state FROM attempts WHERE id = $1`, [pending.id]);
    expect({ rerun: await charges(pending.vid), lookedUp: await charges(unknown.vid), state: row.state }).toEqual({
      rerun: 0,
      lookedUp: 0,
      state: 'unknown',
    });
  });

  it('a backlog run together: the late attempt inside its window is charged, the one past it ends its recovery', async () => {
    const merchantId = await insertMerchantRow(db);
    const inside = await insertTransactionRow(db, merchantId, { status: 'In Retry', attemptCount: 1 });
    const past = await insertTransactionRow(db, merchantId, { status: 'In Retry', attemptCount: 1 });
    await submittedAgo(inside.id, 10 * DAY);
    await submittedAgo(past.id, 31 * DAY);
    // Both planned hours ago (inside their windows then); the workers were down until now.
    await db.query(`UPDATE transactions SET next_attempt_at = now() - interval '3 hours' WHERE id = ANY($1::uuid[])`, [
      [inside.id, past.id],
    ]);
    await mod.get(AttemptSchedulerService).scheduleDue();
    const rows: { id: string; vid: string; transaction_id: string }[] = await db.query(
      `SELECT id, vid, transaction_id FROM attempts WHERE transaction_id = ANY($1::uuid[])`,
      [[inside.id, past.id]],
    );
    expect(rows).toHaveLength(2);
    await attempts.runMany(rows.map((r) => r.id));
    const outcome = async (t: { id: string }) => {
      const a = rows.find((r) => r.transaction_id === t.id)!;
      const [txn] = await db.query(`SELECT status FROM transactions WHERE id = $1`, [t.id]);
      return { charges: await charges(a.vid), status: txn.status };
    };
    expect(await outcome(inside)).toEqual({ charges: 1, status: 'Captured' });
    expect(await outcome(past)).toEqual({ charges: 0, status: 'Cancelled' });
  });

  it("the processor's Retry-After past the window's end: the recovery ends instead of waiting to charge after it", async () => {
    const merchantId = await insertMerchantRow(db);
    const t = await insertTransactionRow(db, merchantId);
    await submittedAgo(t.id, 30 * DAY - 5_000); // the window ends in 5 s
    await ProcessorThrottlesRepository.slowDown(db, merchantId, new Date(Date.now() + 60_000));
    const a = await insertAttemptRow(db, t, { retryNumber: 2 });
    await attempts.run(a.id);
    const [txn] = await db.query(`SELECT status, next_attempt_at FROM transactions WHERE id = $1`, [t.id]);
    expect({ charges: await charges(a.vid), status: txn.status, next: txn.next_attempt_at }).toEqual({
      charges: 0,
      status: 'Cancelled',
      next: null,
    });
  });

  it('a throttle that ends inside the window only defers the attempt', async () => {
    const merchantId = await insertMerchantRow(db);
    const t = await insertTransactionRow(db, merchantId);
    await submittedAgo(t.id, 10 * DAY);
    await ProcessorThrottlesRepository.slowDown(db, merchantId, new Date(Date.now() + 60_000));
    const a = await insertAttemptRow(db, t, { retryNumber: 2 });
    expect(await attempts.run(a.id)).toBe('nothing to do');
    const [txn] = await db.query(`SELECT status FROM transactions WHERE id = $1`, [t.id]);
    expect({ charges: await charges(a.vid), status: txn.status }).toEqual({ charges: 0, status: 'In Retry' });
  });
});
