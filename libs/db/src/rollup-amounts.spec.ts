import { describe, expect, it } from 'vitest';
import { useScratchMerchant } from '../test/scratch-merchant';
import { AnalyticsRepository } from './repositories/analytics.repository';

// Security audit, sixteenth session: amounts the API accepts (up to 2^53 - 1 minor units each) summed
// past bigint in the rollup's fold ("bigint out of range"), and the fold, shared by every merchant,
// failed on every tick from then on. The rollup's amounts are numeric: any sum of accepted amounts folds.
describe('the analytics rollup folds any sum of accepted amounts (real Postgres)', () => {
  const scratch = useScratchMerchant('rollamt_', ['analytics_rollup_pending', 'analytics_rollup']);
  const MAX = 9007199254740991n; // Number.MAX_SAFE_INTEGER: above the largest amount_minor intake accepts (10^15 - 1)

  const submitBatch = (batch: number) =>
    scratch.db.query(
      `INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, review_status, amount_minor,
         currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code, subscription_id,
         account_id, account, subscription, payment_method, card_kind)
       SELECT md5(g::text || 'rollamt' || $3), $1, $2, 'r' || $3 || '-' || g, 'Failed', 'pending', $4::bigint, 'USD',
         timestamptz '2026-11-20 10:00:00+00', timestamptz '2026-11-20 11:00:00+00', now(), 'd', '05',
         's' || $3 || '-' || g, 'a' || g, '{}'::jsonb, '{}'::jsonb, '{}'::jsonb, 'pan'
       FROM generate_series(1, 1000) AS g`,
      [scratch.merchantId, scratch.submissionId, batch, MAX.toString()],
    );

  it('two batches of 1000 transactions at the largest amount: folded, the total exact', async () => {
    const { db, merchantId } = scratch;
    // Each statement's contribution fits in bigint (1000 x MAX < 2^63); the two together do not.
    await submitBatch(1);
    await submitBatch(2);
    for (;;) {
      const [{ n }] = await db.query(`SELECT count(*)::int AS n FROM analytics_rollup_pending WHERE merchant_id = $1`, [
        merchantId,
      ]);
      if (n === 0) break;
      await AnalyticsRepository.fold(db);
    }
    const [row] = await db.query(
      `SELECT failed_count::text, failed_amount::text FROM analytics_rollup
        WHERE merchant_id = $1 AND dim = 'all' AND currency = 'USD'`,
      [merchantId],
    );
    expect(row).toEqual({ failed_count: '2000', failed_amount: (2000n * MAX).toString() });
  });
});
