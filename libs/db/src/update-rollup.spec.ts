import { describe, expect, it } from 'vitest';
import { useScratchMerchant } from '../test/scratch-merchant';
import { attemptRows, txnRows } from './migrations/1797400000100-AnalyticsRollup';
import { RECOVERED } from './migrations/1797950000000-PartialAuthorizations';

// Migration StatementRollupUpdates: the rollup's UPDATE triggers on transactions and attempts run once
// per statement, adding the old and new rows up (signed) before they expand into dimensions. What they
// append must be what the rollup's definition (txnRows, attemptRows over the current rows) gives, for
// multi-row UPDATEs that change some counted values and leave others, and a record of many declines of
// one day must append a handful of pending rows, not a few per attempt.
describe('the rollup triggers of multi-row UPDATEs of transactions and attempts (real Postgres)', () => {
  const scratch = useScratchMerchant('updroll_', ['analytics_rollup_pending']);
  const TXN = ['failed_count', 'failed_amount', 'stopped_count', 'network_fees_avoided'];
  const ATTEMPT = ['attempts', 'recovered_count', 'recovered_amount'];
  const grouped = (from: string, counters: string[]) =>
    `SELECT day::text, currency, dim, key, ${counters.map((c) => `sum(${c})::bigint::text AS ${c}`).join(', ')}
       FROM (${from}) x WHERE merchant_id = $1 AND key IS NOT NULL
      GROUP BY day, currency, dim, key
     HAVING ${counters.map((c) => `sum(${c}) <> 0`).join(' OR ')}
      ORDER BY day, currency, dim, key`;
  const pending = async () =>
    (
      await scratch.db.query(`SELECT count(*)::int AS n FROM analytics_rollup_pending WHERE merchant_id = $1`, [
        scratch.merchantId,
      ])
    )[0].n as number;

  it('appends what a recount of the current rows gives, and nothing for updates that change no counted value', async () => {
    const { db, merchantId, submissionId } = scratch;
    await db.query(
      `INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, review_status, amount_minor,
         currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code, auth_code_description,
         card_network, card_bin, subscription_id, account_id, account, subscription, payment_method, card_kind)
       SELECT md5(g::text || 'updroll'), $1, $2, 'u' || g, 'Failed', CASE WHEN g % 2 = 0 THEN 'passed' ELSE 'pending' END,
         100 + g, CASE WHEN g % 3 = 0 THEN 'EUR' ELSE 'USD' END,
         timestamptz '2026-11-20 10:00:00+00', timestamptz '2026-11-20 23:00:00+00' + ((g % 2) * interval '2 hours'),
         now(), 'd', (ARRAY['51', '05', ''])[1 + g % 3], (ARRAY['Soft Failure', NULL])[1 + g % 2],
         (ARRAY['Visa', 'mastercard', NULL])[1 + g % 3], (ARRAY['411111', '555555'])[1 + g % 2],
         's' || g, 'a' || g, '{}'::jsonb, '{}'::jsonb,
         jsonb_build_object('billing_address', jsonb_build_object('country', (ARRAY['us', 'DE'])[1 + g % 2])), 'pan'
       FROM generate_series(1, 300) AS g`,
      [merchantId, submissionId],
    );
    await db.query(
      `INSERT INTO attempts (vid, retain_transaction_id, transaction_id, merchant_id, retry_number, state, scheduled_for,
         amount_minor, currency)
       SELECT md5(t.id::text || 'a'), md5(t.id::text || 'r'), t.id, t.merchant_id, 1, 'pending', now(), t.amount_minor,
         t.currency
         FROM transactions t WHERE t.merchant_id = $1`,
      [merchantId],
    );
    const afterInserts = await pending();

    // Schedule and bookkeeping updates of every row: nothing the rollup counts changes.
    await db.query(
      `UPDATE transactions SET next_attempt_at = now(), attempt_count = attempt_count + 1 WHERE merchant_id = $1`,
      [merchantId],
    );
    await db.query(`UPDATE attempts SET prepared_at = now() WHERE merchant_id = $1`, [merchantId]);
    expect(await pending()).toBe(afterInserts);

    // Transactions: status, class, review, BIN and fees change on some rows, in one statement (before
    // the attempts are recorded: an attempt counts under its transaction's dimensions as they were then).
    await db.query(
      `UPDATE transactions SET
         status = CASE WHEN amount_minor % 5 = 0 THEN 'Stopped' ELSE status END,
         auth_code_description = CASE WHEN amount_minor % 3 = 0 THEN 'Hard Failure' ELSE auth_code_description END,
         review_status = CASE WHEN amount_minor % 7 = 0 THEN 'rejected' ELSE review_status END,
         card_bin = CASE WHEN amount_minor % 11 = 0 THEN '400000' ELSE card_bin END,
         naive_network_fees_minor = CASE WHEN amount_minor % 4 = 0 THEN 90 END,
         network_fees_minor = CASE WHEN amount_minor % 4 = 0 THEN 15 END,
         updated_at = now()
        WHERE merchant_id = $1`,
      [merchantId],
    );

    // A record of 150 declines in one statement (one day, one currency mix): a few groups, not 8 rows each.
    const beforeDeclines = await pending();
    await db.query(
      `UPDATE attempts a SET state = 'declined', processed_at = now()
         FROM transactions t WHERE t.id = a.transaction_id AND a.merchant_id = $1 AND t.merchant_txn_id ~ '[02468]$'`,
      [merchantId],
    );
    const afterDeclines = await pending();
    expect(afterDeclines - beforeDeclines).toBeGreaterThan(0);
    expect(afterDeclines - beforeDeclines).toBeLessThan(150);

    // Captures (some partial), then some capture times moved (the ttr key), some untouched rows.
    await db.query(
      `UPDATE attempts a SET state = 'captured', processed_at = timestamptz '2026-11-21 10:00:00+00' + (a.amount_minor % 7) * interval '1 hour',
         partial_amount_minor = CASE WHEN a.amount_minor % 4 = 1 THEN 50 END
        WHERE a.merchant_id = $1 AND a.state = 'pending' AND a.amount_minor % 3 <> 0`,
      [merchantId],
    );
    await db.query(
      `UPDATE attempts SET processed_at = processed_at + interval '5 hours', message = 'moved'
        WHERE merchant_id = $1 AND state = 'captured' AND amount_minor % 5 = 0`,
      [merchantId],
    );
    const rows = (table: string) => `(SELECT * FROM ${table} WHERE merchant_id = '${merchantId}')`;
    const txnPerRow = await db.query(
      grouped(
        txnRows(
          rows('transactions'),
          '1',
          `coalesce(t.naive_network_fees_minor - t.network_fees_minor, 0) AS network_fees_avoided,`,
        ),
        TXN,
      ),
      [merchantId],
    );
    const attemptPerRow = await db.query(grouped(attemptRows(rows('attempts'), '1', RECOVERED), ATTEMPT), [merchantId]);
    expect(txnPerRow.length).toBeGreaterThan(20);
    expect(attemptPerRow.some((r: { dim: string }) => r.dim === 'ttr')).toBe(true);
    expect(await db.query(grouped(`SELECT * FROM analytics_rollup_pending`, TXN), [merchantId])).toEqual(txnPerRow);
    expect(await db.query(grouped(`SELECT * FROM analytics_rollup_pending`, ATTEMPT), [merchantId])).toEqual(
      attemptPerRow,
    );
  });
});
