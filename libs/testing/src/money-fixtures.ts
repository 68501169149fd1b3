import { randomBytes } from 'node:crypto';
import { loadConfig } from '@retain/config';
import { cardColumnsFromPan, newRetainTransactionId, newVid } from '@retain/domain';
import { SANDBOX_APPROVED_CARD } from '@retain/processor';
import type { DataSource } from 'typeorm';

/**
 * Rows written straight into Postgres for service-level tests: a reviewed transaction of a merchant,
 * its attempts, its refunds, and the sandbox's stored answer for an idempotency key. Service tests
 * start from a given state without going through the API and the review.
 */
export interface TxnRow {
  id: string;
  vid: string;
  merchantId: string;
  merchantTxnId: string;
}

export async function insertMerchantRow(db: DataSource): Promise<string> {
  const [row]: { id: string }[] = await db.query(
    `INSERT INTO merchants (merchant_vid, login) VALUES ($1, $2) RETURNING id`,
    [newVid(), `m_${randomBytes(5).toString('hex')}`],
  );
  return row!.id;
}

export async function insertTransactionRow(
  db: DataSource,
  merchantId: string,
  opts: {
    card?: string;
    status?: string;
    attemptCount?: number;
    nextAttemptAt?: Date | null;
    stopRequested?: boolean;
    capturedMinor?: string | null;
    amountMinor?: string;
  } = {},
): Promise<TxnRow> {
  const pan = opts.card ?? SANDBOX_APPROVED_CARD;
  const config = loadConfig('cli');
  const c = cardColumnsFromPan(config.cardKeys, config.cardFingerprintKeys, pan);
  const fp = c.fingerprints[0]!;
  const [sub]: { id: string }[] = await db.query(
    `INSERT INTO submissions (merchant_id, request_id, received_count, accepted_count, rejected_count)
     VALUES ($1, $2, 1, 1, 0) RETURNING id`,
    [merchantId, randomBytes(16).toString('hex')],
  );
  const merchantTxnId = `tx_${randomBytes(6).toString('hex')}`;
  const vid = newVid();
  const [row]: { id: string }[] = await db.query(
    `INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, review_status, amount_minor,
       currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code, subscription_id, account_id,
       account, subscription, payment_method, card_kind, card_enc, card_key_id, card_hmac, card_hmac_key_id, card_bin, card_last4,
       card_network, account_hash, expiration_date, attempt_count, next_attempt_at, stop_requested_at,
       captured_amount_minor)
     VALUES ($1, $2, $3, $4, $5, 'passed', $6, 'USD', now() - interval '1 day', now() - interval '1 day', now(),
       'div-1', '51', $7, $8, $9::jsonb, $10::jsonb, $11::jsonb, 'pan', $12, $13, $14, $15, $16, $17, 'visa', $18,
       '202912', $19, $20, $21, $22)
     RETURNING id`,
    [
      vid,
      merchantId,
      sub!.id,
      merchantTxnId,
      opts.status ?? (opts.stopRequested ? 'Stop Requested' : 'In Retry'),
      opts.amountMinor ?? '1999',
      `sub_${merchantTxnId}`,
      `acct_${merchantTxnId}`,
      JSON.stringify({ id: `acct_${merchantTxnId}`, email: 'jane@example.com' }),
      JSON.stringify({ id: `sub_${merchantTxnId}` }),
      JSON.stringify({
        id: `pm_${merchantTxnId}`,
        is_tokenized: false,
        account_holder: 'Jane Doe',
        credit_card: { account: c.display, expiration_date: '202912' },
      }),
      c.cardEnc,
      c.cardKeyId,
      fp.value,
      fp.keyId,
      c.cardBin,
      c.cardLast4,
      c.accountHash,
      opts.attemptCount ?? 0,
      opts.nextAttemptAt ?? null,
      opts.stopRequested ? new Date() : null,
      opts.capturedMinor ?? null,
    ],
  );
  if (opts.stopRequested) await insertRefundRow(db, { id: row!.id, merchantId }, 'stop', opts.amountMinor ?? '1999');
  return { id: row!.id, vid, merchantId, merchantTxnId };
}

/** An attempt row as the scheduler writes it (and, when given, as a run left it). */
export async function insertAttemptRow(
  db: DataSource,
  txn: { id: string; merchantId: string },
  opts: {
    retryNumber?: number;
    state?: string;
    preparedAt?: Date | null;
    processedAt?: Date | null;
    amountMinor?: string;
    responseCode?: string | null;
    authCodeDescription?: string | null;
  } = {},
): Promise<{ id: string; vid: string }> {
  const vid = newVid();
  const retryNumber = opts.retryNumber ?? 1;
  const [row]: { id: string }[] = await db.query(
    `INSERT INTO attempts (vid, retain_transaction_id, transaction_id, merchant_id, retry_number, state, status,
       scheduled_for, amount_minor, currency, card_hmac, card_network, prepared_at, processed_at, response_code,
       auth_code_description)
     SELECT $1, $2, t.id, t.merchant_id, $4, $5, $6, now(), $7, t.currency, t.card_hmac, t.card_network, $8, $9, $10,
            $11
       FROM transactions t WHERE t.id = $3
     RETURNING id`,
    [
      vid,
      newRetainTransactionId(),
      txn.id,
      retryNumber,
      opts.state ?? 'pending',
      opts.state && opts.state !== 'pending' ? 'Failed' : null,
      opts.amountMinor ?? '1999',
      opts.preparedAt ?? null,
      opts.processedAt ?? null,
      opts.responseCode ?? null,
      opts.authCodeDescription ?? null,
    ],
  );
  await db.query(`UPDATE transactions SET attempt_count = GREATEST(attempt_count, $2) WHERE id = $1`, [
    txn.id,
    retryNumber,
  ]);
  return { id: row!.id, vid };
}

export async function insertRefundRow(
  db: DataSource,
  txn: { id: string; merchantId: string },
  kind: 'stop' | 'refund',
  amountMinor: string,
  status = 'Processing',
): Promise<string> {
  const [row]: { id: string }[] = await db.query(
    `INSERT INTO refunds (vid, merchant_id, transaction_id, kind, amount_minor, currency, status, previous_status,
       requested_at, timestamp)
     VALUES ($1, $2, $3, $4, $5, 'USD', $6, 'In Retry', now(), now()) RETURNING id`,
    [newVid(), txn.merchantId, txn.id, kind, amountMinor, status],
  );
  return row!.id;
}

/** What the sandbox will answer for an idempotency key (a charge made, or finished late). */
export async function setSandboxCharge(
  db: DataSource,
  key: string,
  result:
    | { outcome: 'approved'; processorTransactionId?: string }
    | { outcome: 'declined'; responseCode: string }
    | { outcome: 'error' },
): Promise<void> {
  const stored =
    result.outcome === 'approved'
      ? {
          outcome: 'approved',
          responseCode: '00',
          processorTransactionId: result.processorTransactionId ?? `sbx_${key.slice(0, 12)}`,
          message: 'Approved',
        }
      : result.outcome === 'declined'
        ? {
            outcome: 'declined',
            responseCode: result.responseCode,
            merchantAdviceCode: null,
            network: 'visa',
            processorTransactionId: `sbx_${key.slice(0, 12)}`,
            message: 'Declined',
          }
        : { outcome: 'error', message: 'Processor timeout' };
  await db.query(
    `INSERT INTO sandbox_operations (idempotency_key, kind, result) VALUES ($1, 'charge', $2::jsonb)
     ON CONFLICT (idempotency_key) DO UPDATE SET result = EXCLUDED.result`,
    [key, JSON.stringify(stored)],
  );
}
