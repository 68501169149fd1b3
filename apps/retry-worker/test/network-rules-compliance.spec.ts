import { type TestingModule } from '@nestjs/testing';
import { loadConfig, type RetainConfig } from '@retain/config';

import { RetainMetrics } from '@retain/platform';
import { PgSandboxLedger, SandboxProcessor } from '@retain/processor';
import { QueueRegistry, createRedis } from '@retain/queues';
import { AttemptState, cardLimitsNow } from '@retain/recovery';
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

/**
 * network-rules.md on the real Postgres: what the card history (attempts, original declines) makes
 * of a forced deposit, of a 1A / 70 on American Express and Discover, and of a decline recorded
 * after a dated rule changed.
 */
describe('network rules through the card history', () => {
  let mod: TestingModule;
  let db: DataSource;
  let redis: Redis;
  let queues: QueueRegistry;
  let attempts: AttemptService;
  const config: RetainConfig = { ...loadConfig('retry-worker'), retryTimeScale: 1 };

  beforeAll(async () => {
    db = await testDb();
    redis = createRedis(config.redisUrl);
    queues = new QueueRegistry(redis, config.queuePrefix);
    const processor = new SandboxProcessor(new PgSandboxLedger(db));
    mod = await attemptTestingModule(db, queues, config, processor, new RetainMetrics('retry-worker'));
    attempts = mod.get(AttemptService);
  });
  afterAll(async () => {
    await mod?.close();
    await queues?.close();
    redis?.disconnect();
    await closeTestDb();
  });

  const cardHmacOf = async (txnId: string): Promise<string> =>
    (await db.query(`SELECT card_hmac FROM transactions WHERE id = $1`, [txnId]))[0].card_hmac;
  /** The network limits for an attempt of `txnId` on its card now. */
  const limitsNow = async (merchantId: string, txnId: string, network: string) =>
    cardLimitsNow(
      db,
      { merchantId, cardHmac: await cardHmacOf(txnId), network, dataVersion: null },
      { amountMinor: 1999n, exceptAttemptId: null, transactionId: txnId },
      new Date(),
      1,
    );
  const charges = async (vid: string): Promise<number> =>
    (await db.query(`SELECT count(*)::int AS n FROM sandbox_operations WHERE idempotency_key = $1`, [vid]))[0].n;

  it.each([
    ['an issuer approval restarts the count', false, true],
    ['a forced deposit (captured without authorization) does not', true, false],
  ])('Visa, 20 declines then a capture: %s', async (_name, forced, allowed) => {
    const merchantId = await insertMerchantRow(db);
    const card = '4000000000000002';
    const other = await insertTransactionRow(db, merchantId, { card });
    const declinedAt = new Date(Date.now() - 2 * 86_400_000);
    for (let n = 1; n <= 20; n++)
      await insertAttemptRow(db, other, {
        retryNumber: n,
        state: 'declined',
        preparedAt: declinedAt,
        processedAt: declinedAt,
        responseCode: '05',
        authCodeDescription: 'Soft Failure',
      });
    const capturedAt = new Date(Date.now() - 86_400_000);
    const captured = await insertAttemptRow(db, other, {
      retryNumber: 21,
      state: 'captured',
      preparedAt: capturedAt,
      processedAt: capturedAt,
      responseCode: '00',
    });
    await db.query(`UPDATE attempts SET status = 'Captured', forced_deposit = $2 WHERE id = $1`, [captured.id, forced]);
    // Another transaction of the merchant on the same card.
    const t = await insertTransactionRow(db, merchantId, { card });
    expect((await limitsNow(merchantId, t.id, 'visa')).allowed).toBe(allowed);
  });

  it.each([
    ['amex', '378282246310005', '1A'],
    ['amex', '378282246310005', '70'],
    ['discover', '6011111111111117', '1A'],
    ['discover', '6011111111111117', '70'],
  ])(
    '%s, %s declined %s: the transaction stops and no other transaction charges the card',
    async (network, card, code) => {
      const merchantId = await insertMerchantRow(db);
      const first = await insertTransactionRow(db, merchantId, { card });
      const second = await insertTransactionRow(db, merchantId, { card });
      await db.query(`UPDATE transactions SET card_network = $2 WHERE merchant_id = $1`, [merchantId, network]);
      const a = await insertAttemptRow(db, first);
      await setSandboxCharge(db, a.vid, { outcome: 'declined', responseCode: code });
      expect(await attempts.run(a.id)).toBe('declined');
      const [row] = await db.query(
        `SELECT t.status, a.auth_code_description FROM transactions t JOIN attempts a ON a.transaction_id = t.id
        WHERE t.id = $1`,
        [first.id],
      );
      expect(row).toEqual({ status: 'Cancelled', auth_code_description: 'Hard Failure' });
      // The second transaction's attempt: blocked for good on this card, never charged.
      const b = await insertAttemptRow(db, second);
      expect(await limitsNow(merchantId, second.id, network)).toMatchObject({ allowed: false, permanently: true });
      expect(await attempts.run(b.id)).toBe('nothing to do');
      expect(await charges(b.vid)).toBe(0);
      expect((await db.query(`SELECT status FROM transactions WHERE id = $1`, [second.id]))[0].status).toBe(
        'Cancelled',
      );
    },
  );

  it('a Visa 57 declined before 25 Oct 2026 but recorded after it: read as the 05 of its day, no card block', async () => {
    // The outcome of an attempt charged on 24 Oct 2026 is learned later (a lookup of an unknown outcome).
    expect(Date.now()).toBeGreaterThan(Date.parse('2026-10-25T00:00:00Z'));
    const merchantId = await insertMerchantRow(db);
    const card = '4000000000000002';
    const first = await insertTransactionRow(db, merchantId, { card });
    const a = await insertAttemptRow(db, first, { state: 'unknown', preparedAt: new Date('2026-10-24T23:00:00Z') });
    await db.transaction((m) =>
      attempts.record(
        m,
        a.id,
        {
          outcome: 'declined',
          responseCode: '57',
          merchantAdviceCode: null,
          network: 'visa',
          processorTransactionId: 'sbx_57',
          message: 'Declined',
        },
        AttemptState.Unknown,
      ),
    );
    const [row] = await db.query(`SELECT state, auth_code_description FROM attempts WHERE id = $1`, [a.id]);
    expect(row).toEqual({ state: 'declined', auth_code_description: 'Soft Failure' });
    // Another transaction on the card: no category-1 block from that decline.
    const second = await insertTransactionRow(db, merchantId, { card });
    expect((await limitsNow(merchantId, second.id, 'visa')).allowed).toBe(true);
  });
});
