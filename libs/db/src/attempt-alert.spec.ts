import { describe, expect, it } from 'vitest';
import { useScratchMerchant } from '../test/scratch-merchant';
import { AttemptsRepository } from './repositories/attempts.repository';

// The reconciliation logs its "outcome still unknown" alert for an attempt once: markAlerted says
// whether this call is the one that marked it (TypeORM answers an UPDATE ... RETURNING on Postgres with
// [rows, affected count], an array of two whatever was updated).
describe('AttemptsRepository.markAlerted (real Postgres)', () => {
  const scratch = useScratchMerchant('alert_');

  it('true for the call that marks the attempt, false for every later one and for no such attempt', async () => {
    const { db, merchantId, submissionId } = scratch;
    const [t]: { id: string }[] = await db.query(
      `INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, review_status, amount_minor,
         currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code, subscription_id, account_id,
         account, subscription, payment_method, card_kind)
       VALUES (md5(random()::text), $1, $2, 'al_1', 'In Retry', 'passed', 1999, 'USD', now(), now(), now(), 'd', '05',
         's1', 'a1', '{"id":"a1"}', '{"id":"s1"}', '{"id":"p1"}', 'token')
       RETURNING id`,
      [merchantId, submissionId],
    );
    const [a]: { id: string }[] = await db.query(
      `INSERT INTO attempts (vid, retain_transaction_id, transaction_id, merchant_id, retry_number, state, scheduled_for,
         amount_minor, currency)
       VALUES (md5(random()::text), md5(random()::text), $1, $2, 1, 'unknown', now(), 1999, 'USD') RETURNING id`,
      [t!.id, merchantId],
    );
    const calls = [];
    for (let i = 0; i < 3; i++) calls.push(await AttemptsRepository.markAlerted(db, a!.id));
    expect(calls).toEqual([true, false, false]);
    expect(await AttemptsRepository.markAlerted(db, '00000000-0000-4000-8000-000000000000')).toBe(false);
  });
});
