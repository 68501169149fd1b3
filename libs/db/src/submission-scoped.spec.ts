import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DataSource } from 'typeorm';
import { scratchMerchant } from '../test/scratch-merchant';
import { createDataSource } from './data-source';
import { SubmissionScopedTransactions1799000000000 } from './migrations/1799000000000-SubmissionScopedTransactions';

// Migration SubmissionScopedTransactions: one foreign key (submission_id, merchant_id) instead of one
// on each column. It must refuse what the two refused, and more: a row of another merchant's submission.
describe("a transaction's submission and merchant (one foreign key, real Postgres)", () => {
  let db: DataSource;
  let a = { merchantId: '', submissionId: '' };
  let b = { merchantId: '', submissionId: '' };

  beforeAll(async () => {
    db = createDataSource(process.env.DATABASE_URL!, 2);
    await db.initialize();
    a = await scratchMerchant(db, 'scoped_a_');
    b = await scratchMerchant(db, 'scoped_b_');
  });
  afterAll(async () => {
    await db.query(`DELETE FROM transactions WHERE merchant_id = ANY($1::uuid[])`, [[a.merchantId, b.merchantId]]);
    await db.destroy();
  });

  const insert = (merchantId: string, submissionId: string, id: string): Promise<unknown> =>
    db.query(
      `INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, amount_minor, currency,
         failed_at, submitted_ts, status_changed_at, division_number, auth_code, subscription_id, account_id,
         account, subscription, payment_method, card_kind)
       VALUES (md5(random()::text), $1, $2, $3, 'Failed', 100, 'USD', now(), now(), now(), 'd', '51', $3, $3,
         '{}', '{}', '{}', 'clear')`,
      [merchantId, submissionId, id],
    );
  const refusal = (p: Promise<unknown>): Promise<unknown> =>
    p.then(
      () => null,
      (e: { code?: string; constraint?: string }) => ({ code: e.code, constraint: e.constraint }),
    );
  const fk = { code: '23503', constraint: 'transactions_submission_merchant_fkey' };

  it("accepts a row of its merchant's submission, refuses another merchant's submission or none", async () => {
    expect(await refusal(insert(a.merchantId, a.submissionId, 'scoped_ok'))).toBeNull();
    expect(await refusal(insert(b.merchantId, a.submissionId, 'scoped_cross'))).toEqual(fk);
    expect(await refusal(insert(a.merchantId, '00000000-0000-0000-0000-000000000000', 'scoped_none'))).toEqual(fk);
    expect(await refusal(insert('00000000-0000-0000-0000-000000000000', a.submissionId, 'scoped_nomerchant'))).toEqual(
      fk,
    );
  });

  it('keeps a submission that has transactions', async () => {
    expect(await refusal(db.query(`DELETE FROM submissions WHERE id = $1`, [a.submissionId]))).toEqual(fk);
  });

  it('runs again after an interruption (its steps are outside one transaction)', async () => {
    const qr = db.createQueryRunner();
    try {
      await new SubmissionScopedTransactions1799000000000().up(qr);
      const [{ n }] = await qr.query(
        `SELECT count(*)::int AS n FROM pg_constraint WHERE conrelid = 'transactions'::regclass AND contype = 'f'
           AND conname IN ('transactions_submission_merchant_fkey', 'transactions_merchant_id_fkey',
                           'transactions_submission_id_fkey')`,
      );
      expect(n).toBe(1);
    } finally {
      await qr.release();
    }
  });
});
