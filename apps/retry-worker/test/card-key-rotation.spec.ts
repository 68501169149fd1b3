import { randomBytes } from 'node:crypto';
import { type TestingModule } from '@nestjs/testing';
import { loadConfig, type RetainConfig } from '@retain/config';
import { CardKeysRepository } from '@retain/db';
import type { DataKey } from '@retain/domain';
import { PgSandboxLedger, SandboxProcessor } from '@retain/processor';
import { QueueRegistry, createRedis } from '@retain/queues';
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
import { AttemptService } from '../src/attempts/attempt.service';
import { attemptTestingModule } from './attempt-testing-module';

/**
 * A CARD_DATA_KEY rotation as the operator runs it (README "Rotating CARD_DATA_KEY"): transactions
 * sealed under the old key, re-sealed under a new first key (`card-keys reseal`), then the old key
 * dropped: the retry worker still charges them. Without the re-seal it cannot.
 */
describe('CARD_DATA_KEY rotation: the retry worker charges re-sealed cards with the old key dropped', () => {
  usePrivateDatabase('cardrot');
  let db: DataSource;
  let redis: Redis;
  let queues: QueueRegistry;
  let mod: TestingModule;
  let attempts: AttemptService;
  let merchantId: string;
  const old = loadConfig('cli').cardKeys;
  const next: DataKey = { id: `k${randomBytes(3).toString('hex')}`, key: randomBytes(32) };

  beforeAll(async () => {
    db = await testDb();
    const config: RetainConfig = { ...loadConfig('retry-worker'), retryTimeScale: 1, cardKeys: [next] };
    redis = createRedis(config.redisUrl);
    queues = new QueueRegistry(redis, config.queuePrefix);
    mod = await attemptTestingModule(db, queues, config, new SandboxProcessor(new PgSandboxLedger(db)));
    attempts = mod.get(AttemptService);
    merchantId = await insertMerchantRow(db);
  });
  afterAll(async () => {
    await mod?.close();
    await queues?.close();
    redis?.disconnect();
    await closeTestDb();
  });

  it('not re-sealed: a card sealed under a dropped key cannot be charged', async () => {
    const t = await insertTransactionRow(db, merchantId);
    const a = await insertAttemptRow(db, t);
    await expect(attempts.run(a.id)).rejects.toThrow(/data key dev is not configured/);
    // Never marked in flight: nothing went to the processor, and the customer's other charges are not
    // held back by a charge that cannot be (a prepared attempt stays pending until the sweep, ~52 min).
    const [row] = await db.query(`SELECT state, prepared_at FROM attempts WHERE id = $1`, [a.id]);
    expect(row).toEqual({ state: 'pending', prepared_at: null });
  });

  it('re-sealed under the new first key: charged with only the new key configured', async () => {
    const t = await insertTransactionRow(db, merchantId);
    const a = await insertAttemptRow(db, t);
    const counts = await new CardKeysRepository(db, [next, ...old]).reseal({ kinds: ['transaction_cards'] });
    expect(counts.transaction_cards.resealed).toBe(2); // this one and the first test's
    expect(await attempts.run(a.id)).toBe('approved');
    const [row] = await db.query(`SELECT status, card_key_id FROM transactions WHERE id = $1`, [t.id]);
    expect(row).toEqual({ status: 'Captured', card_key_id: next.id });
  });
});
