import { describe, expect, it } from 'vitest';
import { useScratchMerchant } from '../test/scratch-merchant';
import { SubmissionsRepository, intakeCopyLine, type IntakeRow } from './repositories/submissions.repository';

// Intake writes new transactions with COPY ... FROM STDIN in the text format. Every value a merchant
// sends must come back exactly as sent, whatever it holds (the format's own separators, escapes, its
// NULL and end markers), and a duplicate must fail the way an INSERT does.
describe('the intake COPY of new transactions (real Postgres)', () => {
  const scratch = useScratchMerchant('copy_');
  const repo = () => new SubmissionsRepository(scratch.db);

  const row = (id: string, over: Partial<IntakeRow> = {}): IntakeRow => ({
    vid: `vid_${id}_${Math.random().toString(36).slice(2)}`,
    merchantTxnId: id,
    amountMinor: '1999',
    currency: 'USD',
    failedAt: '2026-11-20T10:15:00.000Z',
    submittedTs: '2026-11-26T09:00:00.000Z',
    divisionNumber: 'div-1',
    authCode: '51',
    avsCode: null,
    cvnCode: null,
    paymentNetworkTransactionId: null,
    previousBillingCount: null,
    isNetworkToken: null,
    cryptogram: null,
    eciIndicator: null,
    networkAdviceCode: null,
    billingDescriptor: null,
    processorTransactionId: null,
    subscriptionId: `sub_${id}`,
    accountId: `acct_${id}`,
    account: { id: `acct_${id}` },
    subscription: { id: `sub_${id}` },
    paymentMethod: { id: `pm_${id}` },
    metadata: {},
    cardKind: 'token',
    cardJwe: null,
    cardEnc: null,
    cardKeyId: null,
    cardBin: null,
    cardLast4: null,
    cardNetwork: null,
    accountHash: null,
    expirationDate: null,
    policyVersion: null,
    experimentId: null,
    experimentArm: null,
    ...over,
  });

  it('stores every value as sent: tabs, newlines, backslashes, \\N and \\. spelled out, JSON escapes, NULLs', async () => {
    const hostile = 'a\tb\nc\rd\\e \\N \\. \\\\t "q" \u00e9\u{1F600}';
    const rows = [
      row('copy_plain'),
      row('copy\thostile\n1', {
        divisionNumber: hostile,
        billingDescriptor: '\\.',
        avsCode: '\\N',
        account: { id: 'acct', email: 'x\\y@example.com', note: hostile },
        metadata: { path: 'C:\\dir\\new', tab: '\t', nested: { quote: '"', nul: null, list: [1, 'two\n'] } },
        previousBillingCount: -1,
        isNetworkToken: 1,
        policyVersion: 'adaptive-2026-11',
      }),
    ];
    const lines = rows.map((r) => intakeCopyLine(scratch.merchantId, scratch.submissionId, r));
    const fingerprints = [null, { value: 'f'.repeat(64), keyId: 'key\t1' }];
    await scratch.db.transaction((m) => repo().insertTransactions(m, lines, fingerprints));

    const stored = await scratch.db.query(
      `SELECT merchant_txn_id, division_number, billing_descriptor, avs_code, cvn_code, account, metadata,
              previous_billing_count, is_network_token, policy_version, card_hmac, card_hmac_key_id, status,
              review_status, amount_minor::text AS amount, failed_at, submitted_ts = status_changed_at AS same_ts
         FROM transactions WHERE merchant_id = $1 ORDER BY merchant_txn_id`,
      [scratch.merchantId],
    );
    expect(stored).toHaveLength(2);
    const [odd, plain] = stored;
    expect(plain).toMatchObject({
      merchant_txn_id: 'copy_plain',
      division_number: 'div-1',
      avs_code: null,
      metadata: {},
      card_hmac: null,
      card_hmac_key_id: null,
      status: 'Failed',
      review_status: 'pending',
      amount: '1999',
      same_ts: true,
    });
    expect(plain.failed_at.toISOString()).toBe('2026-11-20T10:15:00.000Z');
    expect(odd).toMatchObject({
      merchant_txn_id: 'copy\thostile\n1',
      division_number: hostile,
      billing_descriptor: '\\.',
      avs_code: '\\N',
      cvn_code: null,
      account: { id: 'acct', email: 'x\\y@example.com', note: hostile },
      metadata: { path: 'C:\\dir\\new', tab: '\t', nested: { quote: '"', nul: null, list: [1, 'two\n'] } },
      previous_billing_count: -1,
      is_network_token: 1,
      policy_version: 'adaptive-2026-11',
      card_hmac: 'f'.repeat(64),
      card_hmac_key_id: 'key\t1',
    });
  });

  it('a transaction id stored already fails the COPY with the unique violation an INSERT gives, and nothing is kept', async () => {
    const lines = [row('copy_dup_new'), row('copy_plain')].map((r) =>
      intakeCopyLine(scratch.merchantId, scratch.submissionId, r),
    );
    const failure = await scratch.db
      .transaction((m) => repo().insertTransactions(m, lines, [null, null]))
      .then(() => null)
      .catch((err: unknown) => err as { code?: string; constraint?: string });
    expect(failure).toMatchObject({ code: '23505', constraint: 'transactions_merchant_txn' });
    const [{ n }] = await scratch.db.query(
      `SELECT count(*)::int AS n FROM transactions WHERE merchant_id = $1 AND merchant_txn_id = 'copy_dup_new'`,
      [scratch.merchantId],
    );
    expect(n).toBe(0);
    // The pooled connection is usable again after the failed COPY and its rollback.
    await scratch.db.transaction((m) =>
      repo().insertTransactions(
        m,
        [intakeCopyLine(scratch.merchantId, scratch.submissionId, row('copy_after'))],
        [null],
      ),
    );
    const [{ after }] = await scratch.db.query(
      `SELECT count(*)::int AS after FROM transactions WHERE merchant_id = $1 AND merchant_txn_id = 'copy_after'`,
      [scratch.merchantId],
    );
    expect(after).toBe(1);
  });

  it('refuses to run outside a database transaction (a COPY alone would commit by itself)', async () => {
    await expect(repo().insertTransactions(scratch.db.manager, [], [])).rejects.toThrow(
      /inside a database transaction/,
    );
  });
});
