import { loadConfig, type RetainConfig } from '@retain/config';
import { RefundsRepository } from '@retain/db';
import { PgSandboxLedger, SandboxProcessor, type TransactionProcessors } from '@retain/processor';
import { OutboxRelay, QueueRegistry, createRedis } from '@retain/queues';
import { applyRefundAnswer } from '@retain/recovery';
import {
  closeTestDb,
  insertAttemptRow,
  insertMerchantRow,
  insertTransactionRow,
  testDb,
  usePrivateDatabase,
} from '@retain/testing';
import type { Redis } from 'ioredis';
import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SettlementService } from '../src/settlement/settlement.service';
// The merchant's refund arrives through the refunds API's own service while the check is out.
// eslint-disable-next-line @nx/enforce-module-boundaries -- a test of the two apps on one database
import { RefundRequestService } from '../../intake-api/src/refunds/refund-request.service';

/**
 * A refund or a stop racing the settlement check (README Settlement: the move is guarded by the
 * status, a refund requested meanwhile wins), on a partial authorization (decisions §15: 9.99 of
 * 19.99 captured): whichever commits first, the state is one the rules allow, the refund is at most
 * the captured part, and a failed refund returns the transaction to a status it may settle from.
 */
describe('settlement racing refunds and stops on a partial capture', () => {
  usePrivateDatabase('stlrace');
  let db: DataSource;
  let redis: Redis;
  let queues: QueueRegistry;
  let service: SettlementService;
  let refunds: RefundRequestService;
  let merchantId: string;
  /** Runs while the check holds the processor's answer (after it took its rows, before it moves them). */
  let duringCheck: (() => Promise<void>) | null = null;
  const config: RetainConfig = { ...loadConfig('retry-worker'), retryTimeScale: 1 };

  beforeAll(async () => {
    db = await testDb();
    redis = createRedis(config.redisUrl);
    queues = new QueueRegistry(redis, config.queuePrefix);
    const sandbox = new SandboxProcessor(new PgSandboxLedger(db));
    const processor = Object.assign(Object.create(sandbox) as SandboxProcessor, {
      settlementOf: async (charge: { processorTransactionId: string; capturedAt: Date }, at: Date) => {
        const during = duringCheck;
        duringCheck = null;
        if (during) await during();
        return sandbox.settlementOf(charge, at);
      },
    });
    const processors: TransactionProcessors = {
      forTransaction: async () => processor,
      forAccount: async () => processor,
    };
    service = new SettlementService(db, processors, config);
    refunds = new RefundRequestService(db, new RefundsRepository(db), new OutboxRelay(db, queues));
    merchantId = await insertMerchantRow(db);
  });
  afterAll(async () => {
    await queues?.close();
    redis?.disconnect();
    await closeTestDb();
  });

  const merchant = () => ({ id: merchantId, merchantVid: 'v', login: 'l' });
  /** A partial capture (9.99 of 19.99) made two days ago: the sandbox has settled it since. */
  const partialCapture = async () => {
    const t = await insertTransactionRow(db, merchantId, { status: 'Captured', capturedMinor: '999' });
    const twoDaysAgo = new Date(Date.now() - 2 * 86_400_000);
    const a = await insertAttemptRow(db, t, { state: 'captured', preparedAt: twoDaysAgo, processedAt: twoDaysAgo });
    await db.query(
      `UPDATE attempts SET status = 'Captured', processor_transaction_id = $2, partial_amount_minor = 999 WHERE id = $1`,
      [a.id, `sbx_${a.vid}`],
    );
    await db.query(
      `UPDATE transactions SET processor_transaction_id = $2, status_changed_at = $3, partial_amount_minor = 999
        WHERE id = $1`,
      [t.id, `sbx_${a.vid}`, twoDaysAgo],
    );
    return t;
  };
  const row = async (id: string) =>
    (
      await db.query(
        `SELECT t.status, t.settled_at IS NOT NULL AS settled,
                (SELECT json_agg(json_build_object('kind', kind, 'status', status, 'amount', amount_minor::int,
                   'previous', previous_status) ORDER BY created_at) FROM refunds r WHERE r.transaction_id = t.id) AS refunds
           FROM transactions t WHERE t.id = $1`,
        [id],
      )
    )[0];
  const failed = { outcome: 'failed' as const, processorRefundId: null, message: 'Refund rejected by the processor' };
  const completed = { outcome: 'completed' as const, processorRefundId: 'sbr_x', message: 'Refunded' };

  it('a refund requested while the check is out wins; failed, the capture settles on the next check', async () => {
    const t = await partialCapture();
    duringCheck = async () => {
      const r = await refunds.request(merchant(), { refunds: [{ id: t.merchantTxnId }] }, false);
      expect(r.status).toBe(200);
    };
    await service.check();
    expect(await row(t.id)).toEqual({
      status: 'Refund Requested',
      settled: false,
      refunds: [{ kind: 'refund', status: 'Processing', amount: 999, previous: 'Captured' }],
    });
    const [{ id: refundId }] = await db.query(`SELECT id FROM refunds WHERE transaction_id = $1`, [t.id]);
    await db.transaction((m) => applyRefundAnswer(m, refundId, failed));
    expect((await row(t.id)).status).toBe('Captured');
    await db.query(`UPDATE transactions SET settlement_checked_at = NULL WHERE id = $1`, [t.id]);
    await service.check();
    expect(await row(t.id)).toMatchObject({ status: 'Settled', settled: true });
  });

  it('settled first: refunded per spec (at most the captured part), a failed refund returns to Settled', async () => {
    const t = await partialCapture();
    await service.check();
    expect((await row(t.id)).status).toBe('Settled');
    // More than the captured part: RET027; a stop is no longer possible (nothing in retry).
    const over = await refunds.request(merchant(), { refunds: [{ id: t.merchantTxnId, amount: 10 }] }, false);
    expect(over.body.rejected?.[0]?.errors[0]?.code).toBe('RET027');
    const part = await refunds.request(merchant(), { refunds: [{ id: t.merchantTxnId, amount: 5 }] }, false);
    expect(part.status).toBe(200);
    const [{ id: first }] = await db.query(`SELECT id FROM refunds WHERE transaction_id = $1`, [t.id]);
    await db.transaction((m) => applyRefundAnswer(m, first, failed));
    expect(await row(t.id)).toMatchObject({ status: 'Settled', settled: true });
    // The whole part, then nothing left.
    expect((await refunds.request(merchant(), { refunds: [{ id: t.merchantTxnId }] }, false)).status).toBe(200);
    const open = await db.query(
      `SELECT id, amount_minor FROM refunds WHERE transaction_id = $1 AND status = 'Processing'`,
      [t.id],
    );
    expect(open).toEqual([{ id: expect.any(String), amount_minor: '999' }]);
    await db.transaction((m) => applyRefundAnswer(m, open[0].id, completed));
    expect((await row(t.id)).status).toBe('Refunded');
    const again = await refunds.request(merchant(), { refunds: [{ id: t.merchantTxnId, amount: 0.01 }] }, false);
    expect(again.body.rejected?.[0]?.errors[0]?.code).toBe('RET027');
    // A refunded capture is never settled afterwards.
    await db.query(`UPDATE transactions SET settlement_checked_at = NULL WHERE id = $1`, [t.id]);
    await service.check();
    expect((await row(t.id)).status).toBe('Refunded');
  });

  it('never settles a transaction that captured nothing, whatever its status says elsewhere', async () => {
    // In retry, stopped and cancelled transactions (no capture) are never taken by the check.
    const inRetry = await insertTransactionRow(db, merchantId);
    const stopped = await insertTransactionRow(db, merchantId, { status: 'Stopped' });
    const cancelled = await insertTransactionRow(db, merchantId, { status: 'Cancelled' });
    await service.check();
    for (const t of [inRetry, stopped, cancelled]) expect((await row(t.id)).settled).toBe(false);
    expect((await row(inRetry.id)).status).toBe('In Retry');
    expect((await row(stopped.id)).status).toBe('Stopped');
    expect((await row(cancelled.id)).status).toBe('Cancelled');
  });
});
