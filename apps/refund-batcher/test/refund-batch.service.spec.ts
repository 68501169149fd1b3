import { Test, type TestingModule } from '@nestjs/testing';
import { loadConfig } from '@retain/config';
import { RETAIN_CONFIG, RetainMetrics } from '@retain/platform';
import { newVid } from '@retain/domain';
import {
  PgSandboxLedger,
  ProcessorUnavailableError,
  SandboxProcessor,
  TRANSACTION_PROCESSORS,
  fixedProcessor,
  type RefundRequest,
} from '@retain/processor';
import { OutboxRelay, QueueRegistry, createRedis } from '@retain/queues';
import {
  closeTestDb,
  insertAttemptRow,
  insertMerchantRow,
  insertRefundRow,
  insertTransactionRow,
  testDb,
} from '@retain/testing';
import type { Redis } from 'ioredis';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RefundBatchService } from '../src/batch/refund-batch.service';

// Issue 9, defect 1 on the refund-batch path: the batch's safety net never closes a stop as
// "nothing charged" over an attempt whose outcome is unknown (service level, real Postgres).
describe('refund batch: stops over unknown attempts', () => {
  let mod: TestingModule;
  let db: DataSource;
  let redis: Redis;
  let queues: QueueRegistry;
  let batch: RefundBatchService;
  const config = loadConfig('refund-batcher');
  /** The sandbox, whose next refunds can go unanswered (ProcessorUnavailableError). */
  let unanswered = 0;
  /** A refund (by idempotency key) whose sending throws something else each time (a broken account). */
  let broken: string | null = null;
  /** Runs on each read of a completed refund (refundStatus); set: every read goes unanswered. */
  let onRead: ((processorRefundId: string) => Promise<void>) | null = null;
  let sandbox: SandboxProcessor;

  beforeAll(async () => {
    db = await testDb();
    sandbox = new SandboxProcessor(new PgSandboxLedger(db));
    redis = createRedis(config.redisUrl);
    queues = new QueueRegistry(redis, config.queuePrefix);
    mod = await Test.createTestingModule({
      providers: [
        RefundBatchService,
        { provide: DataSource, useValue: db },
        { provide: RetainMetrics, useValue: new RetainMetrics('refund-batcher') },
        { provide: RETAIN_CONFIG, useValue: config },
        { provide: OutboxRelay, useValue: new OutboxRelay(db, queues) },
        { provide: TRANSACTION_PROCESSORS, useValue: fixedProcessor(flaky()) },
      ],
    }).compile();
    batch = mod.get(RefundBatchService);
  });
  afterAll(async () => {
    await mod?.close();
    await queues?.close();
    redis?.disconnect();
    await closeTestDb();
  });

  function flaky(): SandboxProcessor {
    return Object.assign(Object.create(sandbox) as SandboxProcessor, {
      refund: async (req: RefundRequest) => {
        if (req.idempotencyKey === broken) throw new Error('processor account config no longer valid');
        if (unanswered > 0) {
          unanswered--;
          throw new ProcessorUnavailableError('HTTP 503');
        }
        return sandbox.refund(req);
      },
      refundStatus: async (processorRefundId: string) => {
        if (!onRead) return { outcome: 'completed', processorRefundId, message: 'Refunded', mayStillFail: true };
        await onRead(processorRefundId);
        throw new ProcessorUnavailableError('timeout');
      },
    });
  }

  const state = async (id: string) => ({
    status: (await db.query(`SELECT status FROM transactions WHERE id = $1`, [id]))[0].status,
    refunds: await db.query(`SELECT kind, status FROM refunds WHERE transaction_id = $1`, [id]),
  });

  it('a stop over an unknown attempt stays open; a stop with nothing in flight closes Stopped', async () => {
    const merchantId = await insertMerchantRow(db);
    const unknown = await insertTransactionRow(db, merchantId, { stopRequested: true });
    await insertAttemptRow(db, unknown, {
      state: 'unknown',
      preparedAt: new Date(Date.now() - 60_000),
      responseCode: '96',
      authCodeDescription: 'Soft Failure',
    });
    const idle = await insertTransactionRow(db, merchantId, { stopRequested: true });
    await batch.runBatch();
    expect(await state(unknown.id)).toEqual({
      status: 'Stop Requested',
      refunds: [{ kind: 'stop', status: 'Processing' }],
    });
    expect(await state(idle.id)).toEqual({ status: 'Stopped', refunds: [{ kind: 'stop', status: 'Completed' }] });
  });

  it('a refund the processor does not answer stays Processing, the batch goes on, the next batch sends it with the same key', async () => {
    const merchantId = await insertMerchantRow(db);
    const refundOf = async () => {
      const t = await insertTransactionRow(db, merchantId, { status: 'Refund Requested', capturedMinor: '1999' });
      const vid = newVid();
      await db.query(
        `INSERT INTO refunds (vid, merchant_id, transaction_id, kind, amount_minor, currency, status, previous_status,
           requested_at, timestamp)
         VALUES ($1, $2, $3, 'refund', 1999, 'USD', 'Processing', 'Captured', now() - interval '1 minute', now())`,
        [vid, merchantId, t.id],
      );
      return { t, vid };
    };
    const first = await refundOf();
    const second = await refundOf();
    const sentFor = async (vid: string) =>
      (await db.query(`SELECT count(*)::int AS n FROM sandbox_operations WHERE idempotency_key = $1`, [vid]))[0].n;
    unanswered = 1;
    const one = await batch.runBatch();
    expect(one).toMatchObject({ completed: 1, deferred: 1 });
    const states = [await state(first.t.id), await state(second.t.id)].map((s) => s.refunds[0].status).sort();
    expect(states).toEqual(['Completed', 'Processing']);
    // A refund marked sent is claimed again 1 s later: age the mark instead of sleeping.
    await db.query(`UPDATE refunds SET sent_at = now() - interval '2 seconds' WHERE vid = ANY($1::text[])`, [
      [first.vid, second.vid],
    ]);
    const two = await batch.runBatch();
    expect(two).toMatchObject({ completed: 1, deferred: 0 });
    for (const r of [first, second]) {
      expect((await state(r.t.id)).refunds).toEqual([{ kind: 'refund', status: 'Completed' }]);
      expect(await sentFor(r.vid)).toBe(1);
    }
  });

  it('a refund whose sending keeps failing holds up no other refund: it stays Processing, the others are sent', async () => {
    const merchantId = await insertMerchantRow(db);
    const refundOf = async (age: string) => {
      const t = await insertTransactionRow(db, merchantId, { status: 'Refund Requested', capturedMinor: '1999' });
      const vid = newVid();
      await db.query(
        `INSERT INTO refunds (vid, merchant_id, transaction_id, kind, amount_minor, currency, status, previous_status,
           requested_at, timestamp, created_at)
         VALUES ($1, $2, $3, 'refund', 1999, 'USD', 'Processing', 'Captured', now(), now(), now() - $4::interval)`,
        [vid, merchantId, t.id, age],
      );
      return { t, vid };
    };
    // The broken one is the oldest: every batch claims it first.
    const stuck = await refundOf('10 days');
    const other = await refundOf('1 minute');
    broken = stuck.vid;
    try {
      const summary = await batch.runBatch();
      expect(summary.completed).toBeGreaterThanOrEqual(1);
      expect((await state(other.t.id)).refunds).toEqual([{ kind: 'refund', status: 'Completed' }]);
      expect((await state(stuck.t.id)).refunds).toEqual([{ kind: 'refund', status: 'Processing' }]);
    } finally {
      broken = null;
    }
  });

  it('the safety net turns an open stop into a refund of what is left, never more than was captured', async () => {
    const merchantId = await insertMerchantRow(db);
    // Captured 50.00, refunded 50.00 already; a 20.00 stop is still open.
    const t = await insertTransactionRow(db, merchantId, {
      status: 'Refunded',
      capturedMinor: '5000',
      amountMinor: '5000',
      stopRequested: true,
    });
    await insertRefundRow(db, t, 'refund', '5000', 'Completed');
    await insertRefundRow(db, t, 'stop', '2000');
    await batch.runBatch();
    const [{ refunded }] = await db.query(
      `SELECT COALESCE(sum(amount_minor), 0)::int AS refunded FROM refunds
        WHERE transaction_id = $1 AND kind = 'refund' AND status <> 'Failed'`,
      [t.id],
    );
    expect(refunded).toBeLessThanOrEqual(5000);
  });

  it('a stop left open on a Settled transaction, whose refund then fails, returns it to Settled (not Captured)', async () => {
    const merchantId = await insertMerchantRow(db);
    // Captured 50.00 and settled since; a 20.13 stop is still open: it becomes a refund the sandbox rejects.
    const t = await insertTransactionRow(db, merchantId, {
      status: 'Settled',
      capturedMinor: '5000',
      amountMinor: '5000',
    });
    await insertRefundRow(db, t, 'stop', '2013');
    await batch.runBatch();
    await batch.runBatch();
    expect({
      ...(await state(t.id)),
      pushes: await db.query(
        `SELECT event_name, body->'content'->>'status' AS status FROM webhook_messages
          WHERE transaction_id = $1 ORDER BY id`,
        [t.id],
      ),
    }).toEqual({
      status: 'Settled',
      refunds: [{ kind: 'refund', status: 'Failed' }],
      pushes: expect.arrayContaining([{ event_name: 'refund failed', status: 'Settled' }]),
    });
  });

  it('a stop left open on a transaction refunded in full since: its refund of nothing is Failed with a refund failed push, the transaction stays Refunded', async () => {
    const merchantId = await insertMerchantRow(db);
    // Captured 50.00, refunded 50.00 already; a 20.00 stop is still open: nothing left to refund.
    const t = await insertTransactionRow(db, merchantId, {
      status: 'Refunded',
      capturedMinor: '5000',
      amountMinor: '5000',
    });
    await insertRefundRow(db, t, 'refund', '5000', 'Completed');
    await insertRefundRow(db, t, 'stop', '2000');
    await batch.runBatch();
    // Expected (decisions §8): the refund ends Failed with its one `refund failed` push, and the transaction
    // settles as after any failed refund (nothing in flight: Refunded), never Refund Requested for nothing.
    expect({
      ...(await state(t.id)),
      pushes: await db.query(`SELECT event_name FROM webhook_messages WHERE transaction_id = $1`, [t.id]),
    }).toEqual({
      status: 'Refunded',
      refunds: expect.arrayContaining([
        { kind: 'refund', status: 'Completed' },
        { kind: 'refund', status: 'Failed' },
      ]),
      pushes: [{ event_name: 'refund failed' }],
    });
  });

  it('completed refunds whose reads go unanswered are read once per batch: a processor that hangs never holds the batch', async () => {
    const merchantId = await insertMerchantRow(db);
    const watched: string[] = [];
    for (let i = 0; i < 3; i++) {
      const t = await insertTransactionRow(db, merchantId, { status: 'Refunded', capturedMinor: '1999' });
      const id = await insertRefundRow(db, t, 'refund', '1999', 'Completed');
      // A completed refund the processor may still fail, due to be read again.
      await db.query(
        `UPDATE refunds SET processor_refund_id = $2, recheck_after = now() - interval '1 minute',
                recheck_until = now() + interval '30 days' WHERE id = $1`,
        [id, `re_${newVid()}`],
      );
      watched.push(id);
    }
    const reads = new Map<string, number>();
    let total = 0;
    onRead = async (processorRefundId) => {
      reads.set(processorRefundId, (reads.get(processorRefundId) ?? 0) + 1);
      // Each unanswered read lasts the processor's timeout (30 s): a minute later, the reads put a minute
      // on are due again. Bounded, so that the batch ends whatever it does.
      if (++total < 30)
        await db.query(
          `UPDATE refunds SET recheck_after = now() WHERE id = ANY($1::uuid[]) AND recheck_after IS NOT NULL`,
          [watched],
        );
    };
    try {
      await batch.runBatch();
    } finally {
      onRead = null;
    }
    // One read each; the next batch reads them again. Still Completed and still watched.
    expect([...reads.values()]).toEqual([1, 1, 1]);
    const rows = await db.query(
      `SELECT status, recheck_after IS NOT NULL AS watched FROM refunds WHERE id = ANY($1::uuid[])`,
      [watched],
    );
    expect(rows).toEqual(Array.from({ length: 3 }, () => ({ status: 'Completed', watched: true })));
  });
});
