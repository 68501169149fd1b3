import { type TestingModule } from '@nestjs/testing';
import { loadConfig, type RetainConfig } from '@retain/config';
import { AdyenProcessor } from '@retain/processor';
import { QueueRegistry, createRedis } from '@retain/queues';
import { closeTestDb, insertAttemptRow, insertMerchantRow, insertTransactionRow, testDb } from '@retain/testing';
import type { Redis } from 'ioredis';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AttemptService } from '../src/attempts/attempt.service';
import { attemptTestingModule } from './attempt-testing-module';
import { TickProcessor } from '../src/scheduler/tick.processor';
// eslint-disable-next-line @nx/enforce-module-boundaries -- the Adyen wire fake, a test double of libs/processor
import { AdyenFake } from '../../../libs/processor/test/adyen-fake';

/**
 * Attempts through the retry worker and its reconciliation, on the real Postgres with the Adyen
 * adapter against its wire fake: a request Adyen refuses (4xx: here 403 010, raw card fields from a
 * credential without the role to send them), and a refusal that names no card brand.
 */
describe('retry worker with an Adyen account', () => {
  let mod: TestingModule;
  let db: DataSource;
  let redis: Redis;
  let queues: QueueRegistry;
  let attempts: AttemptService;
  let tick: TickProcessor;
  let merchantId: string;
  const fake = new AdyenFake();
  const config: RetainConfig = { ...loadConfig('retry-worker'), retryTimeScale: 1 };

  beforeAll(async () => {
    const base = await fake.start();
    // The account says it may send card numbers; Adyen's credential lacks the role (403, 010).
    fake.rawCardDataAllowed = false;
    const adyen = new AdyenProcessor(
      {
        api_key: fake.apiKey,
        merchant_account: fake.merchantAccount,
        checkout_url: `${base}/v71`,
        raw_card_data: true,
      },
      { timeoutMs: 2000, trustedCa: fake.ca! },
    );
    db = await testDb();
    redis = createRedis(config.redisUrl);
    queues = new QueueRegistry(redis, config.queuePrefix);
    mod = await attemptTestingModule(db, queues, config, adyen);
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

  it('the attempt leaves `unknown`: settled as not charged once the lookup window passed, and the schedule goes on', async () => {
    const t = await insertTransactionRow(db, merchantId, { card: '4111111111111111' });
    const a = await insertAttemptRow(db, t);
    // No decision from a charge is `unknown` at first, whatever the error.
    expect(await attempts.run(a.id)).toBe('unknown');
    const sent = fake.received('POST', /^\/v71\/payments$/).filter((r) => r.headers['idempotency-key'] === a.vid);
    expect(sent.length).toBeGreaterThanOrEqual(1);
    expect(fake.payments.size).toBe(0);

    // The reconciliation replays the request under its key past RECONCILE_NOT_FOUND_AFTER: Adyen's
    // answer is the same refusal, so nothing was charged and the attempt is settled.
    await db.query(`UPDATE attempts SET prepared_at = $2, lookup_after = now() WHERE id = $1`, [
      a.id,
      new Date(Date.now() - config.reconcileNotFoundMs - 60_000),
    ]);
    await tick.process();
    const [row] = await db.query(`SELECT state, status, response_code, message FROM attempts WHERE id = $1`, [a.id]);
    expect(row).toMatchObject({ state: 'error', status: 'Failed', response_code: '96' });
    const [txn] = await db.query(`SELECT status, next_attempt_at FROM transactions WHERE id = $1`, [t.id]);
    expect(txn.status).toBe('In Retry');
    expect(txn.next_attempt_at).not.toBeNull();
    expect(fake.payments.size).toBe(0);
    // The card number is never in what the attempt recorded.
    expect(JSON.stringify(row)).not.toContain('4111111111111111');
  });

  it('a refusal naming no brand, of a Mastercard card known from its BIN: its advice code 03 is read (Hard Failure)', async () => {
    const pan = '5555555555554444';
    fake.script(pan, {
      refusalReason: 'Refused',
      refusalReasonCode: '2',
      refusalReasonRaw: '05 : Do not honor',
      merchantAdviceCode: '03: Do not try again',
      brand: null,
    });
    fake.rawCardDataAllowed = true;
    try {
      const t = await insertTransactionRow(db, merchantId, { card: pan });
      // The review named the card's network from its BIN (the fixture's default is visa).
      await db.query(`UPDATE transactions SET card_network = 'mastercard' WHERE id = $1`, [t.id]);
      const a = await insertAttemptRow(db, t);
      expect(await attempts.run(a.id)).toBe('declined');
      const [row] = await db.query(
        `SELECT response_code, merchant_advice_code, auth_code_description FROM attempts WHERE id = $1`,
        [a.id],
      );
      expect([row.response_code, row.merchant_advice_code]).toEqual(['05', '03']);
      expect(row.auth_code_description).toBe('Hard Failure');
      const [txn] = await db.query(`SELECT status, card_network FROM transactions WHERE id = $1`, [t.id]);
      expect(txn).toEqual({ status: 'Cancelled', card_network: 'mastercard' });
    } finally {
      fake.rawCardDataAllowed = false;
    }
  });

  it('an unknown attempt prepared 25 h ago is never replayed (Adyen keeps keys 31 days at least, then charges anew): unknown, the operator alert', async () => {
    const t = await insertTransactionRow(db, merchantId, { card: '4111111111111111' });
    const a = await insertAttemptRow(db, t, {
      state: 'unknown',
      preparedAt: new Date(Date.now() - 25 * 3_600_000),
      responseCode: '96',
      authCodeDescription: 'Soft Failure',
    });
    await tick.process();
    const sent = fake.received('POST', /^\/v71\/payments$/).filter((r) => r.headers['idempotency-key'] === a.vid);
    const [row] = await db.query(`SELECT state, alerted_at FROM attempts WHERE id = $1`, [a.id]);
    // Adyen has no lookup by reference: without a replay the attempt stays unknown, and the alert fires.
    expect({ replays: sent.length, state: row.state, alerted: row.alerted_at !== null }).toEqual({
      replays: 0,
      state: 'unknown',
      alerted: true,
    });
  });
});
