import { Test, type TestingModule } from '@nestjs/testing';
import { loadConfig } from '@retain/config';
import { newVid } from '@retain/domain';
import { RETAIN_CONFIG, RetainMetrics } from '@retain/platform';
import { StripeProcessor, TRANSACTION_PROCESSORS, fixedProcessor } from '@retain/processor';
import { OutboxRelay, QueueRegistry, createRedis } from '@retain/queues';
import { closeTestDb, insertMerchantRow, insertTransactionRow, testDb } from '@retain/testing';
import type { Redis } from 'ioredis';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RefundBatchService } from '../src/batch/refund-batch.service';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the Stripe wire fake, a test double of libs/processor
import { StripeFake } from '../../../libs/processor/test/stripe-fake';

/**
 * A Stripe refund answered `succeeded` can still move to `failed` (with a `failure_reason`): the refund
 * batcher reads completed Stripe refunds again for a bounded window, and one failed after all ends
 * Failed with the `refund failed` push, its transaction back to its status before the refund.
 */
describe('refund batch with a Stripe account: a refund that fails after succeeded', () => {
  let mod: TestingModule;
  let db: DataSource;
  let redis: Redis;
  let queues: QueueRegistry;
  let batch: RefundBatchService;
  let stripe: StripeProcessor;
  const fake = new StripeFake('sk_test_retain_refund_recheck');
  const config = loadConfig('refund-batcher');

  beforeAll(async () => {
    const base = await fake.start();
    stripe = new StripeProcessor({ secret_key: fake.secretKey, api_base: base }, { timeoutMs: 2000 });
    db = await testDb();
    redis = createRedis(config.redisUrl);
    queues = new QueueRegistry(redis, config.queuePrefix);
    mod = await Test.createTestingModule({
      providers: [
        RefundBatchService,
        { provide: DataSource, useValue: db },
        { provide: RetainMetrics, useValue: new RetainMetrics('refund-batcher') },
        { provide: RETAIN_CONFIG, useValue: config },
        { provide: OutboxRelay, useValue: new OutboxRelay(db, queues) },
        { provide: TRANSACTION_PROCESSORS, useValue: fixedProcessor(stripe) },
      ],
    }).compile();
    batch = mod.get(RefundBatchService);
  });
  afterAll(async () => {
    await mod?.close();
    await queues?.close();
    redis?.disconnect();
    await fake.close();
    await closeTestDb();
  });

  /** A Captured transaction whose capture is a PaymentIntent at the fake, and its refund requested. */
  async function refundRequested(previousStatus = 'Captured'): Promise<{ txnId: string; refundId: string }> {
    const merchantId = await insertMerchantRow(db);
    const t = await insertTransactionRow(db, merchantId, { status: 'Refund Requested', capturedMinor: '1999' });
    const charged = await stripe.charge({
      idempotencyKey: `att_${newVid()}`,
      attemptNumber: 1,
      amountMinor: 1999n,
      currency: 'USD',
      instrument: { kind: 'token', token: 'cus_R1|pm_card_visa', isNetworkToken: false },
      originalResponseCode: '51',
      divisionNumber: 'div-1',
      at: new Date(),
    });
    if (charged.outcome !== 'approved') throw new Error('expected approval');
    await db.query(`UPDATE transactions SET processor_transaction_id = $2 WHERE id = $1`, [
      t.id,
      charged.processorTransactionId,
    ]);
    const [r]: { id: string }[] = await db.query(
      `INSERT INTO refunds (vid, merchant_id, transaction_id, kind, amount_minor, currency, status, previous_status,
         requested_at, timestamp)
       VALUES ($1, $2, $3, 'refund', 1999, 'USD', 'Processing', $4, now() - interval '1 minute', now())
       RETURNING id`,
      [newVid(), merchantId, t.id, previousStatus],
    );
    return { txnId: t.id, refundId: r!.id };
  }

  const state = async (txnId: string, refundId: string) => ({
    transaction: (await db.query(`SELECT status FROM transactions WHERE id = $1`, [txnId]))[0].status,
    refund: (
      await db.query(`SELECT status, processor_refund_id, failure_message FROM refunds WHERE id = $1`, [refundId])
    )[0],
    pushes: (
      await db.query(`SELECT event_name FROM webhook_messages WHERE transaction_id = $1 ORDER BY created_at`, [txnId])
    ).map((w: { event_name: string }) => w.event_name),
  });
  /** The next batch, as if the re-check interval had passed. */
  const recheckDue = (refundId: string) =>
    db.query(`UPDATE refunds SET recheck_after = now() - interval '1 second' WHERE id = $1`, [refundId]);

  it('completed, then failed at Stripe: the next batch records it Failed, refund failed pushed, status restored', async () => {
    const { txnId, refundId } = await refundRequested();
    await batch.runBatch();
    const done = await state(txnId, refundId);
    expect(done).toMatchObject({ transaction: 'Refunded', refund: { status: 'Completed' } });
    expect(done.pushes).toEqual(['refund completed']);

    // Still succeeded at Stripe: read again, nothing changes.
    await recheckDue(refundId);
    await batch.runBatch();
    expect(await state(txnId, refundId)).toMatchObject({ transaction: 'Refunded', refund: { status: 'Completed' } });
    const reads = () => fake.received('GET', `/v1/refunds/${done.refund.processor_refund_id as string}`).length;
    expect(reads()).toBe(1);

    // The card issuer returned it: Stripe's refund is now failed.
    fake.settleRefund(done.refund.processor_refund_id as string, 'failed', 'expired_or_canceled_card');
    await recheckDue(refundId);
    await batch.runBatch();
    const failed = await state(txnId, refundId);
    expect(failed).toMatchObject({
      transaction: 'Captured',
      refund: { status: 'Failed', failure_message: 'Refund failed (expired_or_canceled_card)' },
    });
    expect(failed.pushes).toEqual(['refund completed', 'refund failed']);

    // Final: never read again, never announced twice.
    await recheckDue(refundId);
    await batch.runBatch();
    expect(reads()).toBe(2);
    expect((await state(txnId, refundId)).pushes).toEqual(['refund completed', 'refund failed']);
  });

  it('every refund reversed: the transaction returns to Captured, never to a refunded status a refund was requested in', async () => {
    // The refund was requested while an earlier refund had made the transaction Partially Refunded; that
    // one was reversed since (Failed). With this one failed too, nothing is refunded: the transaction
    // showed `Partially Refunded` for good (the settlement audit, session 25).
    const { txnId, refundId } = await refundRequested('Partially Refunded');
    const [{ merchant_id: merchantId }] = await db.query(`SELECT merchant_id FROM transactions WHERE id = $1`, [txnId]);
    await db.query(
      `INSERT INTO refunds (vid, merchant_id, transaction_id, kind, amount_minor, currency, status, previous_status,
         requested_at, timestamp, failure_message)
       VALUES ($1, $2, $3, 'refund', 500, 'USD', 'Failed', 'Captured', now() - interval '1 hour', now(), 'reversed')`,
      [newVid(), merchantId, txnId],
    );
    await batch.runBatch();
    const done = await state(txnId, refundId);
    expect(done).toMatchObject({ transaction: 'Refunded', refund: { status: 'Completed' } });
    fake.settleRefund(done.refund.processor_refund_id as string, 'failed', 'expired_or_canceled_card');
    await recheckDue(refundId);
    await batch.runBatch();
    expect(await state(txnId, refundId)).toMatchObject({ transaction: 'Captured', refund: { status: 'Failed' } });
  });

  it('bounded: not read before its next re-check, and never after its window', async () => {
    const { txnId, refundId } = await refundRequested();
    await batch.runBatch();
    const { refund } = await state(txnId, refundId);
    const reads = () => fake.received('GET', `/v1/refunds/${refund.processor_refund_id as string}`).length;
    await batch.runBatch(); // not due yet
    expect(reads()).toBe(0);
    await db.query(
      `UPDATE refunds SET recheck_after = now() - interval '1 second', recheck_until = now() + interval '1 second'
        WHERE id = $1`,
      [refundId],
    );
    await batch.runBatch(); // due, the last read of its window
    expect(reads()).toBe(1);
    const [row] = await db.query(`SELECT recheck_after, recheck_until FROM refunds WHERE id = $1`, [refundId]);
    expect(row).toEqual({ recheck_after: null, recheck_until: null });
  });
});
