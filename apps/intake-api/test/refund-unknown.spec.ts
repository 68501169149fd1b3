import { Test, type TestingModule } from '@nestjs/testing';
import { loadConfig } from '@retain/config';
import { RefundsRepository } from '@retain/db';
import { OutboxRelay, QueueRegistry, createRedis } from '@retain/queues';
import { closeTestDb, insertAttemptRow, insertMerchantRow, insertTransactionRow, testDb } from '@retain/testing';
import type { Redis } from 'ioredis';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RefundRequestService } from '../src/refunds/refund-request.service';

// Issue 9, defect 1 on the refund-request path: a stop never closes "nothing charged" over an
// attempt whose outcome is unknown (service level, real Postgres).
describe('refund request: a stop while an attempt outcome is unknown', () => {
  let mod: TestingModule;
  let db: DataSource;
  let redis: Redis;
  let queues: QueueRegistry;
  let service: RefundRequestService;
  const config = loadConfig('intake-api');

  beforeAll(async () => {
    db = await testDb();
    redis = createRedis(config.redisUrl);
    queues = new QueueRegistry(redis, config.queuePrefix);
    mod = await Test.createTestingModule({
      providers: [
        RefundRequestService,
        { provide: DataSource, useValue: db },
        { provide: RefundsRepository, useValue: new RefundsRepository(db) },
        { provide: OutboxRelay, useValue: new OutboxRelay(db, queues) },
      ],
    }).compile();
    service = mod.get(RefundRequestService);
  });
  afterAll(async () => {
    await mod?.close();
    await queues?.close();
    redis?.disconnect();
    await closeTestDb();
  });

  it('stays Stop Requested with its stop refund open; no `refund completed` push', async () => {
    const merchantId = await insertMerchantRow(db);
    const t = await insertTransactionRow(db, merchantId);
    await insertAttemptRow(db, t, {
      state: 'unknown',
      preparedAt: new Date(Date.now() - 60_000),
      responseCode: '96',
      authCodeDescription: 'Soft Failure',
    });
    const r = await service.request(
      { id: merchantId, merchantVid: 'v', login: 'l' },
      { refunds: [{ id: t.merchantTxnId }] },
      false,
    );
    expect(r.status).toBe(200);
    const [row] = await db.query(`SELECT status FROM transactions WHERE id = $1`, [t.id]);
    expect(row.status).toBe('Stop Requested');
    const refunds = await db.query(`SELECT kind, status FROM refunds WHERE transaction_id = $1`, [t.id]);
    expect(refunds).toEqual([{ kind: 'stop', status: 'Processing' }]);
    const pushes = await db.query(`SELECT event_name FROM webhook_messages WHERE transaction_id = $1`, [t.id]);
    expect(pushes).toEqual([]);
  });

  it('an attempt made by the tick but never started (no in-flight mark) is dropped: the stop closes at once', async () => {
    const merchantId = await insertMerchantRow(db);
    const t = await insertTransactionRow(db, merchantId);
    // The tick made it and its job has not prepared it (queued, or its job failed for good): it never
    // reached the processor, and under the transaction's lock no worker can mark it in flight now.
    await insertAttemptRow(db, t);
    const r = await service.request(
      { id: merchantId, merchantVid: 'v', login: 'l' },
      { refunds: [{ id: t.merchantTxnId }] },
      false,
    );
    expect(r.status).toBe(200);
    expect({
      txn: (await db.query(`SELECT status, attempt_count FROM transactions WHERE id = $1`, [t.id]))[0],
      attempts: await db.query(`SELECT state FROM attempts WHERE transaction_id = $1`, [t.id]),
      refunds: await db.query(`SELECT kind, status FROM refunds WHERE transaction_id = $1`, [t.id]),
      pushes: await db.query(`SELECT event_name FROM webhook_messages WHERE transaction_id = $1`, [t.id]),
    }).toEqual({
      txn: { status: 'Stopped', attempt_count: 0 },
      attempts: [],
      refunds: [{ kind: 'stop', status: 'Completed' }],
      pushes: [{ event_name: 'refund completed' }],
    });
  });

  it('a prepared attempt (it may have reached the processor) is kept: the stop waits for it', async () => {
    const merchantId = await insertMerchantRow(db);
    const t = await insertTransactionRow(db, merchantId);
    await insertAttemptRow(db, t, { preparedAt: new Date() });
    const r = await service.request(
      { id: merchantId, merchantVid: 'v', login: 'l' },
      { refunds: [{ id: t.merchantTxnId }] },
      false,
    );
    expect(r.status).toBe(200);
    expect((await db.query(`SELECT status FROM transactions WHERE id = $1`, [t.id]))[0].status).toBe('Stop Requested');
    expect(await db.query(`SELECT state FROM attempts WHERE transaction_id = $1`, [t.id])).toEqual([
      { state: 'pending' },
    ]);
  });
});
