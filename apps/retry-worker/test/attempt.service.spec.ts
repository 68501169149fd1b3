import { randomUUID } from 'node:crypto';
import { type TestingModule } from '@nestjs/testing';
import { loadConfig, type RetainConfig } from '@retain/config';
import { TransactionsRepository, cardLockKey } from '@retain/db';
import { POLICY_VERSION } from '@retain/domain';
import { RetainMetrics, isUnavailable } from '@retain/platform';
import {
  PgSandboxLedger,
  SandboxProcessor,
  type ChargeRequest,
  type PaymentProcessor,
  type RefundRequest,
} from '@retain/processor';
import { ATTEMPTS_PER_JOB, QueueRegistry, createRedis } from '@retain/queues';
import {
  closeTestDb,
  insertAttemptRow,
  insertMerchantRow,
  insertTransactionRow,
  setSandboxCharge,
  testDb,
  waitFor,
} from '@retain/testing';
import { UnrecoverableError } from 'bullmq';
import type { Redis } from 'ioredis';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { nextPaymentMethod, rememberPaymentMethod } from '@retain/recovery';
import { AttemptService } from '../src/attempts/attempt.service';
import { attemptTestingModule } from './attempt-testing-module';
import { AttemptSchedulerService } from '../src/scheduler/attempt-scheduler.service';
import { TickProcessor } from '../src/scheduler/tick.processor';

/** The sandbox on Postgres, whose lookups can be made to fail (the processor unreachable). */
class ControllableProcessor implements PaymentProcessor {
  failLookups = false;
  /** Lookups answer like a real adapter whose lookup or replay met a wire failure (timeout, 5xx). */
  lookupsTimeOut = false;
  /** The next charge answers 429 with this Retry-After (ms). */
  rateLimitNext: number | null = null;
  constructor(private readonly inner: SandboxProcessor) {}
  get name() {
    return this.inner.name;
  }
  get limits() {
    return this.inner.limits;
  }
  /** Idempotency keys whose next charge throws (a connection reset): the job fails and is retried. */
  throwOnce = new Set<string>();
  charge(req: ChargeRequest) {
    if (this.throwOnce.delete(req.idempotencyKey)) return Promise.reject(new Error('socket hang up'));
    const retryAfterMs = this.rateLimitNext;
    if (retryAfterMs !== null) {
      this.rateLimitNext = null;
      return Promise.resolve({ outcome: 'error' as const, message: 'HTTP 429', retryAfterMs });
    }
    return this.inner.charge(req);
  }
  async lookupCharge(key: string) {
    if (this.failLookups) throw new Error('processor unreachable');
    if (this.lookupsTimeOut) return { outcome: 'error' as const, message: 'Stripe unreachable or timed out' };
    return this.inner.lookupCharge(key);
  }
  refund(req: RefundRequest) {
    return this.inner.refund(req);
  }
  detokenize(token: string) {
    return this.inner.detokenize(token);
  }
}

/**
 * Service-level tests of one attempt's prepare and record steps and of the reconciliation, on the
 * real Postgres with the sandbox processor (its Postgres ledger scripts what a key answers). No app
 * process and no BullMQ worker: each test calls the service and reads the rows it left.
 */
describe('attempt service: every branch of prepare and record', () => {
  let mod: TestingModule;
  let db: DataSource;
  let redis: Redis;
  let queues: QueueRegistry;
  let attempts: AttemptService;
  let tick: TickProcessor;
  let merchantId: string;
  let processor: ControllableProcessor;
  let metrics: RetainMetrics;
  const config: RetainConfig = { ...loadConfig('retry-worker'), retryTimeScale: 1 };

  beforeAll(async () => {
    db = await testDb();
    redis = createRedis(config.redisUrl);
    queues = new QueueRegistry(redis, config.queuePrefix);
    processor = new ControllableProcessor(new SandboxProcessor(new PgSandboxLedger(db)));
    metrics = new RetainMetrics('retry-worker');
    mod = await attemptTestingModule(db, queues, config, processor, metrics);
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
        `SELECT status, next_attempt_at, attempt_count, captured_amount_minor, stop_requested_at FROM transactions
          WHERE id = $1`,
        [id],
      )
    )[0];
  const attemptRows = async (txnId: string) =>
    db.query(
      `SELECT id, vid, state, status, response_code, auth_code_description, prepared_at, processed_at,
              processor_transaction_id
         FROM attempts WHERE transaction_id = $1 ORDER BY retry_number`,
      [txnId],
    ) as Promise<any[]>;
  const refundRows = async (txnId: string) =>
    db.query(`SELECT kind, status, amount_minor FROM refunds WHERE transaction_id = $1 ORDER BY created_at`, [
      txnId,
    ]) as Promise<any[]>;
  /** Pushes announced for this transaction (outbox rows of the webhook-dispatch queue). */
  const pushes = async (txnId: string): Promise<string[]> =>
    (
      await db.query(
        `SELECT m.event_name FROM webhook_messages m WHERE m.transaction_id = $1 ORDER BY m.created_at, m.id`,
        [txnId],
      )
    ).map((r: { event_name: string }) => r.event_name);
  const charges = async (vid: string): Promise<number> =>
    (await db.query(`SELECT count(*)::int AS n FROM sandbox_operations WHERE idempotency_key = $1`, [vid]))[0].n;

  it('approved: Captured, captured amount, one charge, a `retry succeeded` push', async () => {
    const t = await insertTransactionRow(db, merchantId);
    const a = await insertAttemptRow(db, t);
    expect(await attempts.run(a.id)).toBe('approved');
    expect(await txnRow(t.id)).toMatchObject({ status: 'Captured', captured_amount_minor: '1999' });
    expect(await attemptRows(t.id)).toMatchObject([{ state: 'captured', status: 'Captured', response_code: '00' }]);
    expect(await charges(a.vid)).toBe(1);
    expect(await pushes(t.id)).toEqual(['retry succeeded']);
    // A second run of the same job does nothing.
    expect(await attempts.run(a.id)).toBe('nothing to do');
    expect(await pushes(t.id)).toEqual(['retry succeeded']);
  });

  it('declined, retry later: In Retry with the next attempt planned, no push', async () => {
    const t = await insertTransactionRow(db, merchantId, { card: '4000000000000077' });
    const a = await insertAttemptRow(db, t);
    expect(await attempts.run(a.id)).toBe('declined');
    const row = await txnRow(t.id);
    expect(row.status).toBe('In Retry');
    expect(row.next_attempt_at).not.toBeNull();
    expect(await attemptRows(t.id)).toMatchObject([{ state: 'declined', response_code: '51' }]);
    expect(await pushes(t.id)).toEqual([]);
  });

  it('declined for good: Cancelled with a `retry failed` push', async () => {
    const t = await insertTransactionRow(db, merchantId, { card: '4100000000000019' });
    const a = await insertAttemptRow(db, t);
    expect(await attempts.run(a.id)).toBe('declined');
    expect((await txnRow(t.id)).status).toBe('Cancelled');
    expect(await attemptRows(t.id)).toMatchObject([
      { state: 'declined', response_code: '41', auth_code_description: 'Hard Failure' },
    ]);
    expect(await pushes(t.id)).toEqual(['retry failed']);
  });

  it('stop before the attempt starts: the never-prepared attempt is dropped, Stopped, nothing charged', async () => {
    const t = await insertTransactionRow(db, merchantId, { stopRequested: true });
    const a = await insertAttemptRow(db, t);
    expect(await attempts.run(a.id)).toBe('nothing to do');
    expect(await attemptRows(t.id)).toEqual([]);
    expect((await txnRow(t.id)).status).toBe('Stopped');
    expect(await refundRows(t.id)).toMatchObject([{ kind: 'stop', status: 'Completed' }]);
    expect(await charges(a.vid)).toBe(0);
    expect(await pushes(t.id)).toEqual(['refund completed']);
  });

  /** 20 declines (Visa category 4) on a card for this merchant, `daysAgo` days ago: its 30-day budget. */
  const useUpVisaBudget = async (card: string, daysAgo: number, merchant = merchantId) => {
    const other = await insertTransactionRow(db, merchant, { card });
    const at = new Date(Date.now() - daysAgo * 86_400_000);
    for (let n = 1; n <= 20; n++)
      await insertAttemptRow(db, other, {
        retryNumber: n,
        state: 'declined',
        preparedAt: at,
        processedAt: at,
        responseCode: '05',
        authCodeDescription: 'Soft Failure',
      });
  };

  /** A 41 (lost card) on `card` at `merchant`, from another transaction: the card is blocked there for good. */
  const hardDeclined = async (merchant: string, card: string) => {
    const other = await insertTransactionRow(db, merchant, { card, status: 'Cancelled' });
    await insertAttemptRow(db, other, {
      state: 'declined',
      preparedAt: new Date(),
      processedAt: new Date(),
      responseCode: '41',
      authCodeDescription: 'Hard Failure',
    });
  };

  /**
   * A transaction on card A (payment method A) whose account also has card B saved (payment method B,
   * from an earlier captured transaction of the same account).
   */
  const twoCardAccount = async (merchant: string, cardA: string, cardB: string) => {
    const t = await insertTransactionRow(db, merchant, { card: cardA });
    const earlier = await insertTransactionRow(db, merchant, { card: cardB, status: 'Captured' });
    const [{ account_id: account }] = await db.query(`SELECT account_id FROM transactions WHERE id = $1`, [t.id]);
    await db.query(`UPDATE transactions SET account_id = $2 WHERE id = $1`, [earlier.id, account]);
    const pmA = (await db.transaction((m) => rememberPaymentMethod(m, config.cardKeys, merchant, t.id)))!;
    const pmB = (await db.transaction((m) => rememberPaymentMethod(m, config.cardKeys, merchant, earlier.id)))!;
    await db.query(`UPDATE transactions SET payment_method_ref = $2 WHERE id = $1`, [t.id, pmA]);
    return { t, account: account as string, pmA, pmB };
  };

  it('network limit, temporary: no attempt, the transaction waits until the window allows one', async () => {
    const t = await insertTransactionRow(db, merchantId, { card: '4000000000000002' });
    // The budget frees 25 days from now, inside t's recovery window (submitted a day ago: 29 days left).
    await useUpVisaBudget('4000000000000002', 5);
    const a = await insertAttemptRow(db, t);
    expect(await attempts.run(a.id)).toBe('nothing to do');
    expect(await attemptRows(t.id)).toEqual([]);
    const row = await txnRow(t.id);
    expect(row.status).toBe('In Retry');
    expect(new Date(row.next_attempt_at).getTime()).toBeGreaterThan(Date.now() + 24 * 86_400_000);
    expect(await charges(a.vid)).toBe(0);
    expect(await pushes(t.id)).toEqual([]);
  });

  it('network limit until after the recovery window: Cancelled now, never an attempt after the window', async () => {
    // Seen first in CI: the transaction waited 30 days for the card's budget and was charged after its window.
    const t = await insertTransactionRow(db, merchantId, { card: '4000000000000010' });
    // The budget frees 30 days from now; t's window ends in 29.
    await useUpVisaBudget('4000000000000010', 0);
    const a = await insertAttemptRow(db, t);
    expect(await attempts.run(a.id)).toBe('nothing to do');
    expect(await attemptRows(t.id)).toEqual([]);
    const row = await txnRow(t.id);
    expect(row.status).toBe('Cancelled');
    expect(row.next_attempt_at).toBeNull();
    expect(await charges(a.vid)).toBe(0);
    expect(await pushes(t.id)).toEqual(['retry failed']);
  });

  it('network limit, permanent: a card blocked by a hard decline is Cancelled without an attempt', async () => {
    const t = await insertTransactionRow(db, merchantId, { card: '4100000000000019' });
    await hardDeclined(merchantId, '4100000000000019');
    const a = await insertAttemptRow(db, t);
    expect(await attempts.run(a.id)).toBe('nothing to do');
    expect(await attemptRows(t.id)).toEqual([]);
    expect((await txnRow(t.id)).status).toBe('Cancelled');
    expect(await pushes(t.id)).toEqual(['retry failed']);
  });

  it('an expired card no updater reaches is never sent (UTC schedule): Cancelled, no charge', async () => {
    const merchantId = await insertMerchantRow(db);
    const t = await insertTransactionRow(db, merchantId, { card: '4111111111111111' });
    await db.query(`UPDATE transactions SET expiration_date = '202501' WHERE id = $1`, [t.id]);
    await db.transaction((m) => rememberPaymentMethod(m, config.cardKeys, merchantId, t.id));
    const a = await insertAttemptRow(db, t);
    expect(await attempts.run(a.id)).toBe('nothing to do');
    expect(await charges(a.vid)).toBe(0);
    expect((await txnRow(t.id)).status).toBe('Cancelled');
    expect(await pushes(t.id)).toEqual(['retry failed']);
  });

  it('an expired card no updater reaches gives way to the account’s other card, which is charged', async () => {
    const merchantId = await insertMerchantRow(db);
    const { t, pmB } = await twoCardAccount(merchantId, '4111111111111111', '4000000000000036');
    await db.query(`UPDATE payment_methods SET expiration_date = '202501' WHERE id <> $1 AND merchant_id = $2`, [
      pmB,
      merchantId,
    ]);
    await db.query(`UPDATE transactions SET expiration_date = '202501' WHERE id = $1`, [t.id]);
    const a = await insertAttemptRow(db, t);
    expect(await attempts.run(a.id)).toBe('approved');
    const [row] = await db.query(`SELECT status, payment_method_ref FROM transactions WHERE id = $1`, [t.id]);
    expect(row).toEqual({ status: 'Captured', payment_method_ref: pmB });
  });

  it('the account’s other payment method, a token the transaction’s processor cannot charge, is no alternative: Cancelled, never sent', async () => {
    // decisions §13, §15: card B was remembered under another division's Stripe account (a saved method);
    // this transaction's processor (the sandbox) would decline it 14, a hard decline ending it for the account.
    const merchantId = await insertMerchantRow(db);
    const { t, pmA, pmB } = await twoCardAccount(merchantId, '4100000000000019', '4111111111111111');
    await hardDeclined(merchantId, '4100000000000019');
    await db.query(
      `UPDATE payment_methods SET card_kind = 'token', is_tokenized = true, card_enc = NULL, card_key_id = NULL,
          pm_id = 'cus_A|pm_1', payment_method = jsonb_set(payment_method, '{id}', '"cus_A|pm_1"')
        WHERE id = $1`,
      [pmB],
    );
    const a = await insertAttemptRow(db, t);
    expect(await attempts.run(a.id)).toBe('nothing to do');
    const [row] = await db.query(`SELECT status, payment_method_ref FROM transactions WHERE id = $1`, [t.id]);
    expect(row).toEqual({ status: 'Cancelled', payment_method_ref: pmA });
    expect(await charges(a.vid)).toBe(0);
    expect(await pushes(t.id)).toEqual(['retry failed']);
    const [b] = await db.query(`SELECT ended_at FROM payment_methods WHERE id = $1`, [pmB]);
    expect(b.ended_at).toBeNull();
  });

  it('a 1A ends the card for the account: the same card under the account’s other payment method id is not charged', async () => {
    const merchantId = await insertMerchantRow(db);
    const { t, pmA, pmB } = await twoCardAccount(merchantId, '5555555555554444', '5555555555554444');
    expect(pmA).not.toBe(pmB);
    // A Mastercard: its 1A is no Visa category-3 block in the card's history, nothing there holds the card.
    await db.query(`UPDATE transactions SET card_network = 'mastercard' WHERE merchant_id = $1`, [merchantId]);
    await db.query(`UPDATE payment_methods SET card_network = 'mastercard' WHERE merchant_id = $1`, [merchantId]);
    const a = await insertAttemptRow(db, t);
    await setSandboxCharge(db, a.vid, { outcome: 'declined', responseCode: '1A' });
    expect(await attempts.run(a.id)).toBe('declined');
    const [row] = await db.query(`SELECT status, next_attempt_at, payment_method_ref FROM transactions WHERE id = $1`, [
      t.id,
    ]);
    expect(row).toMatchObject({ status: 'Cancelled', next_attempt_at: null, payment_method_ref: pmA });
    expect(await pushes(t.id)).toEqual(['retry failed']);
    const ended = await db.query(`SELECT id FROM payment_methods WHERE id = ANY($1) AND ended_at IS NOT NULL`, [
      [pmA, pmB],
    ]);
    expect(ended.map((r: { id: string }) => r.id).sort()).toEqual([pmA, pmB].sort());
  });

  /** t's attempt runs: nothing charged, card B adopted, the transaction waits for it (over 24 days). */
  const expectWaitsForOtherCard = async (t: { id: string; merchantId: string }, pmB: string) => {
    const a = await insertAttemptRow(db, t);
    expect(await attempts.run(a.id)).toBe('nothing to do');
    const [row] = await db.query(`SELECT status, next_attempt_at, payment_method_ref FROM transactions WHERE id = $1`, [
      t.id,
    ]);
    expect({ status: row.status, pm: row.payment_method_ref }).toEqual({ status: 'In Retry', pm: pmB });
    expect(new Date(row.next_attempt_at).getTime()).toBeGreaterThan(Date.now() + 24 * 86_400_000);
    expect(await charges(a.vid)).toBe(0);
  };

  it('a card blocked for good gives way to the account’s other card allowed only later: adopted, the transaction waits for it', async () => {
    const { t, pmB } = await twoCardAccount(merchantId, '4100000000000019', '4000000000000036');
    // Card A: a 41 on it (never again). Card B: its Visa budget used up, free again in 25 days (t's window: 29).
    await hardDeclined(merchantId, '4100000000000019');
    await useUpVisaBudget('4000000000000036', 5);
    await expectWaitsForOtherCard(t, pmB);
  });

  it('a card the network limits free only after the recovery window gives way to the account’s other card allowed later (decisions §15)', async () => {
    // "network limit exhausted for the window": the next eligible payment method. The worker's check
    // adopted another card only if allowed at once, and otherwise cancelled the transaction (the
    // network-rules audit, session 25); the review's plan already waited for it.
    const merchant = await insertMerchantRow(db);
    const { t, pmB } = await twoCardAccount(merchant, '4000000000000010', '4000000000000036');
    // Card A's Visa budget frees in 30 days, after t's window (29 days left); card B's in 25.
    await useUpVisaBudget('4000000000000010', 0, merchant);
    await useUpVisaBudget('4000000000000036', 5, merchant);
    await expectWaitsForOtherCard(t, pmB);
  });

  it('the account’s other card is charged only under its own card lock: while another limit check holds it, the attempt waits', async () => {
    const merchantId = await insertMerchantRow(db);
    const { t, pmB } = await twoCardAccount(merchantId, '4100000000000019', '4111111111111111');
    // Card A blocked for good (a 41 on it); card B allowed now.
    await hardDeclined(merchantId, '4100000000000019');
    // Another worker is checking card B's limits (another customer of this merchant with that card).
    const [{ card_hmac: hmacB }] = await db.query(`SELECT card_hmac FROM payment_methods WHERE id = $1`, [pmB]);
    const other = db.createQueryRunner();
    await other.connect();
    try {
      await other.query(`SELECT pg_advisory_lock(hashtextextended($1, 0))`, [cardLockKey(merchantId, hmacB)]);
      const a = await insertAttemptRow(db, t);
      expect(await attempts.run(a.id)).toBe('nothing to do');
      expect(await charges(a.vid)).toBe(0);
      const row = await txnRow(t.id);
      expect(row.status).toBe('In Retry');
      expect(new Date(row.next_attempt_at).getTime()).toBeLessThan(Date.now() + 60_000);
      await other.query(`SELECT pg_advisory_unlock_all()`);
      const b = await insertAttemptRow(db, t, { retryNumber: 1 });
      expect(await attempts.run(b.id)).toBe('approved');
    } finally {
      await other.release();
    }
  });

  it('an ended payment method whose account’s next card frees only after the recovery window: Cancelled, never charged after it', async () => {
    const { t, account, pmA } = await twoCardAccount(merchantId, '4000000000000085', '4000000000000093');
    // Card A's payment method ended (closed); card B's Visa budget frees in 30 days, t's window ends in 29.
    await db.query(`UPDATE payment_methods SET ended_at = now(), ended_reason = 'account closed' WHERE id = $1`, [pmA]);
    await useUpVisaBudget('4000000000000093', 0);
    // The review's fallback asks the same question: card B is a candidate only for a later window end.
    const nextBy = (days: number) =>
      db.transaction((m) =>
        nextPaymentMethod(m, {
          merchantId,
          accountId: account,
          transactionId: t.id,
          except: [pmA],
          now: new Date(),
          until: new Date(Date.now() + days * 86_400_000),
          amountMinor: 1999n,
          timeScale: 1,
          updaterOn: true,
          chargeable: async () => true,
        }),
      );
    expect(await nextBy(29)).toBeNull();
    expect((await nextBy(31))?.pm.card_last4).toBe('0093');
    const a = await insertAttemptRow(db, t);
    expect(await attempts.run(a.id)).toBe('nothing to do');
    const row = await txnRow(t.id);
    expect({ status: row.status, next: row.next_attempt_at }).toEqual({ status: 'Cancelled', next: null });
    expect(await charges(a.vid)).toBe(0);
    expect(await pushes(t.id)).toEqual(['retry failed']);
  });

  it('a card ended by a hard decline gives way to the account’s next card within the transaction’s own budget (adaptive: 18 for insufficient funds)', async () => {
    // Its own merchant: card A's history here is its own attempts only (other tests decline 41 on it).
    const merchantId = await insertMerchantRow(db);
    const { t, pmB } = await twoCardAccount(merchantId, '4100000000000019', '4000000000000101');
    await db.query(`UPDATE transactions SET policy_version = $2, auth_code = '51' WHERE id = $1`, [
      t.id,
      POLICY_VERSION,
    ]);
    // Eight attempts declined 51 (the legacy budget), then the ninth on card A answers 41: card A ends.
    const at = new Date(Date.now() - 3_600_000);
    for (let n = 1; n <= 8; n++)
      await insertAttemptRow(db, t, {
        retryNumber: n,
        state: 'declined',
        preparedAt: at,
        processedAt: at,
        responseCode: '51',
        authCodeDescription: 'Soft Failure',
      });
    const a = await insertAttemptRow(db, t, { retryNumber: 9 });
    expect(await attempts.run(a.id)).toBe('declined');
    const [row] = await db.query(`SELECT status, payment_method_ref FROM transactions WHERE id = $1`, [t.id]);
    expect({ status: row.status, pm: row.payment_method_ref }).toEqual({ status: 'In Retry', pm: pmB });
  });

  it('already charged by an earlier run (crash after the call): recorded, never charged again', async () => {
    const t = await insertTransactionRow(db, merchantId, { card: '4000000000000002' });
    const a = await insertAttemptRow(db, t, { preparedAt: new Date() });
    await setSandboxCharge(db, a.vid, { outcome: 'approved', processorTransactionId: 'sbx_earlier_run' });
    expect(await attempts.run(a.id)).toBe('approved');
    expect(await attemptRows(t.id)).toMatchObject([{ state: 'captured', processor_transaction_id: 'sbx_earlier_run' }]);
    expect((await txnRow(t.id)).status).toBe('Captured');
    expect(await charges(a.vid)).toBe(1);
  });

  // Defect 1 (issue 9): an unknown outcome was recorded as "not charged" and the schedule went on.
  it('processor error: the attempt is unknown (auth_code 96), nothing final, no next attempt until resolved', async () => {
    const t = await insertTransactionRow(db, merchantId, { card: '4000000000000119' });
    const a = await insertAttemptRow(db, t);
    expect(await attempts.run(a.id)).toBe('unknown');
    expect(await attemptRows(t.id)).toMatchObject([
      { state: 'unknown', response_code: '96', auth_code_description: 'Soft Failure' },
    ]);
    const row = await txnRow(t.id);
    expect(row.status).toBe('In Retry');
    expect(row.next_attempt_at).toBeNull();
    expect(await pushes(t.id)).toEqual([]);
    // Read through the API's view: a status of the spec's list (decisions §7: an attempt is `Captured` or
    // `Failed`; §16: a processor error shows 96, `Soft Failure`). It showed `Processing`, no Transaction status.
    const [, shown] = (await new TransactionsRepository(db).fetch(merchantId, t.merchantTxnId, true))!;
    expect(shown).toMatchObject({ status: 'Failed', auth_code: '96', auth_code_description: 'Soft Failure' });
  });

  it('processor error on the last attempt of the schedule: not Cancelled while unknown', async () => {
    const t = await insertTransactionRow(db, merchantId, { card: '4000000000000002' });
    // Attempt 30 is beyond every schedule: a declined or "not charged" result would cancel.
    const a = await insertAttemptRow(db, t, { retryNumber: 30 });
    await setSandboxCharge(db, a.vid, { outcome: 'error' });
    expect(await attempts.run(a.id)).toBe('unknown');
    expect((await txnRow(t.id)).status).toBe('In Retry');
    expect(await pushes(t.id)).toEqual([]);
  });

  it('a stop during an attempt that errors: not Stopped, the stop refund stays open while unknown', async () => {
    const t = await insertTransactionRow(db, merchantId, { card: '4000000000000119' });
    const a = await insertAttemptRow(db, t);
    config.testPauseAfterProcessorMs = 500;
    try {
      const running = attempts.run(a.id);
      await waitFor(async () => (await charges(a.vid)) === 1, { what: 'the charge made' });
      // The merchant stops the transaction while the attempt is in flight (what the refunds API writes).
      await db.query(
        `UPDATE transactions SET status = 'Stop Requested', stop_requested_at = now(), next_attempt_at = NULL
          WHERE id = $1`,
        [t.id],
      );
      await db.query(
        `INSERT INTO refunds (vid, merchant_id, transaction_id, kind, amount_minor, currency, status, previous_status)
         VALUES ($1, $2, $3, 'stop', 1999, 'USD', 'Processing', 'In Retry')`,
        [`stop_${a.vid.slice(0, 30)}`, merchantId, t.id],
      );
      expect(await running).toBe('unknown');
    } finally {
      config.testPauseAfterProcessorMs = 0;
    }
    expect((await txnRow(t.id)).status).toBe('Stop Requested');
    expect(await refundRows(t.id)).toMatchObject([{ kind: 'stop', status: 'Processing' }]);
    expect(await pushes(t.id)).toEqual([]);
  });

  // Defect 2 (issue 9): a prepared attempt may have reached the processor; it is never deleted.
  it('a stop finds a prepared attempt whose outcome is not known: kept (unknown), the stop waits', async () => {
    const t = await insertTransactionRow(db, merchantId, { stopRequested: true });
    const a = await insertAttemptRow(db, t, { preparedAt: new Date() });
    await attempts.run(a.id);
    expect(await attemptRows(t.id)).toMatchObject([{ id: a.id, state: 'unknown' }]);
    expect((await txnRow(t.id)).status).toBe('Stop Requested');
    expect(await refundRows(t.id)).toMatchObject([{ kind: 'stop', status: 'Processing' }]);
  });

  it('a prepared attempt is not dropped by a limit refusal: it passed the check when prepared, same key again', async () => {
    const t = await insertTransactionRow(db, merchantId, { card: '4111111111111111' });
    const other = await insertTransactionRow(db, merchantId, { card: '4111111111111111', status: 'Cancelled' });
    const a = await insertAttemptRow(db, t, { preparedAt: new Date(Date.now() - 60_000) });
    // A hard decline recorded since this attempt was prepared now blocks the card.
    await insertAttemptRow(db, other, {
      state: 'declined',
      preparedAt: new Date(),
      processedAt: new Date(),
      responseCode: '41',
      authCodeDescription: 'Hard Failure',
    });
    await attempts.run(a.id);
    const rows = await attemptRows(t.id);
    expect(rows).toHaveLength(1);
    expect(rows[0].id).toBe(a.id);
    expect((await txnRow(t.id)).status).not.toBe('Cancelled');
  });

  // Defect 3 (issue 9): a capture reported after the transaction ended is recorded and refunded.
  it('a late capture after Cancelled: recorded, refunded automatically, pushes `retry succeeded` then `refund completed`', async () => {
    const t = await insertTransactionRow(db, merchantId, { card: '4000000000000002', status: 'Cancelled' });
    const a = await insertAttemptRow(db, t, {
      state: 'error',
      preparedAt: new Date(Date.now() - 120_000),
      processedAt: new Date(Date.now() - 110_000),
      responseCode: '96',
      authCodeDescription: 'Soft Failure',
    });
    await setSandboxCharge(db, a.vid, { outcome: 'approved', processorTransactionId: 'sbx_late_after_cancel' });
    await tick.process();
    expect(await attemptRows(t.id)).toMatchObject([
      { state: 'captured', status: 'Captured', processor_transaction_id: 'sbx_late_after_cancel' },
    ]);
    expect(await refundRows(t.id)).toMatchObject([{ kind: 'refund', status: 'Completed', amount_minor: '1999' }]);
    expect(await txnRow(t.id)).toMatchObject({ status: 'Refunded', captured_amount_minor: '1999' });
    expect(await pushes(t.id)).toEqual(['retry succeeded', 'refund completed']);
  });

  it('a late capture after Stopped: recorded and refunded the same way', async () => {
    const t = await insertTransactionRow(db, merchantId, { card: '4000000000000002', status: 'Stopped' });
    await db.query(`UPDATE transactions SET stop_requested_at = now() WHERE id = $1`, [t.id]);
    const a = await insertAttemptRow(db, t, {
      state: 'error',
      preparedAt: new Date(Date.now() - 120_000),
      processedAt: new Date(Date.now() - 110_000),
      responseCode: '96',
      authCodeDescription: 'Soft Failure',
    });
    await setSandboxCharge(db, a.vid, { outcome: 'approved' });
    await tick.process();
    expect(await attemptRows(t.id)).toMatchObject([{ state: 'captured' }]);
    expect(await txnRow(t.id)).toMatchObject({ status: 'Refunded', captured_amount_minor: '1999' });
    expect(await pushes(t.id)).toEqual(['retry succeeded', 'refund completed']);
  });

  it('a late capture whose refund the processor rejects: `refund failed`, Captured, left to the operator', async () => {
    // The sandbox rejects refunds of amounts ending in .13.
    const t = await insertTransactionRow(db, merchantId, { status: 'Cancelled', amountMinor: '1013' });
    const a = await insertAttemptRow(db, t, {
      state: 'error',
      amountMinor: '1013',
      preparedAt: new Date(Date.now() - 120_000),
      processedAt: new Date(Date.now() - 110_000),
      responseCode: '96',
      authCodeDescription: 'Soft Failure',
    });
    await setSandboxCharge(db, a.vid, { outcome: 'approved' });
    await tick.process();
    expect(await refundRows(t.id)).toMatchObject([{ kind: 'refund', status: 'Failed', amount_minor: '1013' }]);
    expect(await txnRow(t.id)).toMatchObject({ status: 'Captured', captured_amount_minor: '1013' });
    expect(await pushes(t.id)).toEqual(['retry succeeded', 'refund failed']);
  });

  const unknownAttempt = async (t: { id: string; merchantId: string }, ageMs: number) =>
    insertAttemptRow(db, t, {
      state: 'unknown',
      preparedAt: new Date(Date.now() - ageMs),
      responseCode: '96',
      authCodeDescription: 'Soft Failure',
    });
  const MIN = 60_000;

  it('unknown -> captured by the reconciliation: the normal `retry succeeded` flow', async () => {
    const t = await insertTransactionRow(db, merchantId, { card: '4000000000000002' });
    const a = await unknownAttempt(t, MIN);
    await setSandboxCharge(db, a.vid, { outcome: 'approved', processorTransactionId: 'sbx_found_later' });
    await tick.process();
    expect(await attemptRows(t.id)).toMatchObject([
      { state: 'captured', status: 'Captured', response_code: '00', processor_transaction_id: 'sbx_found_later' },
    ]);
    expect(await txnRow(t.id)).toMatchObject({ status: 'Captured', captured_amount_minor: '1999' });
    expect(await pushes(t.id)).toEqual(['retry succeeded']);
  });

  it('unknown -> declined by the reconciliation: recorded, the next attempt planned', async () => {
    const t = await insertTransactionRow(db, merchantId, { card: '4000000000000002' });
    const a = await unknownAttempt(t, MIN);
    await setSandboxCharge(db, a.vid, { outcome: 'declined', responseCode: '51' });
    await tick.process();
    expect(await attemptRows(t.id)).toMatchObject([{ state: 'declined', response_code: '51' }]);
    const row = await txnRow(t.id);
    expect(row.status).toBe('In Retry');
    expect(row.next_attempt_at).not.toBeNull();
  });

  it('unknown, nothing found yet: stays unknown, looked up again later', async () => {
    const t = await insertTransactionRow(db, merchantId, { card: '4000000000000002' });
    const a = await unknownAttempt(t, MIN);
    await tick.process();
    const [row] = await db.query(`SELECT state, lookup_after FROM attempts WHERE id = $1`, [a.id]);
    expect(row.state).toBe('unknown');
    expect(new Date(row.lookup_after).getTime()).toBeGreaterThan(Date.now());
    expect((await txnRow(t.id)).next_attempt_at).toBeNull();
  });

  it('unknown, not found after RECONCILE_NOT_FOUND_AFTER: not charged (96), the schedule goes on', async () => {
    const t = await insertTransactionRow(db, merchantId, { card: '4000000000000002' });
    const a = await unknownAttempt(t, config.reconcileNotFoundMs + MIN);
    await tick.process();
    expect(await attemptRows(t.id)).toMatchObject([
      { id: a.id, state: 'error', status: 'Failed', response_code: '96', auth_code_description: 'Soft Failure' },
    ]);
    const row = await txnRow(t.id);
    expect(row.status).toBe('In Retry');
    expect(row.next_attempt_at).not.toBeNull();
    expect(await pushes(t.id)).toEqual([]);
  });

  it('a stop during an unknown attempt: closed Stopped only once not found', async () => {
    const t = await insertTransactionRow(db, merchantId, { stopRequested: true });
    const a = await unknownAttempt(t, MIN);
    await tick.process();
    expect((await txnRow(t.id)).status).toBe('Stop Requested');
    await db.query(`UPDATE attempts SET prepared_at = now() - interval '1 day', lookup_after = now() WHERE id = $1`, [
      a.id,
    ]);
    await tick.process();
    expect((await txnRow(t.id)).status).toBe('Stopped');
    expect(await refundRows(t.id)).toMatchObject([{ kind: 'stop', status: 'Completed' }]);
    expect(await pushes(t.id)).toEqual(['refund completed']);
  });

  it('a stop during an unknown attempt that turns out captured: the stop becomes a refund', async () => {
    const t = await insertTransactionRow(db, merchantId, { stopRequested: true });
    const a = await unknownAttempt(t, MIN);
    await setSandboxCharge(db, a.vid, { outcome: 'approved' });
    await tick.process();
    expect(await txnRow(t.id)).toMatchObject({ status: 'Refund Requested', captured_amount_minor: '1999' });
    expect(await refundRows(t.id)).toMatchObject([{ kind: 'refund', status: 'Processing', amount_minor: '1999' }]);
    expect(await pushes(t.id)).toEqual(['retry succeeded']);
  });

  it('unresolved after RECONCILE_ALERT_AFTER (lookups failing): the alert, and still unknown', async () => {
    const t = await insertTransactionRow(db, merchantId, { card: '4000000000000002' });
    const a = await unknownAttempt(t, config.reconcileAlertMs + MIN);
    processor.failLookups = true;
    try {
      await tick.process();
    } finally {
      processor.failLookups = false;
    }
    const [row] = await db.query(`SELECT state, alerted_at FROM attempts WHERE id = $1`, [a.id]);
    expect(row.state).toBe('unknown');
    expect(row.alerted_at).not.toBeNull();
    expect((await txnRow(t.id)).status).toBe('In Retry');
    const text = await metrics.registry.metrics();
    const gauge = /^retain_unreconciled_attempts(?:\{[^}]*\})? (\d+)/m.exec(text);
    expect(Number(gauge?.[1])).toBeGreaterThanOrEqual(1);
  });

  it('lookups that answer a wire error never settle the attempt as not charged: unknown, then the alert', async () => {
    const t = await insertTransactionRow(db, merchantId, { card: '4000000000000002' });
    const a = await unknownAttempt(t, config.reconcileAlertMs + config.reconcileNotFoundMs + MIN);
    processor.lookupsTimeOut = true;
    try {
      await tick.process();
    } finally {
      processor.lookupsTimeOut = false;
    }
    const [row] = await db.query(`SELECT state, alerted_at FROM attempts WHERE id = $1`, [a.id]);
    expect(row.state).toBe('unknown');
    expect(row.alerted_at).not.toBeNull();
    const txn = await txnRow(t.id);
    expect(txn.status).toBe('In Retry');
    expect(txn.next_attempt_at).toBeNull();
  });

  it('an attempt settled as not charged turns out captured before the next attempt: recorded, no new charge', async () => {
    const t = await insertTransactionRow(db, merchantId, { card: '4000000000000002' });
    const first = await insertAttemptRow(db, t, {
      state: 'error',
      preparedAt: new Date(Date.now() - 2 * MIN),
      processedAt: new Date(Date.now() - MIN),
      responseCode: '96',
      authCodeDescription: 'Soft Failure',
    });
    await setSandboxCharge(db, first.vid, { outcome: 'approved' });
    const second = await insertAttemptRow(db, t, { retryNumber: 2 });
    expect(await attempts.run(second.id)).toBe('approved');
    expect(await attemptRows(t.id)).toMatchObject([{ id: first.id, state: 'captured' }]);
    expect(await charges(second.vid)).toBe(0);
    expect((await txnRow(t.id)).status).toBe('Captured');
  });

  it('a 429 with Retry-After slows that merchant only: its next attempt waits, another merchant is charged', async () => {
    const slowed = await insertMerchantRow(db);
    const t1 = await insertTransactionRow(db, slowed);
    const a1 = await insertAttemptRow(db, t1);
    processor.rateLimitNext = 60_000;
    expect(await attempts.run(a1.id)).toBe('unknown');
    // The same merchant's next attempt is not sent: dropped, the transaction waits for Retry-After.
    const t2 = await insertTransactionRow(db, slowed);
    const a2 = await insertAttemptRow(db, t2);
    expect(await attempts.run(a2.id)).toBe('nothing to do');
    expect(await attemptRows(t2.id)).toEqual([]);
    expect(await charges(a2.vid)).toBe(0);
    const waiting = new Date((await txnRow(t2.id)).next_attempt_at).getTime();
    expect(waiting).toBeGreaterThan(Date.now() + 50_000);
    // Another merchant is not slowed.
    const t3 = await insertTransactionRow(db, await insertMerchantRow(db));
    const a3 = await insertAttemptRow(db, t3);
    expect(await attempts.run(a3.id)).toBe('approved');
  });

  it('the scheduler keeps handing out while whole batches are due: 1,100 due transactions in one call', async () => {
    const m = await insertMerchantRow(db);
    const ids: string[] = [];
    for (let i = 0; i < 1100; i += 50) {
      const rows = await Promise.all(
        Array.from({ length: 50 }, () => insertTransactionRow(db, m, { nextAttemptAt: new Date(Date.now() - 1000) })),
      );
      ids.push(...rows.map((r) => r.id));
    }
    try {
      await mod.get(AttemptSchedulerService).scheduleDue(60_000);
      const [{ n }] = await db.query(`SELECT count(*)::int AS n FROM attempts WHERE transaction_id = ANY($1::uuid[])`, [
        ids,
      ]);
      expect(n).toBe(1100);
      // Handed out as retry.attempt jobs of ATTEMPTS_PER_JOB attempts each: every attempt in one job.
      const slices: { n: number; ids: string[] }[] = await db.query(
        `SELECT jsonb_array_length(o.payload->'attemptIds')::int AS n,
                ARRAY(SELECT jsonb_array_elements_text(o.payload->'attemptIds')) AS ids
           FROM outbox o
          WHERE o.queue = 'retry.attempt' AND o.payload->>'v' = '2'
            AND o.payload->'attemptIds' ?| (SELECT array_agg(id::text) FROM attempts WHERE transaction_id = ANY($1::uuid[]))`,
        [ids],
      );
      expect(slices.length).toBe(Math.ceil(1100 / ATTEMPTS_PER_JOB));
      expect(Math.max(...slices.map((x) => x.n))).toBe(ATTEMPTS_PER_JOB);
      expect(new Set(slices.flatMap((x) => x.ids)).size).toBe(1100);
    } finally {
      // The 1,100 attempt jobs went to the run's shared queue: later files' retry-workers would charge
      // one card 1,100 times (serialised on its limit lock) and starve their own attempts. Without
      // their rows the jobs do nothing.
      await db.query(`DELETE FROM attempts WHERE transaction_id = ANY($1::uuid[]) AND prepared_at IS NULL`, [ids]);
      await db.query(
        `UPDATE transactions SET status = 'Cancelled', next_attempt_at = NULL WHERE id = ANY($1::uuid[])`,
        [ids],
      );
    }
  });

  // Concurrent attempts of one process share their statements (prepareBatch, recordBatch): these
  // run several at once, so they form one batch, and check the batch keeps every per-attempt rule.
  describe('grouped: concurrent attempts in one batch', () => {
    it('several attempts on one card never pass its limit together: 18 declines, 4 at once, 2 charged', async () => {
      const merchant = await insertMerchantRow(db);
      const card = '4000000000000002';
      const other = await insertTransactionRow(db, merchant, { card });
      for (let n = 1; n <= 18; n++)
        await insertAttemptRow(db, other, {
          retryNumber: n,
          state: 'declined',
          preparedAt: new Date(),
          processedAt: new Date(),
          responseCode: '05',
          authCodeDescription: 'Soft Failure',
        });
      const ts = await Promise.all([1, 2, 3, 4].map(() => insertTransactionRow(db, merchant, { card })));
      const as = await Promise.all(ts.map((t) => insertAttemptRow(db, t)));
      const results = await Promise.all(as.map((a) => attempts.run(a.id)));
      const charged = (await Promise.all(as.map((a) => charges(a.vid)))).reduce((x, y) => x + y, 0);
      expect(charged).toBe(2);
      expect(results.filter((r) => r === 'nothing to do')).toHaveLength(2);
      // The two not made: the card frees only after their recovery windows, so they end without an
      // attempt; the card never saw more than 20 attempts.
      for (const [i, t] of ts.entries()) {
        if (results[i] !== 'nothing to do') continue;
        expect(await attemptRows(t.id)).toEqual([]);
        expect(await txnRow(t.id)).toMatchObject({ status: 'Cancelled', next_attempt_at: null });
      }
      const [{ n }] = await db.query(
        `SELECT count(*)::int AS n FROM attempts WHERE merchant_id = $1 AND prepared_at IS NOT NULL`,
        [merchant],
      );
      expect(n).toBe(20);
    });

    it('uncommon attempts of a batch run alone: a stop, an attempt prepared by an earlier run, beside a common one', async () => {
      const merchant = await insertMerchantRow(db);
      const plain = await insertTransactionRow(db, merchant);
      const stopped = await insertTransactionRow(db, merchant, { stopRequested: true });
      const earlier = await insertTransactionRow(db, merchant, { card: '4000000000000077' });
      const [a1, a2, a3] = await Promise.all([
        insertAttemptRow(db, plain),
        insertAttemptRow(db, stopped),
        insertAttemptRow(db, earlier, { preparedAt: new Date() }),
      ]);
      await setSandboxCharge(db, a3!.vid, { outcome: 'approved', processorTransactionId: 'sbx_earlier_batch' });
      const results = await Promise.all([a1!, a2!, a3!].map((a) => attempts.run(a.id)));
      expect(results).toEqual(['approved', 'nothing to do', 'approved']);
      expect((await txnRow(plain.id)).status).toBe('Captured');
      expect(await attemptRows(stopped.id)).toEqual([]);
      expect((await txnRow(stopped.id)).status).toBe('Stopped');
      expect(await charges(a2!.vid)).toBe(0);
      expect(await attemptRows(earlier.id)).toMatchObject([
        { state: 'captured', processor_transaction_id: 'sbx_earlier_batch' },
      ]);
      expect(await charges(a3!.vid)).toBe(1);
      // Run again (a redelivered job each): nothing more.
      expect(await Promise.all([a1!, a2!, a3!].map((a) => attempts.run(a.id)))).toEqual([
        'nothing to do',
        'nothing to do',
        'nothing to do',
      ]);
      expect(await pushes(plain.id)).toEqual(['retry succeeded']);
    });

    it('outcomes of one batch: a capture and a decline recorded together, the end of a recovery and an unknown alone', async () => {
      const merchant = await insertMerchantRow(db);
      const [ok, soft, hard, error] = await Promise.all(
        [undefined, '4000000000000077', '4100000000000019', '4000000000000119'].map((card) =>
          insertTransactionRow(db, merchant, card ? { card } : {}),
        ),
      );
      // On the adaptive policy, whose learner counts each decided attempt.
      await db.query(`UPDATE transactions SET policy_version = 'adaptive-2026-11' WHERE merchant_id = $1`, [merchant]);
      const as = await Promise.all([ok!, soft!, hard!, error!].map((t) => insertAttemptRow(db, t)));
      expect(await Promise.all(as.map((a) => attempts.run(a.id)))).toEqual([
        'approved',
        'declined',
        'declined',
        'unknown',
      ]);
      expect(await txnRow(ok!.id)).toMatchObject({ status: 'Captured', captured_amount_minor: '1999' });
      expect(await pushes(ok!.id)).toEqual(['retry succeeded']);
      const retry = await txnRow(soft!.id);
      expect(retry.status).toBe('In Retry');
      expect(retry.next_attempt_at).not.toBeNull();
      expect(await attemptRows(soft!.id)).toMatchObject([{ state: 'declined', response_code: '51' }]);
      expect((await txnRow(hard!.id)).status).toBe('Cancelled');
      expect(await pushes(hard!.id)).toEqual(['retry failed']);
      expect(await attemptRows(error!.id)).toMatchObject([{ state: 'unknown', response_code: '96' }]);
      // The learner counted the two decisions of the batch's merchant, the unknown not.
      const [{ n }] = await db.query(
        `SELECT coalesce(sum(attempts), 0)::int AS n FROM (
           SELECT attempts FROM policy_slot_pending WHERE scope = $1
           UNION ALL SELECT attempts FROM policy_slot_stats WHERE scope = $1) c`,
        [merchant],
      );
      expect(n).toBe(3);
    });
  });

  it('one job runs its slice of attempts; a failed one fails the job, its retry charges nobody twice', async () => {
    const m = await insertMerchantRow(db);
    const [ok, flaky, noCard] = await Promise.all([1, 2, 3].map(() => insertTransactionRow(db, m)));
    await db.query(`UPDATE transactions SET card_enc = NULL WHERE id = $1`, [noCard.id]);
    const [a, b, c] = await Promise.all([ok, flaky, noCard].map((t) => insertAttemptRow(db, t)));
    processor.throwOnce.add(b.vid);
    // A transient failure among them: the job is retried (a plain Error), not failed for good.
    const first = await attempts.runMany([a.id, b.id, c.id]).catch((e: Error) => e);
    expect(first).toBeInstanceOf(Error);
    expect(first).not.toBeInstanceOf(UnrecoverableError);
    expect((first as Error).message).toMatch(/^2 of 3 attempts failed/);
    expect(await charges(a.vid)).toBe(1);
    // The retry: the recorded attempt is left alone, the flaky one is charged under its same key,
    // and only the attempt that can never succeed remains: now the job fails for good.
    const second = await attempts.runMany([a.id, b.id, c.id]).catch((e: Error) => e);
    expect(second).toBeInstanceOf(UnrecoverableError);
    expect((second as Error).message).toMatch(/^1 of 3 attempts failed, first: transaction has no card to charge/);
    expect([await charges(a.vid), await charges(b.vid), await charges(c.vid)]).toEqual([1, 1, 0]);
    for (const t of [ok, flaky]) {
      const rows = await attemptRows(t.id);
      expect(rows.map((r) => r.state)).toEqual(['captured']);
      expect((await txnRow(t.id)).status).toBe('Captured');
    }
    expect(await attempts.runMany([a.id, b.id])).toEqual({ 'nothing to do': 2 });
  });

  it("a job's attempts failing because Postgres is going away: the job's error still reads as an outage (no try used up)", async () => {
    // runMany's own Error kept only the first message: a failover's 57P01 (its message matches no outage
    // pattern) used up the job's 10 tries, then failed it for good (the scale-out audit, session 25).
    const goingAway = Object.assign(new Error('terminating connection due to administrator command'), {
      code: '57P01',
    });
    const run = vi.spyOn(attempts, 'run').mockRejectedValue(goingAway);
    try {
      const err = await attempts.runMany([randomUUID(), randomUUID()]).catch((e: Error) => e);
      expect((err as Error).message).toMatch(/^2 of 2 attempts failed, first: terminating connection/);
      expect(isUnavailable(err)).toBe(true);
    } finally {
      run.mockRestore();
    }
  });

  it('a transaction without a card to charge fails the job for good (UnrecoverableError)', async () => {
    const t = await insertTransactionRow(db, await insertMerchantRow(db));
    await db.query(`UPDATE transactions SET card_enc = NULL WHERE id = $1`, [t.id]);
    const a = await insertAttemptRow(db, t);
    await expect(attempts.run(a.id)).rejects.toBeInstanceOf(UnrecoverableError);
    expect(await charges(a.vid)).toBe(0);
  });
});
