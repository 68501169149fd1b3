import { type TestingModule } from '@nestjs/testing';
import { loadConfig, type RetainConfig } from '@retain/config';
import { AttemptEntity, TransactionEntity, RefundsRepository, transactionView } from '@retain/db';
import { PgSandboxLedger, SandboxProcessor } from '@retain/processor';
import { QueueRegistry, createRedis, OutboxRelay } from '@retain/queues';
import { AttemptState, networkFeeFields } from '@retain/recovery';
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
// eslint-disable-next-line @nx/enforce-module-boundaries -- a test of the two apps' hand-over on one database
import { RefundRequestService } from '../../intake-api/src/refunds/refund-request.service';

const PARTIAL_CARD = '4000000000003220';

// The money a merchant is told about on the less-travelled paths: a partial authorization (decisions
// §15) captured by an attempt in flight when the merchant stopped the transaction (decisions §8), and
// the network-fee figures its row records when that recovery ends.
describe('partial captures on the stop path: amounts and fees as the rows say', () => {
  let mod: TestingModule;
  let db: DataSource;
  let redis: Redis;
  let queues: QueueRegistry;
  let attempts: AttemptService;
  let stops: RefundRequestService;
  let merchantId: string;
  const config: RetainConfig = { ...loadConfig('retry-worker'), retryTimeScale: 1 };

  beforeAll(async () => {
    db = await testDb();
    redis = createRedis(config.redisUrl);
    queues = new QueueRegistry(redis, config.queuePrefix);
    mod = await attemptTestingModule(db, queues, config, new SandboxProcessor(new PgSandboxLedger(db)));
    attempts = mod.get(AttemptService);
    stops = new RefundRequestService(db, new RefundsRepository(db), new OutboxRelay(db, queues));
    merchantId = await insertMerchantRow(db);
  });
  afterAll(async () => {
    await mod?.close();
    await queues?.close();
    redis?.disconnect();
    await closeTestDb();
  });

  const merchant = () => ({ id: merchantId, merchantVid: 'v', login: 'l' });

  it('a stop whose in-flight attempt captures half: the refund is the half, and the fees are recorded', async () => {
    // Visa 51, failed 25 days ago: a naive daily schedule would have gone past Visa's 15 in 30 days.
    const t = await insertTransactionRow(db, merchantId, { card: PARTIAL_CARD });
    await db.query(`UPDATE transactions SET failed_at = now() - interval '25 days' WHERE id = $1`, [t.id]);
    const a = await insertAttemptRow(db, t, { preparedAt: new Date() });
    // The merchant stops it (the whole amount) while the attempt is out.
    const r = await stops.request(merchant(), { refunds: [{ id: t.merchantTxnId, amount: 19.99 }] }, false);
    expect(r.status).toBe(200);
    // The attempt's charge: approved for half (the sandbox's partial authorization).
    await db.transaction((m) =>
      attempts.record(
        m,
        a.id,
        {
          outcome: 'approved',
          responseCode: '00',
          processorTransactionId: 'sbx_half',
          message: 'Approved',
          amountMinor: 999n,
        },
        AttemptState.Pending,
      ),
    );
    const [row] = await db.query(
      `SELECT status, captured_amount_minor, network_fees_minor, naive_network_fees_minor FROM transactions WHERE id = $1`,
      [t.id],
    );
    const refunds = await db.query(`SELECT kind, status, amount_minor FROM refunds WHERE transaction_id = $1`, [t.id]);
    // Never more than was captured: the half.
    expect(refunds).toEqual([{ kind: 'refund', status: 'Processing', amount_minor: '999' }]);
    expect(row).toMatchObject({ status: 'Refund Requested', captured_amount_minor: '999' });
    // The recovery ended with a capture: its fees are recorded as for any capture (README, Network fees).
    const txn = await db.getRepository(TransactionEntity).findOneByOrFail({ id: t.id });
    const fees = await networkFeeFields(db.manager, txn);
    expect(fees.naiveNetworkFeesMinor).toBeGreaterThan(0);
    expect({ paid: row.network_fees_minor, naive: row.naive_network_fees_minor }).toEqual({
      paid: fees.networkFeesMinor,
      naive: fees.naiveNetworkFeesMinor,
    });
    expect((await db.getRepository(AttemptEntity).findOneByOrFail({ id: a.id })).partialAmountMinor).toBe('999');
  });

  // A second capture (an attempt settled as not charged that the processor finishes late, after the next
  // attempt captured) is added to what was captured and refunded at once: the transaction keeps its own
  // capture, the partial authorization the merchant was told about, whatever the second one captured.
  for (const [second, what] of [
    [999n, 'a second half'],
    [1999n, 'the whole amount'],
  ] as const) {
    it(`a partial capture followed by a late capture of ${what}: partial_amount stays the kept half`, async () => {
      const t = await insertTransactionRow(db, merchantId, { card: PARTIAL_CARD });
      const first = await insertAttemptRow(db, t, {
        state: 'error',
        preparedAt: new Date(Date.now() - 2 * 3_600_000),
        processedAt: new Date(Date.now() - 3_600_000),
        responseCode: '96',
        authCodeDescription: 'Soft Failure',
      });
      await setSandboxCharge(db, first.vid, { outcome: 'error' });
      const kept = await insertAttemptRow(db, t, { retryNumber: 2 });
      expect(await attempts.run(kept.id)).toBe('approved');
      const view = async () => transactionView(await db.getRepository(TransactionEntity).findOneByOrFail({ id: t.id }));
      expect(await view()).toMatchObject({ status: 'Captured', amount: 19.99, partial_amount: 9.99 });
      await db.transaction((m) =>
        attempts.record(
          m,
          first.id,
          {
            outcome: 'approved',
            responseCode: '00',
            processorTransactionId: `sbx_late_${second}`,
            message: 'Approved',
            ...(second < 1999n ? { amountMinor: second } : {}),
          },
          AttemptState.Error,
        ),
      );
      const refunds = await db.query(`SELECT kind, amount_minor FROM refunds WHERE transaction_id = $1`, [t.id]);
      expect(refunds).toEqual([{ kind: 'refund', amount_minor: String(second) }]);
      // The merchant keeps the half it was told about: that is the transaction's partial_amount, and all
      // the merchant can still refund once the second capture is returned.
      expect(await view()).toMatchObject({ amount: 19.99, partial_amount: 9.99 });
    });
  }

  it('a late partial capture of a Cancelled transaction: the half is refunded and the fees are those of the rows', async () => {
    // Visa 51, failed 25 days ago; its attempt was settled "not charged" and the recovery ended Cancelled,
    // recording the fees as the rows said then (no capture: the naive schedule runs its 30 days).
    const t = await insertTransactionRow(db, merchantId, { card: PARTIAL_CARD, status: 'Cancelled' });
    await db.query(`UPDATE transactions SET failed_at = now() - interval '25 days' WHERE id = $1`, [t.id]);
    const a = await insertAttemptRow(db, t, {
      state: 'error',
      preparedAt: new Date(Date.now() - 2 * 3_600_000),
      processedAt: new Date(Date.now() - 3_600_000),
      responseCode: '96',
      authCodeDescription: 'Soft Failure',
    });
    const atCancel = await networkFeeFields(
      db.manager,
      await db.getRepository(TransactionEntity).findOneByOrFail({ id: t.id }),
    );
    await db.query(`UPDATE transactions SET network_fees_minor = $2, naive_network_fees_minor = $3 WHERE id = $1`, [
      t.id,
      atCancel.networkFeesMinor,
      atCancel.naiveNetworkFeesMinor,
    ]);
    // The processor finishes the attempt late, for half.
    const recorded = await db.transaction((m) =>
      attempts.record(
        m,
        a.id,
        {
          outcome: 'approved',
          responseCode: '00',
          processorTransactionId: 'sbx_late_half',
          message: 'Approved',
          amountMinor: 999n,
        },
        AttemptState.Error,
      ),
    );
    expect(recorded.lateRefund).toMatchObject({ amountMinor: 999n });
    const txn = await db.getRepository(TransactionEntity).findOneByOrFail({ id: t.id });
    expect(transactionView(txn)).toMatchObject({ status: 'Refund Requested', amount: 19.99, partial_amount: 9.99 });
    // The rows now hold a capture (the naive schedule stops there): the recorded fees say the same.
    const now = await networkFeeFields(db.manager, txn);
    expect(now.naiveNetworkFeesMinor).not.toBe(atCancel.naiveNetworkFeesMinor);
    expect({ paid: txn.networkFeesMinor, naive: txn.naiveNetworkFeesMinor }).toEqual({
      paid: now.networkFeesMinor,
      naive: now.naiveNetworkFeesMinor,
    });
  });

  it("a second capture whose refund failed: the merchant's refund is at most its own capture, on its own charge", async () => {
    // 20.27 on the partial card: each capture is approved for 10.13, which the sandbox refuses to refund.
    const t = await insertTransactionRow(db, merchantId, { card: PARTIAL_CARD, amountMinor: '2027' });
    const first = await insertAttemptRow(db, t, {
      amountMinor: '2027',
      state: 'error',
      preparedAt: new Date(Date.now() - 2 * 3_600_000),
      processedAt: new Date(Date.now() - 3_600_000),
      responseCode: '96',
      authCodeDescription: 'Soft Failure',
    });
    await setSandboxCharge(db, first.vid, { outcome: 'error' });
    const kept = await insertAttemptRow(db, t, { retryNumber: 2, amountMinor: '2027' });
    expect(await attempts.run(kept.id)).toBe('approved');
    const recorded = await db.transaction((m) =>
      attempts.record(
        m,
        first.id,
        {
          outcome: 'approved',
          responseCode: '00',
          processorTransactionId: 'sbx_late_second',
          message: 'Approved',
          amountMinor: 1013n,
        },
        AttemptState.Error,
      ),
    );
    // The second capture's refund fails (.13): the customer still holds it, an operator's matter.
    await attempts.sendLateRefund(recorded.lateRefund!);
    const txn = await db.getRepository(TransactionEntity).findOneByOrFail({ id: t.id });
    expect(transactionView(txn)).toMatchObject({ status: 'Captured', amount: 20.27, partial_amount: 10.13 });
    // The merchant's refunds return the transaction's own capture (10.13, its charge): never the second one's.
    const over = await stops.request(merchant(), { refunds: [{ id: t.merchantTxnId, amount: 10.14 }] }, false);
    expect(over.body.rejected?.[0]?.errors[0]?.code).toBe('RET027');
    expect((await stops.request(merchant(), { refunds: [{ id: t.merchantTxnId }] }, false)).status).toBe(200);
    const open = await db.query(
      `SELECT amount_minor, attempt_id FROM refunds WHERE transaction_id = $1 AND status = 'Processing'`,
      [t.id],
    );
    expect(open).toEqual([{ amount_minor: '1013', attempt_id: null }]);
  });
});
