import { type TestingModule } from '@nestjs/testing';
import { loadConfig, type RetainConfig } from '@retain/config';
import { Test } from '@nestjs/testing';
import { RefundsRepository } from '@retain/db';
import { RETAIN_CONFIG, RetainMetrics } from '@retain/platform';
import {
  PgSandboxLedger,
  ProcessorUnavailableError,
  SandboxProcessor,
  TRANSACTION_PROCESSORS,
  fixedProcessor,
  type ChargeRequest,
  type ChargeResult,
  type RefundRequest,
} from '@retain/processor';
import { OutboxRelay, QueueRegistry, createRedis } from '@retain/queues';
import { AttemptState, applyRefundAnswer } from '@retain/recovery';
import {
  closeTestDb,
  insertAttemptRow,
  insertMerchantRow,
  insertTransactionRow,
  setSandboxCharge,
  testDb,
} from '@retain/testing';
import type { Redis } from 'ioredis';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AttemptService } from '../src/attempts/attempt.service';
import { attemptTestingModule } from './attempt-testing-module';
import { TickProcessor } from '../src/scheduler/tick.processor';
// The refund batcher sends again what the worker's own send of a late capture's refund left unanswered.
// eslint-disable-next-line @nx/enforce-module-boundaries -- a test of the two apps' hand-over on one database
import { RefundBatchService } from '../../refund-batcher/src/batch/refund-batch.service';
// The merchant's stop arrives through the refunds API's own service while a charge is out.
// eslint-disable-next-line @nx/enforce-module-boundaries -- a test of the two apps' hand-over on one database
import { RefundRequestService } from '../../intake-api/src/refunds/refund-request.service';

/** The app's own processor: the sandbox, whose lookups get the original request (as the app calls them). */
// Money found twice or charged after a stop (the money-flow audit of the fifteenth session), with the
// app's sandbox processor (its lookups replay a charge when given the original request, as Stripe's and
// Adyen's do) on the real Postgres.
describe('late captures and stops: never a charge unaccounted for', () => {
  let mod: TestingModule;
  let db: DataSource;
  let redis: Redis;
  let queues: QueueRegistry;
  let attempts: AttemptService;
  let tick: TickProcessor;
  let merchantId: string;
  let batch: RefundBatchService;
  let batchModule: TestingModule;
  const config: RetainConfig = { ...loadConfig('retry-worker'), retryTimeScale: 1 };
  /** Every refund request the processor received, and the charges whose next refund goes unanswered. */
  const refundsSent: RefundRequest[] = [];
  const unanswered = new Set<string>();
  /** Runs inside the next charge call, which then answers a timeout: the request never arrived. */
  let duringNextCharge: (() => Promise<void>) | null = null;
  /** Runs after the next charge was made, before its answer returns (the charge is in flight meanwhile). */
  let afterNextCharge: (() => Promise<void>) | null = null;
  let stops: RefundRequestService;
  /**
   * Keys whose replays (a lookup with the original request) reach the processor and charge but whose
   * answer is lost (a timeout), and when each was last replayed: a lookup by key only finds such a
   * charge only SEARCH_LAG_MS after it (Stripe's search is eventually consistent, about a minute).
   */
  const lostReplays = new Map<string, number>();
  const SEARCH_LAG_MS = 60_000;

  beforeAll(async () => {
    db = await testDb();
    redis = createRedis(config.redisUrl);
    queues = new QueueRegistry(redis, config.queuePrefix);
    const sandbox = new SandboxProcessor(new PgSandboxLedger(db));
    const processor = Object.assign(Object.create(sandbox) as SandboxProcessor, {
      charge: async (req: ChargeRequest): Promise<ChargeResult> => {
        const after = afterNextCharge;
        if (after) {
          afterNextCharge = null;
          const answer = await sandbox.charge(req);
          await after();
          return answer;
        }
        const during = duringNextCharge;
        if (!during) return sandbox.charge(req);
        duringNextCharge = null;
        await during();
        return { outcome: 'error', message: 'timeout: the request never reached the processor' };
      },
      lookupCharge: async (key: string, original?: ChargeRequest): Promise<ChargeResult | null> => {
        if (!lostReplays.has(key)) return sandbox.lookupCharge(key, original);
        if (original) {
          await sandbox.charge(original);
          lostReplays.set(key, Date.now());
          return { outcome: 'error', message: 'timeout: the replay got no answer' };
        }
        return Date.now() - lostReplays.get(key)! < SEARCH_LAG_MS ? null : sandbox.lookupCharge(key);
      },
      refund: async (req: RefundRequest) => {
        refundsSent.push(req);
        if (unanswered.delete(req.processorTransactionId)) throw new ProcessorUnavailableError('HTTP 503');
        return sandbox.refund(req);
      },
    });
    mod = await attemptTestingModule(db, queues, config, processor);
    attempts = mod.get(AttemptService);
    tick = mod.get(TickProcessor);
    batchModule = await Test.createTestingModule({
      providers: [
        RefundBatchService,
        { provide: DataSource, useValue: db },
        { provide: RetainMetrics, useValue: new RetainMetrics('refund-batcher') },
        { provide: RETAIN_CONFIG, useValue: loadConfig('refund-batcher') },
        { provide: OutboxRelay, useValue: new OutboxRelay(db, queues) },
        { provide: TRANSACTION_PROCESSORS, useValue: fixedProcessor(processor) },
      ],
    }).compile();
    batch = batchModule.get(RefundBatchService);
    stops = new RefundRequestService(db, new RefundsRepository(db), new OutboxRelay(db, queues));
    merchantId = await insertMerchantRow(db);
  });
  afterAll(async () => {
    await mod?.close();
    await batchModule?.close();
    await queues?.close();
    redis?.disconnect();
    await closeTestDb();
  });

  const txnRow = async (id: string) =>
    (await db.query(`SELECT status, captured_amount_minor, next_attempt_at FROM transactions WHERE id = $1`, [id]))[0];
  const attemptRows = async (txnId: string) =>
    db.query(`SELECT id, state, status FROM attempts WHERE transaction_id = $1 ORDER BY retry_number`, [
      txnId,
    ]) as Promise<any[]>;
  const refundRows = async (txnId: string) =>
    db.query(`SELECT kind, status, amount_minor FROM refunds WHERE transaction_id = $1 ORDER BY created_at`, [
      txnId,
    ]) as Promise<any[]>;
  const ledger = async (vid: string) =>
    (
      await db.query(`SELECT result->>'outcome' AS outcome FROM sandbox_operations WHERE idempotency_key = $1`, [vid])
    )[0]?.outcome ?? null;

  it('a stop after the in-flight mark, before the charge was sent: unknown, never charged after the stop', async () => {
    // The earlier run marked the attempt in flight and died before calling the processor (nothing in the ledger).
    const t = await insertTransactionRow(db, merchantId, { stopRequested: true });
    const a = await insertAttemptRow(db, t, { preparedAt: new Date() });
    expect(await ledger(a.vid)).toBeNull();
    const result = await attempts.run(a.id);
    // Expected (README "Attempt states", prepare's comment): unknown, no charge made after the stop.
    expect({ result, charged: await ledger(a.vid), attempts: await attemptRows(t.id) }).toMatchObject({
      result: 'unknown',
      charged: null,
      attempts: [{ state: 'unknown' }],
    });
  });

  it('a stop that lands while a charge times out: the lookup after the timeout is by key only, never a charge', async () => {
    const t = await insertTransactionRow(db, merchantId); // 4111111111111111: approved
    const a = await insertAttemptRow(db, t);
    // The merchant stops the transaction while the charge is out; the charge then answers a timeout.
    duringNextCharge = async () => {
      const r = await stops.request(
        { id: merchantId, merchantVid: 'v', login: 'l' },
        { refunds: [{ id: t.merchantTxnId }] },
        false,
      );
      expect(r.status).toBe(200);
      expect((await txnRow(t.id)).status).toBe('Stop Requested');
    };
    const result = await attempts.run(a.id);
    // Expected (README "Attempt states"): after a stop an attempt is looked up by its key only, never
    // replayed with its request (that would make the charge now): no charge, the attempt unknown.
    expect({ result, charged: await ledger(a.vid), attempts: await attemptRows(t.id) }).toMatchObject({
      result: 'unknown',
      charged: null,
      attempts: [{ state: 'unknown' }],
    });
    expect(await txnRow(t.id)).toMatchObject({ status: 'Stop Requested' });
  });

  // Past the processor's idempotency window (24 h: Stripe prunes keys then) a replay under the key makes a
  // NEW charge: an attempt prepared that long ago is looked up by its key only, as after a stop.
  it('an unknown attempt prepared 25 h ago is looked up by key only: never replayed, nothing charged', async () => {
    const t = await insertTransactionRow(db, merchantId); // 4111111111111111: a replay would be approved
    const a = await insertAttemptRow(db, t, {
      state: 'unknown',
      preparedAt: new Date(Date.now() - 25 * 3_600_000),
      responseCode: '96',
      authCodeDescription: 'Soft Failure',
    });
    await tick.process();
    // Nothing under the key (the request never arrived): not charged, the schedule goes on.
    expect({ charged: await ledger(a.vid), attempts: await attemptRows(t.id) }).toMatchObject({
      charged: null,
      attempts: [{ state: 'error' }],
    });
    expect(await txnRow(t.id)).toMatchObject({ status: 'In Retry', captured_amount_minor: null });
  });

  it('a prepared attempt whose job runs again 25 h later is not sent again: unknown, nothing charged', async () => {
    const t = await insertTransactionRow(db, merchantId);
    const a = await insertAttemptRow(db, t, { preparedAt: new Date(Date.now() - 25 * 3_600_000) });
    const result = await attempts.run(a.id);
    expect({ result, charged: await ledger(a.vid), attempts: await attemptRows(t.id) }).toMatchObject({
      result: 'unknown',
      charged: null,
      attempts: [{ state: 'unknown' }],
    });
  });

  it("a key-only lookup right after a replay is not taken for 'not charged': the not-found timer runs from the last send", async () => {
    const t = await insertTransactionRow(db, merchantId);
    // Unknown for an hour (past RECONCILE_NOT_FOUND_AFTER since its in-flight mark).
    const a = await insertAttemptRow(db, t, {
      state: 'unknown',
      preparedAt: new Date(Date.now() - 3_600_000),
      responseCode: '96',
      authCodeDescription: 'Soft Failure',
    });
    lostReplays.set(a.vid, 0);
    // The reconciliation replays it: the processor charges, the answer is lost.
    await tick.process();
    expect(await ledger(a.vid)).toBe('approved');
    const r = await stops.request(
      { id: merchantId, merchantVid: 'v', login: 'l' },
      { refunds: [{ id: t.merchantTxnId }] },
      false,
    );
    expect(r.status).toBe(200);
    // The next lookup is by key only (the stop) and the search does not show the charge yet.
    await db.query(`UPDATE attempts SET lookup_after = now() WHERE id = $1`, [a.id]);
    await tick.process();
    // Expected: still unknown, the stop waits (never closed "nothing charged" over the charge just made).
    expect({ attempts: await attemptRows(t.id), txn: (await txnRow(t.id)).status }).toMatchObject({
      attempts: [{ state: 'unknown' }],
      txn: 'Stop Requested',
    });
    // Once the search shows it: the capture is recorded and the stop becomes its refund.
    lostReplays.set(a.vid, Date.now() - SEARCH_LAG_MS);
    await db.query(`UPDATE attempts SET lookup_after = now() WHERE id = $1`, [a.id]);
    await tick.process();
    expect({ attempts: await attemptRows(t.id), refunds: await refundRows(t.id) }).toMatchObject({
      attempts: [{ state: 'captured' }],
      refunds: [{ kind: 'refund', status: 'Processing' }],
    });
    expect((await txnRow(t.id)).status).toBe('Refund Requested');
  });

  /**
   * Attempt 1 of `t`: the processor answered a timeout, and the reconciliation settled it "not charged" an
   * hour ago (nothing at the processor under its key, for now).
   */
  const settledNotCharged = async (t: Awaited<ReturnType<typeof insertTransactionRow>>) => {
    const first = await insertAttemptRow(db, t, {
      state: 'error',
      preparedAt: new Date(Date.now() - 2 * 3_600_000),
      processedAt: new Date(Date.now() - 3_600_000),
      responseCode: '96',
      authCodeDescription: 'Soft Failure',
    });
    await setSandboxCharge(db, first.vid, { outcome: 'error' });
    return first;
  };

  /** Adyen's AUTHORISATION success=true for an attempt settled as not charged, recorded as ProcessorNotificationService does. */
  const notifiedCapture = (attemptId: string, psp: string) =>
    db.transaction((m) =>
      attempts.record(
        m,
        attemptId,
        {
          outcome: 'approved',
          responseCode: '00',
          processorTransactionId: psp,
          message: 'Authorised (Adyen notification)',
        },
        AttemptState.Error,
      ),
    );

  it('an attempt settled as not charged that captures late after the next attempt captured: recorded and refunded', async () => {
    const t = await insertTransactionRow(db, merchantId); // 4111111111111111: approved
    const first = await settledNotCharged(t);
    // Attempt 2: looks attempt 1 up first (nothing), then charges: Captured.
    const second = await insertAttemptRow(db, t, { retryNumber: 2 });
    expect(await attempts.run(second.id)).toBe('approved');
    expect((await txnRow(t.id)).status).toBe('Captured');
    // The processor finishes attempt 1 late (within its 24 h window): a second capture of the customer.
    await setSandboxCharge(db, first.vid, { outcome: 'approved', processorTransactionId: 'sbx_late_first' });
    await tick.process();
    await tick.process();
    const rows = await attemptRows(t.id);
    // Expected: attempt 1 recorded Captured and a refund of it made (as after Cancelled/Stopped).
    expect({ first: rows[0].state, refunds: await refundRows(t.id) }).toMatchObject({
      first: 'captured',
      refunds: [{ kind: 'refund', status: 'Completed', amount_minor: '1999' }],
    });
    // Both charges counted, the second returned: the merchant keeps its one capture.
    expect(await txnRow(t.id)).toMatchObject({ status: 'Partially Refunded', captured_amount_minor: '3998' });
  });

  it('a late capture a processor notification reports while the next attempt waits: that attempt never charges', async () => {
    const t = await insertTransactionRow(db, merchantId); // 4111111111111111: approved
    const first = await settledNotCharged(t);
    // The tick made attempt 2 (never prepared: its job is queued).
    const second = await insertAttemptRow(db, t, { retryNumber: 2 });
    // Adyen's AUTHORISATION success=true for attempt 1 arrives.
    await notifiedCapture(first.id, 'psp_late_first');
    expect((await txnRow(t.id)).status).toBe('Captured');
    // Attempt 2's job runs: the recovery has ended, so nothing is charged and the attempt is gone.
    await attempts.run(second.id);
    expect({ charged: await ledger(second.vid), attempts: await attemptRows(t.id) }).toEqual({
      charged: null,
      attempts: [expect.objectContaining({ id: first.id, state: 'captured' })],
    });
    expect(await txnRow(t.id)).toMatchObject({ status: 'Captured', captured_amount_minor: '1999' });
    expect(await refundRows(t.id)).toEqual([]);
  });

  it('a late capture reported while the next attempt was marked in flight but never sent: that attempt is never sent', async () => {
    const t = await insertTransactionRow(db, merchantId); // 4111111111111111: approved
    const first = await settledNotCharged(t);
    // Attempt 2 was marked in flight; its worker died before the request left (nothing at the processor).
    const second = await insertAttemptRow(db, t, { retryNumber: 2, preparedAt: new Date() });
    await notifiedCapture(first.id, 'psp_late_first_2');
    expect((await txnRow(t.id)).status).toBe('Captured');
    // Its job runs again: the recovery has ended, so the request is looked up by key only, never sent.
    await attempts.run(second.id);
    expect({ charged: await ledger(second.vid), refunds: await refundRows(t.id) }).toEqual({
      charged: null,
      refunds: [],
    });
    expect((await attemptRows(t.id)).map((a) => a.state)).toEqual(['captured', 'unknown']);
    expect(await txnRow(t.id)).toMatchObject({ status: 'Captured', captured_amount_minor: '1999' });
  });

  it('two attempts settled as not charged of a Cancelled transaction that both capture late: both recorded and refunded', async () => {
    const t = await insertTransactionRow(db, merchantId, { status: 'Cancelled' });
    const errored = (n: number) =>
      insertAttemptRow(db, t, {
        retryNumber: n,
        state: 'error',
        preparedAt: new Date(Date.now() - (3 - n) * 3_600_000 - 60_000),
        processedAt: new Date(Date.now() - (3 - n) * 3_600_000),
        responseCode: '96',
        authCodeDescription: 'Soft Failure',
      });
    const a1 = await errored(1);
    const a2 = await errored(2);
    await setSandboxCharge(db, a1.vid, { outcome: 'approved', processorTransactionId: 'sbx_late_1' });
    await setSandboxCharge(db, a2.vid, { outcome: 'approved', processorTransactionId: 'sbx_late_2' });
    await tick.process();
    await tick.process();
    // Expected: both captures recorded, both refunded (2 x 19.99).
    expect({
      attempts: (await attemptRows(t.id)).map((r) => r.state),
      refunds: await refundRows(t.id),
      txn: await txnRow(t.id),
    }).toMatchObject({
      attempts: ['captured', 'captured'],
      refunds: [
        { kind: 'refund', status: 'Completed' },
        { kind: 'refund', status: 'Completed' },
      ],
      txn: { status: 'Refunded', captured_amount_minor: '3998' },
    });
  });

  it('the earlier attempt captures late while the next is in flight, and the next captures too: its refund goes at once', async () => {
    const t = await insertTransactionRow(db, merchantId);
    const first = await settledNotCharged(t);
    const second = await insertAttemptRow(db, t, { retryNumber: 2 });
    // While attempt 2's charge is out, a processor notification (Adyen's AUTHORISATION) reports attempt 1
    // captured after all: recorded as the notification path records it, the transaction Captured.
    afterNextCharge = async () => {
      const { outbox } = await db.transaction((m) =>
        attempts.record(
          m,
          first.id,
          {
            outcome: 'approved',
            responseCode: '00',
            processorTransactionId: 'sbx_late_in_flight',
            message: 'Approved',
          },
          AttemptState.Error,
        ),
      );
      expect({ outbox: outbox.length, status: (await txnRow(t.id)).status }).toEqual({ outbox: 1, status: 'Captured' });
    };
    expect(await attempts.run(second.id)).toBe('approved');
    // Attempt 2 charged the customer a second time: refunded at once, as any second capture, not a day later.
    expect({ txn: await txnRow(t.id), refunds: await refundRows(t.id) }).toMatchObject({
      txn: { status: 'Partially Refunded', captured_amount_minor: '3998' },
      refunds: [{ kind: 'refund', status: 'Completed', amount_minor: '1999' }],
    });
  });

  it("a second capture's refund left unanswered is sent again by the refund batcher for that capture, not the merchant's", async () => {
    const t = await insertTransactionRow(db, merchantId);
    const first = await settledNotCharged(t);
    const second = await insertAttemptRow(db, t, { retryNumber: 2 });
    expect(await attempts.run(second.id)).toBe('approved');
    const [kept] = await db.query(`SELECT processor_transaction_id FROM transactions WHERE id = $1`, [t.id]);
    await setSandboxCharge(db, first.vid, { outcome: 'approved', processorTransactionId: 'sbx_late_unanswered' });
    // The worker's own send of the late capture's refund gets no answer: left Processing for the batcher.
    unanswered.add('sbx_late_unanswered');
    await tick.process();
    await tick.process();
    expect(await refundRows(t.id)).toMatchObject([{ kind: 'refund', status: 'Processing', amount_minor: '1999' }]);
    await db.query(`UPDATE refunds SET sent_at = now() - interval '1 minute' WHERE transaction_id = $1`, [t.id]);
    await batch.runBatch();
    // Expected: both sends refund the late capture (same key); the merchant's own capture is never refunded.
    // (The batch also sends the refunds other tests left open, on the same database: only this one's count.)
    const ours = new Set(
      ((await db.query(`SELECT vid FROM refunds WHERE transaction_id = $1`, [t.id])) as { vid: string }[]).map(
        (r) => r.vid,
      ),
    );
    const sent = refundsSent.filter((r) => ours.has(r.idempotencyKey));
    expect(sent.map((r) => r.processorTransactionId)).toEqual(['sbx_late_unanswered', 'sbx_late_unanswered']);
    expect(sent[0]!.idempotencyKey).toBe(sent[1]!.idempotencyKey);
    expect(kept.processor_transaction_id).not.toBe('sbx_late_unanswered');
    expect(await refundRows(t.id)).toMatchObject([{ kind: 'refund', status: 'Completed', amount_minor: '1999' }]);
    expect(await txnRow(t.id)).toMatchObject({ status: 'Partially Refunded', captured_amount_minor: '3998' });
  });

  it("a second capture while the merchant's refund is Processing: both refunds failing put the transaction back to Captured", async () => {
    const t = await insertTransactionRow(db, merchantId);
    const first = await settledNotCharged(t);
    const second = await insertAttemptRow(db, t, { retryNumber: 2 });
    expect(await attempts.run(second.id)).toBe('approved');
    // The merchant refunds it (Processing, for the next batch): Refund Requested.
    const r = await stops.request(
      { id: merchantId, merchantVid: 'v', login: 'l' },
      { refunds: [{ id: t.merchantTxnId }] },
      false,
    );
    expect(r.status).toBe(200);
    expect((await txnRow(t.id)).status).toBe('Refund Requested');
    const [merchants] = await db.query(`SELECT id FROM refunds WHERE transaction_id = $1`, [t.id]);
    // The late-capture watch finds attempt 1 captured after all: its refund is written (not sent here).
    const recorded = await db.transaction((m) =>
      attempts.record(
        m,
        first.id,
        {
          outcome: 'approved',
          responseCode: '00',
          processorTransactionId: 'sbx_late_while_refunding',
          message: 'Approved',
        },
        AttemptState.Error,
      ),
    );
    expect(recorded.lateRefund).not.toBeNull();
    const failed = { outcome: 'failed' as const, processorRefundId: null, message: 'Refund rejected by the processor' };
    // The merchant's refund fails first (the late one is still Processing), then the late one.
    expect((await db.transaction((m) => applyRefundAnswer(m, merchants.id, failed)))?.outcome).toBe('failed');
    expect((await txnRow(t.id)).status).toBe('Refund Requested');
    expect((await db.transaction((m) => applyRefundAnswer(m, recorded.lateRefund!.refundId, failed)))?.outcome).toBe(
      'failed',
    );
    // Expected (decisions §8: back to its previous status on failure): nothing in flight, nothing refunded.
    expect({ txn: await txnRow(t.id), refunds: await refundRows(t.id) }).toMatchObject({
      txn: { status: 'Captured', captured_amount_minor: '3998' },
      refunds: [
        { kind: 'refund', status: 'Failed' },
        { kind: 'refund', status: 'Failed' },
      ],
    });
  });
});
