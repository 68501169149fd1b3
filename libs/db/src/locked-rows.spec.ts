import { describe, expect, it } from 'vitest';
import { useScratchMerchant } from '../test/scratch-merchant';
import { AttemptEntity } from './entities/attempt.entity';
import { TransactionEntity } from './entities/transaction.entity';
import { AttemptsRepository } from './repositories/attempts.repository';

// The retry worker's batches lock their attempts and transactions in plain SQL (lockMany) and build
// the entities from TypeORM's column list themselves. They must be the entities TypeORM builds:
// every column, with the same values and types (bigint strings, Dates, jsonb, booleans, nulls).
describe('lockMany: the entities TypeORM would build (real Postgres)', () => {
  const scratch = useScratchMerchant('locked_');

  it('every column of the attempt and its transaction, in the lock order, missing ids left out', async () => {
    const { db, merchantId, submissionId } = scratch;
    const txns: { id: string }[] = await db.query(
      `INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, review_status, amount_minor,
         currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code, subscription_id, account_id,
         account, subscription, payment_method, metadata, card_kind, card_enc, card_key_id, is_network_token,
         next_attempt_at, next_attempt_plan, captured_amount_minor, forced_deposit, attempt_count)
       SELECT md5(random()::text), $1, $2, 'lk_' || g, 'In Retry', 'passed', 123456789012, 'USD',
         '2026-11-20T10:11:12.345678Z', now(), now(), 'd', '05', 's' || g, 'a' || g,
         '{"id":"a"}', '{"id":"s"}', '{"id":"p","primary":true}', '{"k":"v"}', 'pan', 'sealed', 'k1', 1,
         now(), '{"why":"x"}', NULL, g = 2, 3
       FROM generate_series(2, 1, -1) AS g RETURNING id`,
      [merchantId, submissionId],
    );
    const attempts: { id: string }[] = await db.query(
      `INSERT INTO attempts (vid, retain_transaction_id, transaction_id, merchant_id, retry_number, state, scheduled_for,
         amount_minor, currency, plan, payment_method_view, forced_deposit)
       SELECT md5(t.id::text), md5(t.id::text || 'rt'), t.id, $1, 3, 'pending', now(), 123456789012, 'USD',
         '{"at":"x"}', NULL, false
         FROM unnest($2::uuid[]) AS t(id) RETURNING id`,
      [merchantId, txns.map((t) => t.id)],
    );
    const ids = attempts.map((a) => a.id);
    const missing = '00000000-0000-4000-8000-000000000000';

    const locked = await db.transaction((m) => AttemptsRepository.lockMany(m, [...ids, missing, ids[0]!]));
    const expected = await Promise.all(
      locked.map(async ({ attempt }) => ({
        attempt: await db.getRepository(AttemptEntity).findOneByOrFail({ id: attempt.id }),
        txn: await db.getRepository(TransactionEntity).findOneByOrFail({ id: attempt.transactionId }),
      })),
    );
    expect(locked).toHaveLength(2);
    expect(locked).toStrictEqual(expected);
    // The lock order: merchant_txn_id (lk_1 before lk_2, whatever order the ids came in).
    expect(locked.map((l) => l.txn.merchantTxnId)).toEqual(['lk_1', 'lk_2']);
  });
});
