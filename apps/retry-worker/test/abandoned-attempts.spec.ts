import { randomUUID } from 'node:crypto';
import { type TestingModule } from '@nestjs/testing';
import { loadConfig, type RetainConfig } from '@retain/config';
import { PgSandboxLedger, SandboxProcessor, type ChargeRequest, type ChargeResult } from '@retain/processor';
import { QueueRegistry, createRedis, recordFailure } from '@retain/queues';
import { AttemptState, rememberPaymentMethod } from '@retain/recovery';
import {
  closeTestDb,
  insertAttemptRow,
  insertMerchantRow,
  insertRefundRow,
  insertTransactionRow,
  setSandboxCharge,
  testDb,
} from '@retain/testing';
import type { Redis } from 'ioredis';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AttemptService } from '../src/attempts/attempt.service';
import { TickProcessor } from '../src/scheduler/tick.processor';
import { attemptTestingModule } from './attempt-testing-module';

const HOUR = 3_600_000;

// An attempt whose retry.attempt job failed for good (10 tries: a long Postgres outage, an error that
// repeats) was left `pending` for ever: the reconciliation reads unknown attempts only and the tick
// claims transactions with a next_attempt_at, which the claim cleared. A charge made was never recorded,
// the customer's other transactions waited for it, and a stop never closed.
describe('attempts left pending by a dead job', () => {
  let mod: TestingModule;
  let db: DataSource;
  let redis: Redis;
  let queues: QueueRegistry;
  let attempts: AttemptService;
  let tick: TickProcessor;
  let merchantId: string;
  const config: RetainConfig = { ...loadConfig('retry-worker'), retryTimeScale: 1 };
  /** Every idempotency key the processor was asked to charge. */
  const charged: string[] = [];
  /** The processor's lookups get no answer (a timeout) while set. */
  let lookupsTimeOut = false;

  beforeAll(async () => {
    db = await testDb();
    redis = createRedis(config.redisUrl);
    queues = new QueueRegistry(redis, config.queuePrefix);
    const sandbox = new SandboxProcessor(new PgSandboxLedger(db));
    const processor = Object.assign(Object.create(sandbox) as SandboxProcessor, {
      charge: (req: ChargeRequest): Promise<ChargeResult> => {
        charged.push(req.idempotencyKey);
        return sandbox.charge(req);
      },
      lookupCharge: (key: string, original?: ChargeRequest): Promise<ChargeResult | null> =>
        lookupsTimeOut
          ? Promise.resolve({ outcome: 'error', message: 'lookup timed out' })
          : sandbox.lookupCharge(key, original),
    });
    mod = await attemptTestingModule(db, queues, config, processor);
    attempts = mod.get(AttemptService);
    tick = mod.get(TickProcessor);
    merchantId = await insertMerchantRow(db);
  });
  afterAll(async () => {
    await mod?.close();
    await queues?.close();
    redis?.disconnect();
    await closeTestDb();
  });

  const txnRow = async (id: string) =>
    (
      await db.query(
        `SELECT status, next_attempt_at, captured_amount_minor, attempt_count FROM transactions WHERE id = $1`,
        [id],
      )
    )[0];
  const attemptRows = async (txnId: string) =>
    db.query(`SELECT id, state, retry_number FROM attempts WHERE transaction_id = $1 ORDER BY created_at`, [
      txnId,
    ]) as Promise<{ id: string; state: string; retry_number: number }[]>;
  const refundRows = async (txnId: string) =>
    db.query(`SELECT kind, status FROM refunds WHERE transaction_id = $1`, [txnId]) as Promise<unknown[]>;
  const ledger = async (key: string) =>
    (
      await db.query(`SELECT result->>'outcome' AS outcome FROM sandbox_operations WHERE idempotency_key = $1`, [key])
    )[0]?.outcome ?? null;
  /** The job of these attempts failed for good (recorded as the worker's failed handler records it). */
  const jobFailedForGood = (attemptIds: string[]) =>
    recordFailure(db, {
      queue: 'retry.attempt',
      jobId: randomUUID(),
      jobName: 'attempt',
      payload: { v: 2, attemptIds },
      attempts: 10,
      error: 'Connection terminated unexpectedly',
      outboxId: null,
    });
  /** A prepared attempt whose job died after the in-flight mark committed. */
  const deadPrepared = (t: { id: string; merchantId: string }) =>
    insertAttemptRow(db, t, { preparedAt: new Date(Date.now() - 2 * HOUR) });

  it('(a) a charge made by an attempt whose job died is looked up and recorded', async () => {
    const t = await insertTransactionRow(db, merchantId);
    const a = await deadPrepared(t);
    // The processor approved; the record failed, and so did every retry of the job.
    await setSandboxCharge(db, a.vid, { outcome: 'approved', processorTransactionId: 'sbx_dead_job' });
    await tick.process();
    expect({ attempts: await attemptRows(t.id), txn: await txnRow(t.id) }).toMatchObject({
      attempts: [{ state: 'captured' }],
      txn: { status: 'Captured', captured_amount_minor: '1999' },
    });
  });

  it("(b) the customer's other transaction is charged, not deferred for ever behind it", async () => {
    const t1 = await insertTransactionRow(db, merchantId);
    await deadPrepared(t1);
    const t2 = await insertTransactionRow(db, merchantId);
    // Same customer (account), its payment method remembered: one charge at a time per customer.
    await db.query(
      `UPDATE transactions SET account_id = (SELECT account_id FROM transactions WHERE id = $2) WHERE id = $1`,
      [t2.id, t1.id],
    );
    await db.transaction((m) => rememberPaymentMethod(m, config.cardKeys, merchantId, t2.id));
    const runs: string[] = [];
    for (let i = 0; i < 3 && (await txnRow(t2.id)).status !== 'Captured'; i++) {
      await db.query(`UPDATE transactions SET next_attempt_at = now() - interval '1 second' WHERE id = $1`, [t2.id]);
      await tick.process();
      const pending = (await attemptRows(t2.id)).filter((r) => r.state === 'pending');
      for (const p of pending) runs.push(await attempts.run(p.id));
    }
    expect({ runs, t2: (await txnRow(t2.id)).status }).toEqual({ runs: ['approved'], t2: 'Captured' });
  });

  it('(c) a stop of a transaction whose attempt was left pending closes once the attempt is looked up by key', async () => {
    const t = await insertTransactionRow(db, merchantId, { stopRequested: true });
    const a = await deadPrepared(t);
    await tick.process();
    // Nothing under the key at the processor (the request never arrived): not charged, the stop closes.
    // Looked up by key only after the stop: never charged now.
    expect({
      attempts: await attemptRows(t.id),
      txn: (await txnRow(t.id)).status,
      refunds: await refundRows(t.id),
      charged: await ledger(a.vid),
    }).toMatchObject({
      attempts: [{ state: 'error' }],
      txn: 'Stopped',
      refunds: [{ kind: 'stop', status: 'Completed' }],
      charged: null,
    });
    expect(charged).not.toContain(a.vid);
  });

  it('an unknown attempt on a card declined 41 since (another transaction): looked up by key only, never replayed', async () => {
    // A merchant of its own: the 41 binds the card for good, per merchant (network-rules.md).
    const merchant = await insertMerchantRow(db);
    const t1 = await insertTransactionRow(db, merchant);
    // Prepared 2 h ago; its request never arrived (a timeout): unknown, nothing under its key.
    const a = await insertAttemptRow(db, t1, {
      state: 'unknown',
      preparedAt: new Date(Date.now() - 2 * HOUR),
      responseCode: '96',
      authCodeDescription: 'Soft Failure',
    });
    // Since then the same card (same card_hmac, same merchant) was declined 41: Visa category 1, "none, ever".
    const t2 = await insertTransactionRow(db, merchant);
    await insertAttemptRow(db, t2, {
      state: 'declined',
      preparedAt: new Date(Date.now() - HOUR),
      processedAt: new Date(Date.now() - HOUR),
      responseCode: '41',
      authCodeDescription: 'Hard Failure',
    });
    await tick.process();
    // A replay of its request would be a fresh authorization on a blocked card.
    expect({ charged: await ledger(a.vid), txn: (await txnRow(t1.id)).captured_amount_minor }).toEqual({
      charged: null,
      txn: null,
    });
  });

  it('a rerun of a prepared attempt on a card declined 41 since: not sent again, unknown', async () => {
    const merchant = await insertMerchantRow(db);
    const t1 = await insertTransactionRow(db, merchant);
    // Its first run marked it in flight 10 min ago and died before the processor got the request.
    const a = await insertAttemptRow(db, t1, { preparedAt: new Date(Date.now() - 10 * 60_000) });
    const t2 = await insertTransactionRow(db, merchant);
    await insertAttemptRow(db, t2, {
      state: 'declined',
      preparedAt: new Date(Date.now() - 5 * 60_000),
      processedAt: new Date(Date.now() - 5 * 60_000),
      responseCode: '41',
      authCodeDescription: 'Hard Failure',
    });
    expect(await attempts.run(a.id)).toBe('unknown');
    expect({ charged: await ledger(a.vid), sent: charged.includes(a.vid) }).toEqual({ charged: null, sent: false });
  });

  it("a late answer of the dead job's charge is not recorded over the sweep: the reconciliation owns the attempt", async () => {
    const t = await insertTransactionRow(db, merchantId);
    const a = await deadPrepared(t);
    // The processor does not answer the reconciliation's lookup: the attempt stays unknown.
    lookupsTimeOut = true;
    try {
      await tick.process();
    } finally {
      lookupsTimeOut = false;
    }
    expect(await attemptRows(t.id)).toMatchObject([{ state: 'unknown' }]);
    const late: ChargeResult = { outcome: 'approved', responseCode: '00', processorTransactionId: 'x', message: 'ok' };
    const recorded = await db.transaction((m) => attempts.record(m, a.id, late, AttemptState.Pending));
    expect(recorded.outbox).toEqual([]);
    expect(await attempts.run(a.id)).toBe('nothing to do');
    expect(await attemptRows(t.id)).toMatchObject([{ state: 'unknown' }]);
  });

  it('a never-prepared attempt whose job failed for good is dropped: the transaction is scheduled again', async () => {
    const t = await insertTransactionRow(db, merchantId, { attemptCount: 0 });
    const a = await insertAttemptRow(db, t);
    await db.query(`UPDATE attempts SET created_at = now() - interval '2 hours' WHERE id = $1`, [a.id]);
    await jobFailedForGood([a.id]);
    await tick.process();
    // The same tick schedules it again: a new attempt with the same retry number, in a live job.
    const rows = await attemptRows(t.id);
    expect(rows).toMatchObject([{ state: 'pending', retry_number: 1 }]);
    expect(rows[0]!.id).not.toBe(a.id);
    expect(await txnRow(t.id)).toMatchObject({ status: 'In Retry', attempt_count: 1, next_attempt_at: null });
    expect(await attempts.run(rows[0]!.id)).toBe('approved');
  });

  it('a never-prepared attempt whose job failed for good, of a stopped transaction: the stop closes', async () => {
    const t = await insertTransactionRow(db, merchantId);
    const a = await insertAttemptRow(db, t);
    await db.query(`UPDATE attempts SET created_at = now() - interval '2 hours' WHERE id = $1`, [a.id]);
    await db.query(`UPDATE transactions SET status = 'Stop Requested', stop_requested_at = now() WHERE id = $1`, [
      t.id,
    ]);
    await insertRefundRow(db, t, 'stop', '1999');
    await jobFailedForGood([a.id]);
    await tick.process();
    expect({ attempts: await attemptRows(t.id), txn: (await txnRow(t.id)).status }).toEqual({
      attempts: [],
      txn: 'Stopped',
    });
  });

  it('left alone: a never-prepared attempt whose job is alive, a prepared one younger than the bound', async () => {
    const t1 = await insertTransactionRow(db, merchantId);
    const queued = await insertAttemptRow(db, t1);
    // Waiting in a long backlog: old, but its job never failed.
    await db.query(`UPDATE attempts SET created_at = now() - interval '2 hours' WHERE id = $1`, [queued.id]);
    const t2 = await insertTransactionRow(db, merchantId);
    // Its job's tries and backoff are not over yet.
    const inFlight = await insertAttemptRow(db, t2, { preparedAt: new Date(Date.now() - 10 * 60_000) });
    await tick.process();
    expect((await attemptRows(t1.id)).map((r) => [r.id, r.state])).toEqual([[queued.id, 'pending']]);
    expect((await attemptRows(t2.id)).map((r) => [r.id, r.state])).toEqual([[inFlight.id, 'pending']]);
  });
});
