import { type TestingModule } from '@nestjs/testing';
import { loadConfig, type RetainConfig } from '@retain/config';
import { PgSandboxLedger, SandboxProcessor, type PaymentProcessor } from '@retain/processor';
import { QueueRegistry, createRedis } from '@retain/queues';
import { closeTestDb, insertAttemptRow, insertMerchantRow, insertTransactionRow, testDb } from '@retain/testing';
import type { Redis } from 'ioredis';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReconcileService } from '../src/reconcile/reconcile.service';
import { attemptTestingModule } from './attempt-testing-module';

// The scale-out audit (session 25): the tick reconciles before it schedules, and the reconciliation
// looked up to 200 attempts one after another, each up to PROCESSOR_TIMEOUT. One merchant's processor
// that hangs held every tick of every replica for over an hour, and every merchant's due attempts with it.
describe('the reconciliation pass keeps to a time budget (a tick), the rest waits for the next tick', () => {
  let mod: TestingModule;
  let db: DataSource;
  let redis: Redis;
  let queues: QueueRegistry;
  const lookedUp: string[] = [];
  const config: RetainConfig = { ...loadConfig('retry-worker'), retryTimeScale: 1, tickMs: 500 };

  beforeAll(async () => {
    db = await testDb();
    redis = createRedis(config.redisUrl);
    queues = new QueueRegistry(redis, config.queuePrefix);
    const sandbox = new SandboxProcessor(new PgSandboxLedger(db));
    // A processor whose every lookup takes 400 ms (one that hangs, scaled down).
    const slow: PaymentProcessor = Object.assign(Object.create(sandbox) as SandboxProcessor, {
      lookupCharge: async (...args: Parameters<SandboxProcessor['lookupCharge']>) => {
        await new Promise((resolve) => setTimeout(resolve, 400));
        lookedUp.push(args[0]);
        return sandbox.lookupCharge(...args);
      },
    });
    mod = await attemptTestingModule(db, queues, config, slow);
  });
  afterAll(async () => {
    await mod?.close();
    await queues?.close();
    redis?.disconnect();
    await closeTestDb();
  });

  it('a pass over 10 slow lookups stops after its budget; the next pass takes other attempts', async () => {
    const merchantId = await insertMerchantRow(db);
    const vids: string[] = [];
    for (let i = 0; i < 10; i++) {
      const t = await insertTransactionRow(db, merchantId, { status: 'In Retry', card: '4000000000000002' });
      vids.push((await insertAttemptRow(db, t, { state: 'unknown', preparedAt: new Date() })).vid);
    }
    const reconciler = mod.get(ReconcileService);
    await reconciler.reconcile();
    const first = lookedUp.filter((k) => vids.includes(k));
    // At least one lookup per pass (progress), and far fewer than all ten (the budget is 1 s: ~3).
    expect(first.length).toBeGreaterThanOrEqual(1);
    expect(first.length).toBeLessThan(6);
    lookedUp.length = 0;
    await reconciler.reconcile();
    const second = lookedUp.filter((k) => vids.includes(k));
    expect(second.length).toBeGreaterThanOrEqual(1);
    expect(second.filter((k) => first.includes(k))).toEqual([]);
  });
});
