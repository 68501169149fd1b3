import { Test, type TestingModule } from '@nestjs/testing';
import { loadConfig } from '@retain/config';
import { RETAIN_CONFIG } from '@retain/platform';
import { PgSandboxLedger, SandboxProcessor, TRANSACTION_PROCESSORS, fixedProcessor } from '@retain/processor';
import { OutboxRelay, QueueRegistry, createRedis } from '@retain/queues';
import { closeTestDb, insertAttemptRow, insertMerchantRow, insertTransactionRow, testDb } from '@retain/testing';
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

  beforeAll(async () => {
    db = await testDb();
    redis = createRedis(config.redisUrl);
    queues = new QueueRegistry(redis, config.queuePrefix);
    mod = await Test.createTestingModule({
      providers: [
        RefundBatchService,
        { provide: DataSource, useValue: db },
        { provide: RETAIN_CONFIG, useValue: config },
        { provide: OutboxRelay, useValue: new OutboxRelay(db, queues) },
        { provide: TRANSACTION_PROCESSORS, useValue: fixedProcessor(new SandboxProcessor(new PgSandboxLedger(db))) },
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
});
