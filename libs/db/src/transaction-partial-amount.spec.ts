import { describe, expect, it } from 'vitest';
import { scratchDatabaseUrl } from '../test/scratch-database';
import { scratchMerchant } from '../test/scratch-merchant';
import { MIGRATIONS, createDataSource, dropDatabase, migrate, revertLast } from './data-source';
import { TransactionPartialAmount1801700000000 } from './migrations/1801700000000-TransactionPartialAmount';

// Migration TransactionPartialAmount on rows written before it: a transaction's partial_amount_minor is
// its own capture's part (the attempt whose processor_transaction_id it kept), never a second capture's.
describe('migration TransactionPartialAmount on existing captures (real Postgres)', () => {
  it("fills the kept capture's part, and nothing for a capture of the whole amount", async () => {
    const url = scratchDatabaseUrl('tpa');
    await migrate(url);
    const after = MIGRATIONS.length - MIGRATIONS.indexOf(TransactionPartialAmount1801700000000);
    for (let i = 0; i < after; i++) await revertLast(url);
    const db = createDataSource(url, 2);
    await db.initialize();
    try {
      const { merchantId, submissionId } = await scratchMerchant(db, 'tpa_');
      const txn = async (key: string, captured: string, kept: string): Promise<string> => {
        const [row]: { id: string }[] = await db.query(
          `INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, review_status,
             amount_minor, currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code,
             subscription_id, account_id, account, subscription, payment_method, card_kind,
             captured_amount_minor, processor_transaction_id)
           VALUES (md5($1), $2, $3, $1, 'Captured', 'passed', 1999, 'USD', now(), now(), now(), 'd', '51',
             's' || $1, 'a' || $1, '{}', '{}', '{}', 'pan', $4, $5)
           RETURNING id`,
          [key, merchantId, submissionId, captured, kept],
        );
        return row!.id;
      };
      const attempt = async (t: string, n: number, ptid: string, partial: string | null): Promise<void> => {
        await db.query(
          `INSERT INTO attempts (vid, retain_transaction_id, transaction_id, merchant_id, retry_number, state, status,
             scheduled_for, processed_at, amount_minor, currency, processor_transaction_id, partial_amount_minor)
           VALUES (md5($1::text || $2::text), md5($2::text || $1::text), $1::uuid, $3, $2::int, 'captured', 'Captured', now(), now(), 1999, 'USD', $4, $5)`,
          [t, n, merchantId, ptid, partial],
        );
      };
      // Half captured, then a second half found late (1998 captured in all): the kept part is 999.
      const twoHalves = await txn('tpa1', '1998', 'ch_kept1');
      await attempt(twoHalves, 1, 'ch_late1', '999');
      await attempt(twoHalves, 2, 'ch_kept1', '999');
      // The whole amount captured, then half found late: no partial authorization of its own.
      const whole = await txn('tpa2', '2998', 'ch_kept2');
      await attempt(whole, 1, 'ch_late2', '999');
      await attempt(whole, 2, 'ch_kept2', null);
      await migrate(url);
      const rows: { merchant_txn_id: string; partial_amount_minor: string | null }[] = await db.query(
        `SELECT merchant_txn_id, partial_amount_minor FROM transactions WHERE merchant_id = $1 ORDER BY merchant_txn_id`,
        [merchantId],
      );
      expect(rows).toEqual([
        { merchant_txn_id: 'tpa1', partial_amount_minor: '999' },
        { merchant_txn_id: 'tpa2', partial_amount_minor: null },
      ]);
    } finally {
      await db.destroy();
      await dropDatabase(url);
    }
  });
});
