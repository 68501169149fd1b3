import { describe, expect, it } from 'vitest';
import { useScratchMerchant } from '../test/scratch-merchant';
import { ExperimentsRepository } from './repositories/experiments.repository';

// The per-arm moments an experiment's results are computed from, on seeded rows whose answer is
// worked out by hand: a transaction's recovery is its first capture in time (a late capture of an
// earlier attempt, found after a later attempt captured, is a second capture refunded at once),
// counted at what it captured; currencies apart; review-rejected transactions left out.
describe('experiment moments (real Postgres)', () => {
  const s = useScratchMerchant('expm_', ['refunds', 'policy_experiments']);
  let n = 0;
  const txn = async (
    exp: string,
    arm: string,
    t: { amount: string; currency?: string; status: string; review?: string },
  ): Promise<string> => {
    n++;
    const [row]: { id: string }[] = await s.db.query(
      `INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, review_status,
         amount_minor, currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code,
         auth_code_description, subscription_id, account_id, account, subscription, payment_method, card_kind,
         card_bin, card_network, experiment_id, experiment_arm, policy_version)
       VALUES (md5($1 || 'expm'), $2, $3, $1, $4, $5, $6, $7, timestamptz '2026-11-20 00:00+00',
         timestamptz '2026-11-20 01:00+00', now(), 'd', '51', 'Soft Failure', 's' || $1, 'a' || $1, '{}', '{}',
         '{}'::jsonb, 'pan', '411111', 'visa', $8, $9, 'adaptive-2026-11')
       RETURNING id`,
      [
        `expm${n}`,
        s.merchantId,
        s.submissionId,
        t.status,
        t.review ?? 'passed',
        t.amount,
        t.currency ?? 'USD',
        exp,
        arm,
      ],
    );
    return row!.id;
  };
  const attempt = async (
    txnId: string,
    retry: number,
    state: string,
    at: string,
    partial: string | null = null,
  ): Promise<string> => {
    const [a]: { id: string }[] = await s.db.query(
      `INSERT INTO attempts (vid, retain_transaction_id, transaction_id, merchant_id, retry_number, state,
         scheduled_for, amount_minor, currency)
       SELECT md5(random()::text), md5(random()::text), t.id, t.merchant_id, $2, 'pending', now(), t.amount_minor,
              t.currency FROM transactions t WHERE t.id = $1 RETURNING id`,
      [txnId, retry],
    );
    await s.db.query(`UPDATE attempts SET state = $2, processed_at = $3, partial_amount_minor = $4 WHERE id = $1`, [
      a!.id,
      state,
      at,
      partial,
    ]);
    return a!.id;
  };

  it('counts each transaction once at its first capture in time, per arm and currency', async () => {
    const exp = await ExperimentsRepository.create(s.db, {
      id: 'exp_moments_test',
      merchant_id: s.merchantId,
      name: 'moments',
      holdout_share: 0.2,
      holdout_policy: 'adaptive-2026-11',
      variants: [{ name: 'v', policy_version: 'adaptive-2026-11', weight: 1, learning: true, config: {} }],
    });
    const id = exp!.id;
    // Holdout: USD 10.00 recovered on attempt 1 (a partial authorization of 4.00) after 1 day.
    await attempt(
      await txn(id, 'holdout', { amount: '1000', status: 'Captured' }),
      1,
      'captured',
      '2026-11-21 00:00+00',
      '400',
    );
    // v: USD 10.00: attempt 1 settled as not charged, attempt 2 captured 10.00 after 2 days; then attempt
    // 1's charge turned out captured (5.00, a partial authorization) after 5 days: a second capture.
    const twice = await txn(id, 'v', { amount: '1000', status: 'Partially Refunded' });
    const first = await attempt(twice, 1, 'error', '2026-11-20 12:00+00');
    await attempt(twice, 2, 'captured', '2026-11-22 00:00+00');
    await s.db.query(
      `UPDATE attempts SET state = 'captured', processed_at = '2026-11-25 00:00+00', partial_amount_minor = 500
        WHERE id = $1`,
      [first],
    );
    // v: USD 30.00 still in retry after one decline; EUR 20.00 not attempted yet; a rejected one left out.
    await attempt(await txn(id, 'v', { amount: '3000', status: 'In Retry' }), 1, 'declined', '2026-11-21 00:00+00');
    await txn(id, 'v', { amount: '2000', currency: 'EUR', status: 'Failed' });
    await txn(id, 'v', { amount: '9900', status: 'Failed', review: 'rejected' });
    // Another experiment's transaction: not in these moments.
    await txn('exp_other', 'v', { amount: '5000', status: 'Failed' });

    const rows = await ExperimentsRepository.moments(s.db, s.merchantId, id);
    expect(
      rows.map((r) => ({ ...r, median_days_to_recover: r.median_days_to_recover && Number(r.median_days_to_recover) })),
    ).toEqual([
      {
        arm: 'v',
        policy_version: 'adaptive-2026-11',
        currency: 'EUR',
        transactions: 1,
        in_flight: 1,
        recovered_count: 0,
        recovered_amount: '0',
        recovered_amount_squares: '0',
        failed_amount: '2000',
        attempts: 0,
        median_days_to_recover: null,
      },
      {
        arm: 'holdout',
        policy_version: 'adaptive-2026-11',
        currency: 'USD',
        transactions: 1,
        in_flight: 0,
        recovered_count: 1,
        recovered_amount: '400',
        recovered_amount_squares: '160000',
        failed_amount: '1000',
        attempts: 1,
        median_days_to_recover: 1,
      },
      {
        arm: 'v',
        policy_version: 'adaptive-2026-11',
        currency: 'USD',
        transactions: 2,
        in_flight: 1,
        recovered_count: 1,
        // The first capture (attempt 2: 10.00 after 2 days), not attempt 1's late one (5.00 after 5 days).
        recovered_amount: '1000',
        recovered_amount_squares: '1000000',
        failed_amount: '4000',
        attempts: 3,
        median_days_to_recover: 2,
      },
    ]);
  });
  it('a capture the service refunded at once (a late capture after Cancelled) is no recovery; one whose refund failed is', async () => {
    // One running experiment per merchant: the first test's is stopped.
    await s.db.query(`UPDATE policy_experiments SET status = 'stopped', stopped_at = now() WHERE merchant_id = $1`, [
      s.merchantId,
    ]);
    const exp = await ExperimentsRepository.create(s.db, {
      id: 'exp_moments_late',
      merchant_id: s.merchantId,
      name: 'late',
      holdout_share: 0.2,
      holdout_policy: 'adaptive-2026-11',
      variants: [{ name: 'v', policy_version: 'adaptive-2026-11', weight: 1, learning: true, config: {} }],
    });
    const id = exp!.id;
    const lateRefund = async (txnId: string, attemptId: string, status: string): Promise<void> => {
      await s.db.query(
        `INSERT INTO refunds (vid, merchant_id, transaction_id, kind, attempt_id, amount_minor, currency, status,
           requested_at, "timestamp")
         VALUES (md5(random()::text), $1, $2, 'refund', $3, 1000, 'USD', $4, now(), now())`,
        [s.merchantId, txnId, attemptId, status],
      );
    };
    // Cancelled after an attempt settled as not charged, whose charge then turned out captured: the
    // service refunded it at once (a refund naming the attempt). The merchant recovered nothing.
    const refunded = await txn(id, 'v', { amount: '1000', status: 'Refunded' });
    const late = await attempt(refunded, 1, 'captured', '2026-11-23 00:00+00');
    await lateRefund(refunded, late, 'Completed');
    // The same, but that refund failed: the customer paid and the merchant keeps it.
    const kept = await txn(id, 'v', { amount: '1000', status: 'Captured' });
    const keptAttempt = await attempt(kept, 1, 'captured', '2026-11-22 00:00+00');
    await lateRefund(kept, keptAttempt, 'Failed');

    const [v] = await ExperimentsRepository.moments(s.db, s.merchantId, id);
    expect(v).toMatchObject({ arm: 'v', transactions: 2, recovered_count: 1, recovered_amount: '1000' });
  });
});
