import { describe, expect, it } from 'vitest';
import { useScratchMerchant } from '../test/scratch-merchant';
import { txnRows } from './migrations/1797400000100-AnalyticsRollup';

// Migration GroupedIntakeRollup: the transactions' INSERT trigger adds a statement's rows up by the
// values the rollup reads before it expands them into dimensions. Its appended contributions must
// be what the per-row expansion (the rollup's definition, txnRows) gives for the same rows.
describe('the rollup trigger of a multi-row INSERT of transactions (real Postgres)', () => {
  const scratch = useScratchMerchant('rollup_', ['analytics_rollup_pending']);

  it('appends the per-row expansion, summed: every dimension, day, currency, status and fee', async () => {
    // 600 rows in ONE statement, mixing every value the rollup reads: two days, two currencies, decline
    // codes (one empty), classes, networks (one null), BINs, countries (one missing), review
    // statuses, a Stopped status and network fees.
    await scratch.db.query(
      `INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, review_status, amount_minor,
         currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code, auth_code_description,
         card_network, card_bin, subscription_id, account_id, account, subscription, payment_method, card_kind,
         naive_network_fees_minor, network_fees_minor)
       SELECT md5(g::text || 'rollup'), $1, $2, 'r' || g,
         CASE WHEN g % 11 = 0 THEN 'Stopped' ELSE 'Failed' END,
         CASE WHEN g % 7 = 0 THEN 'rejected' WHEN g % 2 = 0 THEN 'passed' ELSE 'pending' END,
         100 + g, CASE WHEN g % 3 = 0 THEN 'EUR' ELSE 'USD' END,
         now(), timestamptz '2026-11-20 23:00:00+00' + ((g % 2) * interval '2 hours'), now(), 'd',
         (ARRAY['51', '05', '', '54'])[1 + g % 4], (ARRAY['Soft Failure', 'Hard Failure', NULL])[1 + g % 3],
         (ARRAY['Visa', 'mastercard', NULL, ''])[1 + g % 4], (ARRAY['411111', '555555', '40000012'])[1 + g % 3],
         's' || g, 'a' || g, '{}'::jsonb, '{}'::jsonb,
         CASE g % 4 WHEN 0 THEN '{}'::jsonb
           ELSE jsonb_build_object('billing_address', jsonb_build_object('country', (ARRAY['us', 'DE', 'fr'])[1 + g % 3])) END,
         'pan', CASE WHEN g % 5 = 0 THEN 50 END, CASE WHEN g % 5 = 0 THEN 10 END
       FROM generate_series(1, 600) AS g`,
      [scratch.merchantId, scratch.submissionId],
    );
    const counters = ['failed_count', 'failed_amount', 'stopped_count', 'network_fees_avoided'];
    const grouped = (from: string) =>
      `SELECT day::text, currency, dim, key, ${counters.map((c) => `sum(${c})::bigint::text AS ${c}`).join(', ')}
         FROM (${from}) x WHERE merchant_id = $1 AND key IS NOT NULL
        GROUP BY day, currency, dim, key
       HAVING ${counters.map((c) => `sum(${c}) <> 0`).join(' OR ')}
        ORDER BY day, currency, dim, key`;
    const appended = await scratch.db.query(grouped(`SELECT * FROM analytics_rollup_pending`), [scratch.merchantId]);
    const perRow = await scratch.db.query(
      grouped(
        txnRows(
          `(SELECT * FROM transactions WHERE merchant_id = '${scratch.merchantId}')`,
          '1',
          `
         coalesce(t.naive_network_fees_minor - t.network_fees_minor, 0) AS network_fees_avoided,`,
        ),
      ),
      [scratch.merchantId],
    );
    expect(perRow.length).toBeGreaterThan(30); // the mix above spans many keys
    expect(appended).toEqual(perRow);
  });
});
