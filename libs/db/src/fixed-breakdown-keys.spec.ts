import { describe, expect, it } from 'vitest';
import { scratchDatabaseUrl } from '../test/scratch-database';
import { scratchMerchant } from '../test/scratch-merchant';
import { MIGRATIONS, createDataSource, dropDatabase, migrate, revertLast } from './data-source';
import { FixedBreakdownKeys1800100000100 } from './migrations/1800100000100-FixedBreakdownKeys';
import { ROLLUP } from './repositories/analytics.repository';

// Migration FixedBreakdownKeys on a database whose rollup the previous triggers kept: rows written the
// way the apps wrote them (a capture clearing auth_code_description, a payment method adopted after a
// decline) had their failures moved to new keys and their attempts left under the old ones. After the
// migration every transaction's figures are under one key per breakdown: its original decline's class,
// and the card and address it has (the backfill cannot know an earlier card), and each breakdown is the
// sum over the rows by those keys.
describe('migration FixedBreakdownKeys on rows the previous triggers counted (real Postgres)', () => {
  it('backfills the keys and recounts the four breakdowns from the rows', async () => {
    const url = scratchDatabaseUrl('bdk');
    await migrate(url);
    // Back to just before FixedBreakdownKeys: it and every later migration reverted.
    const after = MIGRATIONS.length - MIGRATIONS.indexOf(FixedBreakdownKeys1800100000100);
    for (let i = 0; i < after; i++) await revertLast(url);
    const db = createDataSource(url, 2);
    await db.initialize();
    try {
      const { merchantId, submissionId } = await scratchMerchant(db, 'bdk_');
      let n = 0;
      /** A transaction inserted pending review, then reviewed (as the review wrote it). */
      const txn = async (t: {
        code: string;
        description: string | null;
        review?: string;
        network: string;
        bin: string;
        country: string;
      }): Promise<string> => {
        n++;
        const [row]: { id: string }[] = await db.query(
          `INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, review_status,
             amount_minor, currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code,
             subscription_id, account_id, account, subscription, payment_method, card_kind, card_bin, card_network)
           VALUES (md5($1 || 'bdk'), $2, $3, $1, 'Failed', 'pending', 1000, 'USD', timestamptz '2026-11-20 10:00+00',
             timestamptz '2026-11-20 11:00+00', now(), 'd', $4, 's' || $1, 'a' || $1, '{}', '{}', $5::jsonb, 'pan', $6, $7)
           RETURNING id`,
          [
            `bdk${n}`,
            merchantId,
            submissionId,
            t.code,
            JSON.stringify({ billing_address: { country: t.country } }),
            t.bin,
            t.network,
          ],
        );
        if (t.review !== 'pending')
          await db.query(`UPDATE transactions SET review_status = $2, auth_code_description = $3 WHERE id = $1`, [
            row!.id,
            t.review ?? 'passed',
            t.description,
          ]);
        return row!.id;
      };
      /** An attempt written pending, then decided (as the retry worker does), with its transaction's update. */
      const attempt = async (txnId: string, retry: number, state: string, txnSet: string) => {
        const [a]: { id: string }[] = await db.query(
          `INSERT INTO attempts (vid, retain_transaction_id, transaction_id, merchant_id, retry_number, state,
             scheduled_for, amount_minor, currency)
           SELECT md5(t.id::text || $2::text), md5(t.id::text || $2::text || 'r'), t.id, t.merchant_id, $2::int, 'pending', now(),
             t.amount_minor, t.currency FROM transactions t WHERE t.id = $1 RETURNING id`,
          [txnId, retry],
        );
        await db.query(
          `UPDATE attempts SET state = $2, processed_at = timestamptz '2026-11-21 10:00+00' WHERE id = $1`,
          [a!.id, state],
        );
        await db.query(`UPDATE transactions SET ${txnSet} WHERE id = $1`, [txnId]);
      };

      // T1: a 51 on Visa 411111 (US), declined once, then captured (the capture clears the class).
      const t1 = await txn({
        code: '51',
        description: 'Soft Failure',
        network: 'visa',
        bin: '41111111',
        country: 'us',
      });
      await attempt(t1, 1, 'declined', `status = 'In Retry', auth_code_description = 'Soft Failure'`);
      await attempt(t1, 2, 'captured', `status = 'Captured', auth_code_description = NULL`);
      // T2: a 05 on Visa 400000 (US): a 46 on its first attempt (hard), then the account's Mastercard 555555
      // (GB) adopted and captured.
      const t2 = await txn({
        code: '05',
        description: 'Soft Failure',
        network: 'visa',
        bin: '40000000',
        country: 'US',
      });
      await attempt(t2, 1, 'declined', `status = 'In Retry', auth_code_description = 'Hard Failure'`);
      await db.query(
        `UPDATE transactions SET card_network = 'mastercard', card_bin = '55555555',
           payment_method = '{"billing_address": {"country": "GB"}}' WHERE id = $1`,
        [t2],
      );
      await attempt(t2, 2, 'captured', `status = 'Captured', auth_code_description = NULL`);
      // T3: a 14 (hard), cancelled by the review without attempts. T4: not reviewed yet. T5: rejected.
      const t3 = await txn({
        code: '14',
        description: 'Hard Failure',
        network: 'visa',
        bin: '41111111',
        country: 'US',
      });
      await db.query(`UPDATE transactions SET status = 'Cancelled' WHERE id = $1`, [t3]);
      await txn({ code: '51', description: null, review: 'pending', network: 'amex', bin: '37144900', country: 'CA' });
      await txn({ code: '51', description: null, review: 'rejected', network: 'visa', bin: '41111111', country: 'US' });

      const breakdown = async (dim: string) =>
        (
          await db.query(
            `SELECT key, sum(failed_count)::int AS failed, sum(recovered_count)::int AS recovered,
                    sum(attempts)::int AS attempts
               FROM (${ROLLUP}) r WHERE merchant_id = $1 AND dim = $2
              GROUP BY key HAVING sum(failed_count) <> 0 OR sum(attempts) <> 0 ORDER BY key`,
            [merchantId, dim],
          )
        ).map((r: { key: string; failed: number; recovered: number; attempts: number }) => [
          r.key,
          r.failed,
          r.recovered,
          r.attempts,
        ]);
      // The previous triggers: the captured ones' failures moved, their attempts did not.
      expect(await breakdown('decline_class')).toEqual([
        ['hard', 1, 1, 1],
        ['soft', 0, 1, 3],
        ['unclassified', 3, 0, 0],
      ]);

      await migrate(url);

      expect(await breakdown('decline_class')).toEqual([
        ['hard', 1, 0, 0], // T3
        ['soft', 2, 2, 4], // T1, T2: their original declines (51, 05) are soft
        ['unclassified', 1, 0, 0], // T4, not reviewed yet
      ]);
      expect(await breakdown('card_network')).toEqual([
        ['amex', 1, 0, 0],
        ['mastercard', 1, 1, 2], // T2 as it is now: the backfill cannot know its first card
        ['visa', 2, 1, 2],
      ]);
      expect(await breakdown('bin')).toEqual([
        ['371449', 1, 0, 0],
        ['411111', 2, 1, 2],
        ['555555', 1, 1, 2],
      ]);
      expect(await breakdown('country')).toEqual([
        ['CA', 1, 0, 0],
        ['GB', 1, 1, 2],
        ['US', 2, 1, 2],
      ]);
      // The other breakdowns were right, and stay as they were.
      expect(await breakdown('decline_code')).toEqual([
        ['05', 1, 1, 2],
        ['14', 1, 0, 0],
        ['51', 2, 1, 2],
      ]);

      // From now on the keys stay: a later change of the card or class moves nothing.
      await db.query(
        `UPDATE transactions SET card_network = 'visa', card_bin = '42424242', auth_code_description = 'Hard Failure',
           payment_method = '{}' WHERE id = $1`,
        [t1],
      );
      expect(await breakdown('decline_class')).toEqual([
        ['hard', 1, 0, 0],
        ['soft', 2, 2, 4],
        ['unclassified', 1, 0, 0],
      ]);
      expect(await breakdown('bin')).toEqual([
        ['371449', 1, 0, 0],
        ['411111', 2, 1, 2],
        ['555555', 1, 1, 2],
      ]);
    } finally {
      await db.destroy();
      await dropDatabase(url);
    }
  });
});
