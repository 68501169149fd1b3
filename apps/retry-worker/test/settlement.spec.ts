import { loadConfig, type RetainConfig } from '@retain/config';
import {
  PgSandboxLedger,
  SandboxProcessor,
  type PaymentProcessor,
  type TransactionProcessors,
} from '@retain/processor';
import { applyRefundAnswer } from '@retain/recovery';
import {
  closeTestDb,
  insertAttemptRow,
  insertMerchantRow,
  insertRefundRow,
  insertTransactionRow,
  testDb,
  usePrivateDatabase,
} from '@retain/testing';
import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SettlementService } from '../src/settlement/settlement.service';

/** A processor that does not report settlement (the Stripe and Adyen adapters): no `settlementOf`. */
function withoutSettlement(p: PaymentProcessor): PaymentProcessor {
  return {
    name: 'no-settlement',
    limits: p.limits,
    charge: (req) => p.charge(req),
    lookupCharge: (key, original) => p.lookupCharge(key, original),
    refund: (req) => p.refund(req),
    detokenize: (token) => p.detokenize(token),
  };
}

/**
 * The settlement check on the real Postgres with the sandbox processor: one check() settles every
 * due capture, however many, and captures whose processor cannot report settlement (older, so
 * checked first) take no place from them.
 */
describe('settlement check: every due capture, in one pass', () => {
  // The check takes the Captured transactions of the whole database.
  usePrivateDatabase('stlpass');
  let db: DataSource;
  let service: SettlementService;
  let sandboxMerchant: string;
  let otherMerchant: string;
  /** How many times a check went to the processor that cannot report settlement. */
  let otherAsked = 0;
  const config: RetainConfig = { ...loadConfig('retry-worker'), retryTimeScale: 1 };

  /** `n` Captured transactions of the merchant, captured `daysAgo` days ago (the sandbox: settled since). */
  const captures = async (merchantId: string, n: number, daysAgo: number): Promise<void> => {
    const first = await insertTransactionRow(db, merchantId, { status: 'Captured', capturedMinor: '1999' });
    await db.query(
      `INSERT INTO transactions
       SELECT (jsonb_populate_record(t, jsonb_build_object(
                 'id', gen_random_uuid(),
                 'vid', left(md5(random()::text) || md5(random()::text), 40),
                 'merchant_txn_id', t.merchant_txn_id || '_' || i,
                 'subscription_id', t.subscription_id || '_' || i))).*
         FROM transactions t, generate_series(2, $2::int) i WHERE t.id = $1`,
      [first.id, n],
    );
    await db.query(
      `UPDATE transactions SET processor_transaction_id = 'ch_' || id, status_changed_at = now() - $2 * interval '1 day'
        WHERE merchant_id = $1 AND status = 'Captured' AND processor_transaction_id IS NULL`,
      [merchantId, daysAgo],
    );
  };
  const statuses = async (merchantId: string): Promise<Record<string, number>> =>
    Object.fromEntries(
      (
        await db.query(`SELECT status, count(*)::int AS n FROM transactions WHERE merchant_id = $1 GROUP BY status`, [
          merchantId,
        ])
      ).map((r: { status: string; n: number }) => [r.status, r.n]),
    );

  beforeAll(async () => {
    db = await testDb();
    sandboxMerchant = await insertMerchantRow(db);
    otherMerchant = await insertMerchantRow(db);
    const sandbox = new SandboxProcessor(new PgSandboxLedger(db));
    const other = withoutSettlement(sandbox);
    const processors: TransactionProcessors = {
      forTransaction: async (merchantId) => {
        if (merchantId !== otherMerchant) return sandbox;
        otherAsked++;
        return other;
      },
      forAccount: async () => sandbox,
    };
    service = new SettlementService(db, processors, config);
  });
  afterAll(async () => {
    await closeTestDb();
  });

  it('settles 1,000 due sandbox captures in one check, ahead of 1,000 that can never settle', async () => {
    // The captures that can never settle are older: the least recently checked, first in line.
    await captures(otherMerchant, 1000, 5);
    await captures(sandboxMerchant, 1000, 2);

    expect(await service.check()).toBe(1000);
    expect(await statuses(sandboxMerchant)).toEqual({ Settled: 1000 });
    expect(await statuses(otherMerchant)).toEqual({ Captured: 1000 });
    expect(otherAsked).toBe(1000);

    // A capture made later settles at the next check: the ones that never settle do not come first again.
    await captures(sandboxMerchant, 1, 2);
    expect(await service.check()).toBe(1);
    expect(await statuses(sandboxMerchant)).toEqual({ Settled: 1001 });
    expect(await statuses(otherMerchant)).toEqual({ Captured: 1000 });
    // Those were put back (a day): not asked about again meanwhile.
    expect(otherAsked).toBe(1000);
  });

  it('a capture back to Captured after a failed refund settles from the capture, not from the refund failure', async () => {
    const merchantId = await insertMerchantRow(db);
    const t = await insertTransactionRow(db, merchantId, { status: 'Refund Requested', capturedMinor: '1999' });
    // Captured two days ago by its attempt (the sandbox: settled at the next UTC midnight since).
    const twoDaysAgo = new Date(Date.now() - 2 * 86_400_000);
    const a = await insertAttemptRow(db, t, { state: 'captured', preparedAt: twoDaysAgo, processedAt: twoDaysAgo });
    await db.query(`UPDATE attempts SET status = 'Captured', processor_transaction_id = $2 WHERE id = $1`, [
      a.id,
      `sbx_${a.vid}`,
    ]);
    await db.query(`UPDATE transactions SET processor_transaction_id = $2, status_changed_at = $3 WHERE id = $1`, [
      t.id,
      `sbx_${a.vid}`,
      twoDaysAgo,
    ]);
    // The merchant's refund fails now: back to Captured (status_changed_at now).
    const refundId = await insertRefundRow(db, t, 'refund', '1999');
    await db.query(`UPDATE refunds SET previous_status = 'Captured' WHERE id = $1`, [refundId]);
    const failed = { outcome: 'failed' as const, processorRefundId: null, message: 'Refund rejected by the processor' };
    expect((await db.transaction((m) => applyRefundAnswer(m, refundId, failed)))?.txn?.status).toBe('Captured');
    await service.check();
    // Expected (README Settlement: from the next UTC midnight after the capture): Settled.
    expect(await statuses(merchantId)).toEqual({ Settled: 1 });
  });
});
