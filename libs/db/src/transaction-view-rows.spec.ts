import { describe, expect, it } from 'vitest';
import { useScratchMerchant } from '../test/scratch-merchant';
import { RefundEntity } from './entities/refund.entity';
import { TransactionEntity } from './entities/transaction.entity';
import { TransactionsRepository } from './repositories/transactions.repository';
import {
  REFUND_VIEW_COLUMNS,
  TRANSACTION_VIEW_COLUMNS,
  transactionView,
  type RefundViewRow,
  type TransactionViewRow,
} from './repositories/transaction-view';

// The list and GET read transactions as plain rows of the view's columns (TRANSACTION_VIEW_COLUMNS),
// not as TypeORM entities. The API must show the same resource either way: every kind of column
// (jsonb, bigint, timestamps, booleans, smallint, nulls and escaped metadata keys) read both ways.
describe('transaction views from plain rows (real Postgres)', () => {
  const scratch = useScratchMerchant('viewrows_', ['refunds']);

  it('show what the entity shows, and carry no sealed card data', async () => {
    const { db, merchantId, submissionId } = scratch;
    const [t]: { id: string }[] = await db.query(
      `INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, review_status, amount_minor,
         currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code, network_advice_code,
         avs_code, cvn_code, auth_code_description, payment_network_transaction_id, previous_billing_count,
         is_network_token, eci_indicator, billing_descriptor, processor_transaction_id, subscription_id, account_id,
         account, subscription, payment_method, metadata, card_kind, card_enc, card_key_id, account_hash,
         expiration_date, attempt_count, next_attempt_at, policy_version, experiment_id, experiment_arm,
         next_attempt_plan, captured_amount_minor, forced_deposit, account_updated, account_update_jwe)
       VALUES (md5(random()::text), $1, $2, 'vr_1', 'Partially Refunded', 'passed', 123456789012, 'JPY',
         '2026-11-20T10:11:12.345678Z', '2026-11-21T00:00:00.5Z', now(), 'div', '05', '24', 'Y', 'M', 'Soft Failure',
         'nti_1', 7, 1, '05', 'RETAIN*SUB', 'pt_1', 'sub_1', 'acc_1',
         '{"id":"acc_1","vid":"v1","email":"a@example.com"}', '{"id":"sub_1","starts":"2026-01-01"}',
         '{"id":"pm_1","vid":"v2","is_tokenized":false,"primary":true,"card_account_display":"411111******1111"}',
         $3::jsonb, 'pan', 'sealed-card-number', 'k1', 'hash', '202912', 2, '2026-11-27T08:00:00Z', 'adaptive-v3',
         'exp_1', 'treatment', '{"why":"payday"}', 100000000000, true, true, 'eyJ.jwe')
       RETURNING id`,
      [merchantId, submissionId, JSON.stringify({ plan: 'gold', 'k"ey\\\\': 'v' })],
    );
    await db.query(
      `INSERT INTO refunds (vid, merchant_id, transaction_id, kind, amount_minor, currency, status, requested_at, "timestamp")
       VALUES (md5(random()::text), $1, $2, 'refund', 5000, 'JPY', 'Processing', now(), '2026-11-22T01:02:03.004Z')`,
      [merchantId, t!.id],
    );

    const entity = await db.getRepository(TransactionEntity).findOneByOrFail({ id: t!.id });
    const refunds = await db.getRepository(RefundEntity).findBy({ transactionId: t!.id });
    const [row]: TransactionViewRow[] = await db.query(
      `SELECT ${TRANSACTION_VIEW_COLUMNS} FROM transactions t WHERE t.id = $1`,
      [t!.id],
    );
    const refundRows: RefundViewRow[] = await db.query(
      `SELECT ${REFUND_VIEW_COLUMNS} FROM refunds r WHERE r.transaction_id = $1`,
      [t!.id],
    );
    expect(transactionView(row!, refundRows)).toEqual(transactionView(entity, refunds));
    expect(JSON.stringify(row)).not.toContain('sealed-card-number');

    // Through the repository, as the API reads them: the list page and GET of one.
    const repo = new TransactionsRepository(db);
    const page = await repo.list(merchantId, { limit: 10 });
    expect(page.data).toEqual([transactionView(entity, refunds)]);
    expect(await repo.fetch(merchantId, 'vr_1', false)).toEqual([transactionView(entity, refunds)]);
    const cursorPage = await repo.list(merchantId, { limit: 10, startingAfter: 'vr_1' });
    expect(cursorPage).toMatchObject({ data: [], hasMore: false });
    expect(cursorPage.unknownCursor).toBeUndefined();
    expect((await repo.list(merchantId, { limit: 10, startingAfter: 'nope' })).unknownCursor).toBe(true);
  });
});
