import { type TestingModule } from '@nestjs/testing';
import { loadConfig, type RetainConfig } from '@retain/config';
import { STRIPE_KEY_METADATA, StripeProcessor } from '@retain/processor';
import { QueueRegistry, createRedis } from '@retain/queues';
import { closeTestDb, insertAttemptRow, insertMerchantRow, insertTransactionRow, testDb } from '@retain/testing';
import type { Redis } from 'ioredis';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AttemptService } from '../src/attempts/attempt.service';
import { attemptTestingModule } from './attempt-testing-module';
import { TickProcessor } from '../src/scheduler/tick.processor';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the Stripe wire fake, a test double of libs/processor
import { StripeFake } from '../../../libs/processor/test/stripe-fake';

/**
 * An attempt whose first request Stripe answered with a 500 after the endpoint began executing: Stripe
 * saves that 500 under the Idempotency-Key (the attempt's vid) and replays it for 24 h, so a replay can
 * neither charge nor tell. The reconciliation must still settle it once no PaymentIntent shows under the
 * key for RECONCILE_NOT_FOUND_AFTER after the first request, not 24 h later; never charging twice.
 */
describe('retry worker with a Stripe account: a 500 Stripe saved under the attempt key', () => {
  let mod: TestingModule;
  let db: DataSource;
  let redis: Redis;
  let queues: QueueRegistry;
  let attempts: AttemptService;
  let tick: TickProcessor;
  let merchantId: string;
  const fake = new StripeFake('sk_test_retain_stored_500');
  const config: RetainConfig = { ...loadConfig('retry-worker'), retryTimeScale: 1 };

  beforeAll(async () => {
    const base = await fake.start();
    fake.rawCardDataAllowed = true;
    const stripe = new StripeProcessor(
      { secret_key: fake.secretKey, api_base: base, raw_card_data: true },
      { timeoutMs: 2000 },
    );
    db = await testDb();
    redis = createRedis(config.redisUrl);
    queues = new QueueRegistry(redis, config.queuePrefix);
    mod = await attemptTestingModule(db, queues, config, stripe);
    attempts = mod.get(AttemptService);
    tick = mod.get(TickProcessor);
    merchantId = await insertMerchantRow(db);
  });
  afterAll(async () => {
    await mod?.close();
    await queues?.close();
    redis?.disconnect();
    await fake.close();
    await closeTestDb();
  });

  const attemptRow = async (id: string) =>
    (await db.query(`SELECT state, status, response_code, last_sent_at FROM attempts WHERE id = $1`, [id]))[0];
  const intentsOf = (vid: string) =>
    [...fake.intents.values()].filter((s) => (s.pi.metadata as Record<string, string>)[STRIPE_KEY_METADATA] === vid);

  it('unknown at first (the search may lag), settled not charged RECONCILE_NOT_FOUND_AFTER after the first request', async () => {
    const t = await insertTransactionRow(db, merchantId, { card: '4111111111111111' });
    const a = await insertAttemptRow(db, t);
    fake.failExecuting(1, 'none');
    expect(await attempts.run(a.id)).toBe('unknown');
    const sent = fake.received('POST', '/v1/payment_intents').filter((r) => r.headers['idempotency-key'] === a.vid);
    // The charge, then the lookup's replay under the same key, answered with the saved 500.
    expect(sent.length).toBeGreaterThanOrEqual(2);
    expect(intentsOf(a.vid)).toHaveLength(0);
    // The replay ran nothing: it is not a request the not-found clock counts from.
    expect((await attemptRow(a.id)).last_sent_at).toBeNull();

    // Right after the first request nothing is concluded (Stripe's search lags up to about a minute).
    await db.query(`UPDATE attempts SET lookup_after = now() WHERE id = $1`, [a.id]);
    await tick.process();
    expect(await attemptRow(a.id)).toMatchObject({ state: 'unknown', last_sent_at: null });

    // RECONCILE_NOT_FOUND_AFTER after the first request, still no PaymentIntent under the key: not
    // charged, the schedule goes on (before, the replayed 500 kept it unknown for Stripe's 24 h).
    await db.query(`UPDATE attempts SET prepared_at = $2, lookup_after = now() WHERE id = $1`, [
      a.id,
      new Date(Date.now() - config.reconcileNotFoundMs - 60_000),
    ]);
    await tick.process();
    expect(await attemptRow(a.id)).toMatchObject({ state: 'error', status: 'Failed', response_code: '96' });
    const [txn] = await db.query(`SELECT status, next_attempt_at FROM transactions WHERE id = $1`, [t.id]);
    expect(txn.status).toBe('In Retry');
    expect(txn.next_attempt_at).not.toBeNull();
    expect(intentsOf(a.vid)).toHaveLength(0);
  });

  it('charged before the 500: the lookup finds the PaymentIntent under the key, captured once', async () => {
    const t = await insertTransactionRow(db, merchantId, { card: '4111111111111111' });
    const a = await insertAttemptRow(db, t);
    fake.failExecuting(1, 'succeeded');
    expect(await attempts.run(a.id)).toBe('approved');
    expect(await attemptRow(a.id)).toMatchObject({ state: 'captured' });
    expect(intentsOf(a.vid)).toHaveLength(1);
  });
});
