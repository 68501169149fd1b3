import type { TestingModule } from '@nestjs/testing';
import { loadConfig, type RetainConfig } from '@retain/config';
import { PgSandboxLedger, SandboxProcessor } from '@retain/processor';
import { QueueRegistry, createRedis } from '@retain/queues';
import {
  ApiClient,
  closeTestDb,
  createMerchant,
  insertAttemptRow,
  insertTransactionRow,
  startApp,
  testDb,
  type RunningApp,
} from '@retain/testing';
import type { Redis } from 'ioredis';
import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AttemptService } from '../src/attempts/attempt.service';
import { attemptTestingModule } from './attempt-testing-module';

// decisions §8, README "Refunds and stops": a merchant's stop (POST /v1/retain/refunds, through the
// real intake-api) racing the retry worker's attempt of the same transaction, over and over. Whichever
// goes first, a charge made is never left unaccounted for: captured means a refund of it on its way,
// not charged means Stopped with the stop closed, and nothing is charged after the stop was accepted
// unless the attempt was already on its way.
describe('a stop racing the attempt in flight', () => {
  let api: RunningApp;
  let client: ApiClient;
  let mod: TestingModule;
  let db: DataSource;
  let redis: Redis;
  let queues: QueueRegistry;
  let attempts: AttemptService;
  let merchantId: string;
  const config: RetainConfig = { ...loadConfig('retry-worker'), retryTimeScale: 1 };

  beforeAll(async () => {
    db = await testDb();
    redis = createRedis(config.redisUrl);
    queues = new QueueRegistry(redis, config.queuePrefix);
    mod = await attemptTestingModule(db, queues, config, new SandboxProcessor(new PgSandboxLedger(db)));
    attempts = mod.get(AttemptService);
    api = await startApp('intake-api');
    const m = await createMerchant();
    client = new ApiClient(api.url, m.api_key);
    [{ id: merchantId }] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [m.login]);
  });
  afterAll(async () => {
    await api?.stop();
    await mod?.close();
    await queues?.close();
    redis?.disconnect();
    await closeTestDb();
  });

  it('whichever goes first, a capture is refunded and no capture is Stopped with nothing', async () => {
    const seen = { charged: 0, notCharged: 0 };
    for (let round = 0; round < 60; round++) {
      const t = await insertTransactionRow(db, merchantId, { status: 'In Retry', amountMinor: '1999' });
      const a = await insertAttemptRow(db, t, {});
      // Spread the interleavings (the invariants hold for all of them; the delays only vary which one
      // a round sees): the attempt starts at once or a few milliseconds after the stop went out.
      const run = async () => {
        await new Promise((r) => setTimeout(r, (round % 8) * 1.5));
        return attempts.run(a.id);
      };
      const [answer] = await Promise.all([
        client.request('POST', '/v1/retain/refunds', { refunds: [{ id: t.merchantTxnId }] }),
        run(),
      ]);
      expect(answer.status).toBe(200);
      const [charge] = await db.query(
        `SELECT result->>'outcome' AS outcome FROM sandbox_operations WHERE idempotency_key = $1`,
        [a.vid],
      );
      const [txn] = await db.query(`SELECT status, captured_amount_minor FROM transactions WHERE id = $1`, [t.id]);
      const refunds = await db.query(`SELECT kind, status, amount_minor FROM refunds WHERE transaction_id = $1`, [
        t.id,
      ]);
      const pending = await db.query(
        `SELECT state FROM attempts WHERE transaction_id = $1 AND state IN ('pending', 'unknown')`,
        [t.id],
      );
      const state = { round, charge: charge?.outcome ?? null, txn, refunds, pending };
      if (charge?.outcome === 'approved') {
        seen.charged++;
        expect(state).toMatchObject({
          txn: { status: 'Refund Requested', captured_amount_minor: '1999' },
          refunds: [{ kind: 'refund', status: 'Processing', amount_minor: '1999' }],
          pending: [],
        });
      } else {
        seen.notCharged++;
        expect(state).toMatchObject({
          txn: { status: 'Stopped', captured_amount_minor: null },
          refunds: [{ kind: 'stop', status: 'Completed' }],
          pending: [],
        });
      }
    }
    console.log('stop vs attempt', seen);
  }, 60_000);
});
