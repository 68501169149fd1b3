import { describe, expect, it } from 'vitest';
import { scratchDatabaseUrl } from '../test/scratch-database';
import { scratchMerchant } from '../test/scratch-merchant';
import { MIGRATIONS, createDataSource, dropDatabase, migrate, revertLast } from './data-source';
import { OneRecoveryPerTransaction1801600000000 } from './migrations/1801600000000-OneRecoveryPerTransaction';
import { AnalyticsRepository, ROLLUP } from './repositories/analytics.repository';

// Migration OneRecoveryPerTransaction on a database whose rollup the previous triggers kept: a
// transaction captured twice (a late capture after another attempt captured) counted two recoveries.
// After the migration it counts one, under every key (all, breakdowns, attempt number, hours to
// recover), and captures written afterwards count once per transaction too; amounts are unchanged.
describe('migration OneRecoveryPerTransaction on rows the previous triggers counted (real Postgres)', () => {
  it('takes back the second captures counted as recoveries, and counts new ones once', async () => {
    const url = scratchDatabaseUrl('orpt');
    await migrate(url);
    const after = MIGRATIONS.length - MIGRATIONS.indexOf(OneRecoveryPerTransaction1801600000000);
    for (let i = 0; i < after; i++) await revertLast(url);
    const db = createDataSource(url, 2);
    await db.initialize();
    try {
      const { merchantId, submissionId } = await scratchMerchant(db, 'orpt_');
      let n = 0;
      const txn = async (): Promise<string> => {
        n++;
        const [row]: { id: string }[] = await db.query(
          `INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, review_status,
             amount_minor, currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code,
             auth_code_description, subscription_id, account_id, account, subscription, payment_method, card_kind,
             card_bin, card_network)
           VALUES (md5($1 || 'orpt'), $2, $3, $1, 'In Retry', 'passed', 1000, 'USD', timestamptz '2026-11-20 10:00+00',
             timestamptz '2026-11-20 11:00+00', now(), 'd', '51', 'Soft Failure', 's' || $1, 'a' || $1, '{}', '{}',
             '{"billing_address": {"country": "US"}}'::jsonb, 'pan', '411111', 'visa')
           RETURNING id`,
          [`orpt${n}`, merchantId, submissionId],
        );
        return row!.id;
      };
      const attempt = async (txnId: string, retry: number, state: string, at: string): Promise<string> => {
        const [a]: { id: string }[] = await db.query(
          `INSERT INTO attempts (vid, retain_transaction_id, transaction_id, merchant_id, retry_number, state,
             scheduled_for, amount_minor, currency)
           VALUES (md5(random()::text), md5(random()::text), $1, $2, $3, 'pending', now(), 1000, 'USD') RETURNING id`,
          [txnId, merchantId, retry],
        );
        await db.query(`UPDATE attempts SET state = $2, processed_at = $3 WHERE id = $1`, [a!.id, state, at]);
        return a!.id;
      };
      /** Attempt 1 settled as not charged, attempt 2 captured, then attempt 1's late capture. */
      const capturedTwice = async (): Promise<void> => {
        const t = await txn();
        const first = await attempt(t, 1, 'error', '2026-11-21 10:00+00');
        await attempt(t, 2, 'captured', '2026-11-22 10:00+00');
        await db.query(`UPDATE attempts SET state = 'captured', processed_at = '2026-11-23 10:00+00' WHERE id = $1`, [
          first,
        ]);
      };
      await capturedTwice();
      await attempt(await txn(), 1, 'captured', '2026-11-20 12:00+00');
      const figures = async () =>
        (await db.query(
          `SELECT dim, key, sum(recovered_count)::int AS recovered, sum(recovered_amount)::int AS amount
             FROM (${ROLLUP}) r WHERE merchant_id = $1
            GROUP BY dim, key HAVING sum(recovered_count) <> 0 OR sum(recovered_amount) <> 0 ORDER BY dim, key`,
          [merchantId],
        )) as { dim: string; key: string; recovered: number; amount: number }[];
      const recovered = (rows: Awaited<ReturnType<typeof figures>>, dim: string) =>
        rows.filter((r) => r.dim === dim).map((r) => [r.key, r.recovered, r.amount]);
      // The previous triggers: three recoveries for two transactions.
      expect(recovered(await figures(), 'all')).toEqual([['', 3, 3000]]);
      await AnalyticsRepository.fold(db);

      await migrate(url);
      const expectOnePerTransaction = async (transactions: number) => {
        const rows = await figures();
        // Amounts: every capture's money (the late captures' refunds count as refunds).
        expect(recovered(rows, 'all')).toEqual([['', transactions, 1000 + (transactions - 1) * 2000]]);
        for (const dim of ['decline_code', 'decline_class', 'card_network', 'bin', 'country'])
          expect(recovered(rows, dim).map(([, r]) => r)).toEqual([transactions]);
        // Attempt 1: the single capture of the second transaction (and of the later ones), never the
        // late capture; attempt 2: the first capture of each transaction captured twice.
        const twice = transactions - 1;
        expect(recovered(rows, 'attempt')).toEqual([
          ['1', 1, (twice + 1) * 1000],
          ['2', twice, twice * 1000],
        ]);
        // Hours to recover: 2 h (captured once), 48 h (the first capture); the late capture (72 h) none.
        expect(recovered(rows, 'ttr')).toEqual([
          ['2', 1, 1000],
          ['48', twice, twice * 1000],
          ['72', 0, twice * 1000],
        ]);
      };
      await expectOnePerTransaction(2);
      // Written by the new triggers: one more transaction captured twice.
      await capturedTwice();
      await expectOnePerTransaction(3);
      await AnalyticsRepository.fold(db);
      await expectOnePerTransaction(3);
    } finally {
      await db.destroy();
      await dropDatabase(url);
    }
  });
});
