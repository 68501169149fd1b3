import { randomBytes } from 'node:crypto';
import { AnalyticsRepository, ROLLUP } from '@retain/db';
import { newRetainTransactionId, newVid } from '@retain/domain';
import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeTestDb, createMerchant, startApp, testDb, type RunningApp, type TestMerchant } from '@retain/testing';

/**
 * Every analytics figure on seeded rows whose answer is worked out by hand below. Rows are written
 * the way the apps write them (inserts, then status updates), so the rollup triggers see the same
 * statements as in production.
 */
interface TxnSpec {
  amount: string;
  currency?: string;
  submitted: string;
  failed?: string;
  code: string;
  cls: 'Soft Failure' | 'Hard Failure' | null;
  network: string;
  bin: string;
  country: string;
  status: string;
  review?: string;
}

async function merchantRowId(db: DataSource, login: string): Promise<string> {
  const [m]: { id: string }[] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [login]);
  return m!.id;
}

async function seedTxn(db: DataSource, merchantId: string, t: TxnSpec): Promise<string> {
  const [sub]: { id: string }[] = await db.query(
    `INSERT INTO submissions (merchant_id, request_id, received_count, accepted_count, rejected_count)
     VALUES ($1, $2, 1, 1, 0) RETURNING id`,
    [merchantId, randomBytes(16).toString('hex')],
  );
  const mid = `tx_${randomBytes(6).toString('hex')}`;
  const [row]: { id: string }[] = await db.query(
    `INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, review_status, amount_minor,
       currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code, auth_code_description,
       subscription_id, account_id, account, subscription, payment_method, card_kind, card_bin, card_last4,
       card_network, expiration_date)
     VALUES ($1, $2, $3, $4, 'Failed', 'pending', $5, $6, $7, $8, $8, 'div-1', $9, NULL, $10, $11, '{}'::jsonb,
       '{}'::jsonb, $12::jsonb, 'pan', $13, '1111', $14, '202912')
     RETURNING id`,
    [
      newVid(),
      merchantId,
      sub!.id,
      mid,
      t.amount,
      t.currency ?? 'USD',
      t.failed ?? t.submitted,
      t.submitted,
      t.code,
      `sub_${mid}`,
      `acct_${mid}`,
      JSON.stringify({ id: `pm_${mid}`, billing_address: { country: t.country } }),
      `${t.bin}99`,
      t.network,
    ],
  );
  // The review classifies the decline, then the recovery moves the status (as the apps do).
  await db.query(`UPDATE transactions SET review_status = $2, auth_code_description = $3 WHERE id = $1`, [
    row!.id,
    t.review ?? 'passed',
    t.cls,
  ]);
  if (t.status !== 'Failed') await db.query(`UPDATE transactions SET status = $2 WHERE id = $1`, [row!.id, t.status]);
  return row!.id;
}

/** An attempt written pending, then settled by a second statement (as the retry worker does). */
async function seedAttempt(db: DataSource, txnId: string, n: number, state: string, processedAt: string | null) {
  const [a]: { id: string }[] = await db.query(
    `INSERT INTO attempts (vid, retain_transaction_id, transaction_id, merchant_id, retry_number, state,
       scheduled_for, amount_minor, currency)
     SELECT $1, $2, t.id, t.merchant_id, $3, 'pending', now(), t.amount_minor, t.currency FROM transactions t
      WHERE t.id = $4 RETURNING id`,
    [newVid(), newRetainTransactionId(), n, txnId],
  );
  if (state !== 'pending') {
    await db.query(`UPDATE attempts SET state = $2, processed_at = $3 WHERE id = $1`, [a!.id, state, processedAt]);
  }
  return a!.id;
}

async function seedRefund(db: DataSource, txnId: string, kind: string, amount: string, status: string) {
  const [r]: { id: string }[] = await db.query(
    `INSERT INTO refunds (vid, merchant_id, transaction_id, kind, amount_minor, currency, status)
     SELECT $1, t.merchant_id, t.id, $2, $3, t.currency, 'Processing' FROM transactions t WHERE t.id = $4
     RETURNING id`,
    [newVid(), kind, amount, txnId],
  );
  if (status !== 'Processing') await db.query(`UPDATE refunds SET status = $2 WHERE id = $1`, [r!.id, status]);
  return r!.id;
}

const zeroFigures: Record<string, number | null> = {
  failed_count: 0,
  failed_amount: 0,
  recovered_count: 0,
  recovered_amount: 0,
  recovery_rate: null,
  amount_recovery_rate: null,
  attempts: 0,
  attempts_per_recovery: null,
  refunded_count: 0,
  refunded_amount: 0,
  stopped_count: 0,
  net_recovered_amount: 0,
};
const fig = (f: Record<string, number | null>) => ({ ...zeroFigures, ...f });

describe('analytics API', () => {
  let api: RunningApp;
  let merchant: TestMerchant;
  let other: TestMerchant;
  let db: DataSource;
  let t1: string;
  let t2Attempt: string;
  let t5: string;
  let t7Refund: string;

  const get = async (m: TestMerchant, query: string) => {
    const r = await fetch(`${api.url}/v1/retain/analytics${query}`, {
      headers: { authorization: `Bearer ${m.api_key}` },
    });
    return { status: r.status, json: (await r.json()) as any };
  };
  const RANGE = '?from=2026-10-05&to=2026-10-12';

  beforeAll(async () => {
    api = await startApp('intake-api');
    merchant = await createMerchant();
    other = await createMerchant();
    db = await testDb();
    const m = await merchantRowId(db, merchant.login);
    const visa411 = { network: 'visa', bin: '411111', country: 'us' };
    // T1: USD 10.00, Monday 2026-10-05; declined, then captured 170 h after the failure; 4.00 refunded.
    t1 = await seedTxn(db, m, {
      amount: '1000',
      submitted: '2026-10-05T10:00:00Z',
      failed: '2026-10-05T08:00:00Z',
      code: '51',
      cls: 'Soft Failure',
      ...visa411,
      status: 'Partially Refunded',
    });
    await seedAttempt(db, t1, 1, 'declined', '2026-10-06T08:00:00Z');
    await seedAttempt(db, t1, 2, 'captured', '2026-10-12T10:00:00Z');
    await seedRefund(db, t1, 'refund', '400', 'Completed');
    await seedRefund(db, t1, 'refund', '100', 'Failed'); // failed refunds give nothing back
    t7Refund = await seedRefund(db, t1, 'refund', '200', 'Processing'); // not yet
    // T2: USD 20.00, Monday; captured on attempt 1, 5 h after the failure.
    const t2 = await seedTxn(db, m, {
      amount: '2000',
      submitted: '2026-10-05T11:00:00Z',
      code: '05',
      cls: 'Soft Failure',
      network: 'MasterCard',
      bin: '555555',
      country: 'GB',
      status: 'Captured',
    });
    t2Attempt = await seedAttempt(db, t2, 1, 'captured', '2026-10-05T16:00:00Z');
    // T3: USD 30.00, Tuesday; three declines, cancelled.
    const t3 = await seedTxn(db, m, {
      amount: '3000',
      submitted: '2026-10-06T09:00:00Z',
      failed: '2026-10-06T07:00:00Z',
      code: '51',
      cls: 'Soft Failure',
      ...visa411,
      status: 'Cancelled',
    });
    for (const n of [1, 2, 3]) await seedAttempt(db, t3, n, 'declined', '2026-10-07T09:00:00Z');
    // T4: USD 40.00, next Monday; hard decline, never retried.
    await seedTxn(db, m, {
      amount: '4000',
      submitted: '2026-10-12T10:00:00Z',
      code: '14',
      cls: 'Hard Failure',
      network: 'visa',
      bin: '400000',
      country: 'US',
      status: 'Cancelled',
    });
    // T5: USD 50.00, next Monday; one decline, then stopped (its stop refund gives nothing back).
    t5 = await seedTxn(db, m, {
      amount: '5000',
      submitted: '2026-10-12T12:00:00Z',
      code: '51',
      cls: 'Soft Failure',
      network: 'amex',
      bin: '371449',
      country: 'CA',
      status: 'Stop Requested',
    });
    await seedAttempt(db, t5, 1, 'declined', '2026-10-13T12:00:00Z');
    await seedRefund(db, t5, 'stop', '5000', 'Completed');
    await db.query(`UPDATE transactions SET status = 'Stopped' WHERE id = $1`, [t5]);
    // T6: rejected by the review: not a failed transaction of the merchant's.
    await seedTxn(db, m, {
      amount: '6000',
      submitted: '2026-10-06T10:00:00Z',
      code: '51',
      cls: null,
      ...visa411,
      status: 'Failed',
      review: 'rejected',
    });
    // T7: USD 70.00, Monday; its first attempt is still in flight (not an attempt made yet).
    const t7 = await seedTxn(db, m, {
      amount: '7000',
      submitted: '2026-10-05T12:00:00Z',
      code: '51',
      cls: 'Soft Failure',
      ...visa411,
      status: 'In Retry',
    });
    await seedAttempt(db, t7, 1, 'pending', null);
    // Outside the range by one second on each side.
    for (const submitted of ['2026-10-04T23:59:59Z', '2026-10-13T00:00:00Z']) {
      await seedTxn(db, m, {
        amount: '8000',
        submitted,
        code: '51',
        cls: 'Soft Failure',
        ...visa411,
        status: 'Failed',
      });
    }
    // E1: EUR 15.00, Tuesday; captured 26 h after the failure.
    const e1 = await seedTxn(db, m, {
      amount: '1500',
      currency: 'EUR',
      submitted: '2026-10-06T10:00:00Z',
      code: '51',
      cls: 'Soft Failure',
      network: 'visa',
      bin: '411111',
      country: 'DE',
      status: 'Captured',
    });
    await seedAttempt(db, e1, 1, 'captured', '2026-10-07T12:00:00Z');
    // Another merchant's transaction on the same day: never in this merchant's figures.
    const o = await merchantRowId(db, other.login);
    const ot = await seedTxn(db, o, {
      amount: '99900',
      submitted: '2026-10-05T10:00:00Z',
      code: '51',
      cls: 'Soft Failure',
      ...visa411,
      status: 'Captured',
    });
    await seedAttempt(db, ot, 1, 'captured', '2026-10-05T11:00:00Z');
  });
  afterAll(async () => {
    await api.stop();
    await closeTestDb();
  });

  it('totals per currency: failed, recovered, rates, attempts, refunds, stops', async () => {
    const r = await get(merchant, RANGE);
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ object: 'analytics', from: '2026-10-05', to: '2026-10-12', bucket: 'day' });
    expect(r.json.currencies.map((c: any) => c.currency)).toEqual(['EUR', 'USD']);
    const usd = r.json.currencies[1];
    // T1, T2, T3, T4, T5, T7 (T6 rejected by the review, two rows outside the range).
    expect(usd.totals).toEqual(
      fig({
        failed_count: 6,
        failed_amount: 220,
        recovered_count: 2, // T1 (attempt 2) and T2 (attempt 1)
        recovered_amount: 30,
        recovery_rate: 0.3333, // 2 / 6
        amount_recovery_rate: 0.1364, // 30 / 220
        attempts: 7, // T1 2, T2 1, T3 3, T5 1; T7's attempt is in flight
        attempts_per_recovery: 3.5, // 7 / 2
        refunded_count: 1, // T1's completed 4.00; the failed and the processing ones do not count
        refunded_amount: 4,
        stopped_count: 1, // T5
        net_recovered_amount: 26,
      }),
    );
    expect(r.json.currencies[0].totals).toEqual(
      fig({
        failed_count: 1,
        failed_amount: 15,
        recovered_count: 1,
        recovered_amount: 15,
        recovery_rate: 1,
        amount_recovery_rate: 1,
        attempts: 1,
        attempts_per_recovery: 1,
        net_recovered_amount: 15,
      }),
    );
    // No recovery of these rows recorded network fees: nothing avoided yet.
    expect(usd.network_fees_avoided).toBe(0);
    expect(r.json.notes).toEqual([expect.stringContaining('network_fees_avoided is in USD')]);
    // T1 ended: a naive daily schedule would have paid 1.30 USD of excess-reattempt fees, its attempts 0.
    const db = await testDb();
    await db.query(`UPDATE transactions SET naive_network_fees_minor = 130, network_fees_minor = 0 WHERE id = $1`, [
      t1,
    ]);
    const again = await get(merchant, RANGE);
    expect(again.json.currencies.map((c: any) => c.network_fees_avoided)).toEqual([0, 1.3]);
    await db.query(`UPDATE transactions SET naive_network_fees_minor = NULL, network_fees_minor = NULL WHERE id = $1`, [
      t1,
    ]);
  });

  it('success by attempt number and time to recover', async () => {
    const [eur, usd] = (await get(merchant, RANGE)).json.currencies;
    expect(usd.success_by_attempt).toEqual([
      { attempt_number: 1, attempts: 4, recovered: 1, success_rate: 0.25 }, // T1, T2, T3, T5; T2 captured
      { attempt_number: 2, attempts: 2, recovered: 1, success_rate: 0.5 }, // T1, T3; T1 captured
      { attempt_number: 3, attempts: 1, recovered: 0, success_rate: 0 }, // T3
    ]);
    // T2 5 h, T1 170 h (08:00 Monday to 10:00 the next Monday): nearest-rank p50 = 5, p90 = 170.
    expect(usd.time_to_recover).toEqual({
      recovered_count: 2,
      p50_hours: 5,
      p90_hours: 170,
      p50_days: 0.21,
      p90_days: 7.08,
    });
    expect(eur.time_to_recover).toEqual({
      recovered_count: 1,
      p50_hours: 26,
      p90_hours: 26,
      p50_days: 1.08,
      p90_days: 1.08,
    });
  });

  it('series by day (every day of the range) and by ISO week', async () => {
    const usd = (await get(merchant, RANGE)).json.currencies[1];
    expect(usd.series.map((p: any) => p.period_start)).toEqual([
      '2026-10-05',
      '2026-10-06',
      '2026-10-07',
      '2026-10-08',
      '2026-10-09',
      '2026-10-10',
      '2026-10-11',
      '2026-10-12',
    ]);
    const monday = fig({
      failed_count: 3, // T1, T2, T7
      failed_amount: 100,
      recovered_count: 2,
      recovered_amount: 30,
      recovery_rate: 0.6667,
      amount_recovery_rate: 0.3,
      attempts: 3,
      attempts_per_recovery: 1.5,
      refunded_count: 1,
      refunded_amount: 4,
      net_recovered_amount: 26,
    });
    const tuesday = fig({
      failed_count: 1,
      failed_amount: 30,
      recovery_rate: 0,
      amount_recovery_rate: 0,
      attempts: 3,
    });
    const nextMonday = fig({
      failed_count: 2, // T4, T5
      failed_amount: 90,
      recovery_rate: 0,
      amount_recovery_rate: 0,
      attempts: 1,
      stopped_count: 1,
    });
    expect(usd.series[0]).toEqual({ period_start: '2026-10-05', ...monday });
    expect(usd.series[1]).toEqual({ period_start: '2026-10-06', ...tuesday });
    for (const p of usd.series.slice(2, 7)) expect(p).toEqual({ period_start: p.period_start, ...zeroFigures });
    expect(usd.series[7]).toEqual({ period_start: '2026-10-12', ...nextMonday });

    const weekly = (await get(merchant, `${RANGE}&bucket=week`)).json.currencies[1];
    expect(weekly.series).toEqual([
      {
        period_start: '2026-10-05',
        ...fig({
          failed_count: 4,
          failed_amount: 130,
          recovered_count: 2,
          recovered_amount: 30,
          recovery_rate: 0.5,
          amount_recovery_rate: 0.2308,
          attempts: 6,
          attempts_per_recovery: 3,
          refunded_count: 1,
          refunded_amount: 4,
          net_recovered_amount: 26,
        }),
      },
      { period_start: '2026-10-12', ...nextMonday },
    ]);
  });

  it('breakdowns by decline code and class, card network, BIN and country', async () => {
    const b = (await get(merchant, RANGE)).json.currencies[1].breakdowns;
    const t2 = fig({
      failed_count: 1,
      failed_amount: 20,
      recovered_count: 1,
      recovered_amount: 20,
      recovery_rate: 1,
      amount_recovery_rate: 1,
      attempts: 1,
      attempts_per_recovery: 1,
      net_recovered_amount: 20,
    });
    const t4 = fig({ failed_count: 1, failed_amount: 40, recovery_rate: 0, amount_recovery_rate: 0 });
    const t5 = fig({
      failed_count: 1,
      failed_amount: 50,
      recovery_rate: 0,
      amount_recovery_rate: 0,
      attempts: 1,
      stopped_count: 1,
    });
    expect(b.decline_code).toEqual([
      {
        key: '51', // T1, T3, T5, T7
        ...fig({
          failed_count: 4,
          failed_amount: 160,
          recovered_count: 1,
          recovered_amount: 10,
          recovery_rate: 0.25,
          amount_recovery_rate: 0.0625,
          attempts: 6,
          attempts_per_recovery: 6,
          refunded_count: 1,
          refunded_amount: 4,
          stopped_count: 1,
          net_recovered_amount: 6,
        }),
      },
      { key: '05', ...t2 },
      { key: '14', ...t4 },
    ]);
    expect(b.decline_class).toEqual([
      {
        key: 'soft',
        ...fig({
          failed_count: 5,
          failed_amount: 180,
          recovered_count: 2,
          recovered_amount: 30,
          recovery_rate: 0.4,
          amount_recovery_rate: 0.1667,
          attempts: 7,
          attempts_per_recovery: 3.5,
          refunded_count: 1,
          refunded_amount: 4,
          stopped_count: 1,
          net_recovered_amount: 26,
        }),
      },
      { key: 'hard', ...t4 },
    ]);
    const visa411 = fig({
      failed_count: 3, // T1, T3, T7
      failed_amount: 110,
      recovered_count: 1,
      recovered_amount: 10,
      recovery_rate: 0.3333,
      amount_recovery_rate: 0.0909,
      attempts: 5,
      attempts_per_recovery: 5,
      refunded_count: 1,
      refunded_amount: 4,
      net_recovered_amount: 6,
    });
    expect(b.card_network).toEqual([
      {
        key: 'visa', // T1, T3, T4, T7
        ...fig({
          failed_count: 4,
          failed_amount: 150,
          recovered_count: 1,
          recovered_amount: 10,
          recovery_rate: 0.25,
          amount_recovery_rate: 0.0667,
          attempts: 5,
          attempts_per_recovery: 5,
          refunded_count: 1,
          refunded_amount: 4,
          net_recovered_amount: 6,
        }),
      },
      { key: 'amex', ...t5 },
      { key: 'mastercard', ...t2 },
    ]);
    expect(b.bin).toEqual([
      { key: '411111', ...visa411 },
      { key: '371449', ...t5 },
      { key: '400000', ...t4 },
      { key: '555555', ...t2 },
    ]);
    expect(b.country.map((c: any) => [c.key, c.failed_count, c.failed_amount])).toEqual([
      ['US', 4, 150], // T1, T3, T4 (lower-case 'us' in two of them), T7
      ['CA', 1, 50],
      ['GB', 1, 20],
    ]);
    expect((await get(merchant, `${RANGE}&breakdown_limit=1`)).json.currencies[1].breakdowns.bin).toEqual([
      { key: '411111', ...visa411 },
    ]);
  });

  it('follows later changes exactly once: a refund completing, a capture written twice, a review rejection', async () => {
    await db.query(`UPDATE refunds SET status = 'Completed' WHERE id = $1`, [t7Refund]);
    // The same settle statement twice (a retried job): counted once.
    await db.query(`UPDATE attempts SET state = 'captured' WHERE id = $1`, [t2Attempt]);
    await db.query(`UPDATE attempts SET state = 'captured' WHERE id = $1`, [t2Attempt]);
    // A schedule-only update changes no figure.
    await db.query(`UPDATE transactions SET next_attempt_at = now() WHERE id = $1`, [t1]);
    let usd = (await get(merchant, RANGE)).json.currencies[1].totals;
    expect(usd).toMatchObject({ refunded_count: 2, refunded_amount: 6, recovered_count: 2, attempts: 7 });
    await db.query(`UPDATE transactions SET review_status = 'rejected' WHERE id = $1`, [t5]);
    usd = (await get(merchant, RANGE)).json.currencies[1].totals;
    expect(usd).toMatchObject({ failed_count: 5, failed_amount: 170, stopped_count: 1 });
    // Put back for the other figures (tests share the seed).
    await db.query(`UPDATE transactions SET review_status = 'passed' WHERE id = $1`, [t5]);
    await db.query(`UPDATE refunds SET status = 'Processing' WHERE id = $1`, [t7Refund]);
    expect((await get(merchant, RANGE)).json.currencies[1].totals).toMatchObject({
      failed_count: 6,
      refunded_count: 1,
      refunded_amount: 4,
    });
  });

  it('the rollup equals a recount from the raw rows, before and after its pending rows are folded', async () => {
    const m = await merchantRowId(db, merchant.login);
    const rollup = async (): Promise<Record<string, string>> =>
      (
        await db.query(
          `SELECT sum(failed_count)::text AS f, sum(attempts)::text AS a, sum(recovered_amount)::text AS r
             FROM (${ROLLUP}) x WHERE merchant_id = $1 AND dim = 'all'`,
          [m],
        )
      )[0];
    const pending = async (): Promise<number> =>
      (await db.query(`SELECT count(*)::int AS n FROM analytics_rollup_pending WHERE merchant_id = $1`, [m]))[0].n;
    const before = await rollup();
    expect(await pending()).toBeGreaterThan(0);
    await AnalyticsRepository.fold(db);
    expect(await pending()).toBe(0);
    const fromRollup = await rollup();
    expect(fromRollup).toEqual(before);
    const [recount]: Record<string, string>[] = await db.query(
      `SELECT (SELECT count(*) FROM transactions WHERE merchant_id = $1 AND review_status <> 'rejected')::text AS f,
              (SELECT count(*) FROM attempts WHERE merchant_id = $1 AND state <> 'pending')::text AS a,
              (SELECT sum(amount_minor) FROM attempts WHERE merchant_id = $1 AND state = 'captured')::text AS r`,
      [m],
    );
    expect(fromRollup).toEqual(recount);
  });

  it('a second capture of one transaction (a late capture, refunded at once) is not a second recovery', async () => {
    // Its own merchant: the other tests share the seed above.
    const mixed = await createMerchant();
    const m = await merchantRowId(db, mixed.login);
    const visa = { network: 'visa', bin: '411111', country: 'US', code: '51', cls: 'Soft Failure' as const };
    // A: USD 10.00. Attempt 1 settled as not charged, attempt 2 captured 72 h after the failure, then
    // attempt 1's charge turned out captured (a late capture): recorded, and refunded at once.
    const a = await seedTxn(db, m, {
      amount: '1000',
      submitted: '2026-09-01T10:00:00Z',
      failed: '2026-09-01T08:00:00Z',
      ...visa,
      status: 'In Retry',
    });
    const a1 = await seedAttempt(db, a, 1, 'error', '2026-09-02T08:00:00Z');
    await seedAttempt(db, a, 2, 'captured', '2026-09-04T08:00:00Z');
    await db.query(`UPDATE transactions SET status = 'Captured' WHERE id = $1`, [a]);
    await db.query(`UPDATE attempts SET state = 'captured', processed_at = '2026-09-05T08:00:00Z' WHERE id = $1`, [a1]);
    await db.query(`UPDATE transactions SET status = 'Refund Requested', captured_amount_minor = 2000 WHERE id = $1`, [
      a,
    ]);
    const late = await seedRefund(db, a, 'refund', '1000', 'Processing');
    await db.query(`UPDATE refunds SET attempt_id = $2 WHERE id = $1`, [late, a1]);
    await db.query(`UPDATE refunds SET status = 'Completed' WHERE id = $1`, [late]);
    await db.query(`UPDATE transactions SET status = 'Partially Refunded' WHERE id = $1`, [a]);
    // B: USD 30.00, a partial authorization of 15.00 on attempt 1 (4 h after the failure); a refund of
    // 15.00 completed, then failed at the processor (the Stripe recheck), and a refund of 5.00.
    const b = await seedTxn(db, m, { amount: '3000', submitted: '2026-09-01T12:00:00Z', ...visa, status: 'In Retry' });
    const b1 = await seedAttempt(db, b, 1, 'pending', null);
    await db.query(
      `UPDATE attempts SET state = 'captured', processed_at = '2026-09-01T16:00:00Z', partial_amount_minor = 1500
        WHERE id = $1`,
      [b1],
    );
    const reversed = await seedRefund(db, b, 'refund', '1500', 'Completed');
    await db.query(`UPDATE refunds SET status = 'Failed' WHERE id = $1`, [reversed]);
    await seedRefund(db, b, 'refund', '500', 'Completed');

    const check = async () => {
      const { json } = await get(mixed, '?from=2026-09-01&to=2026-09-01');
      expect(json.currencies).toHaveLength(1);
      const usd = json.currencies[0];
      expect(usd.totals).toEqual(
        fig({
          failed_count: 2,
          failed_amount: 40,
          // Two transactions recovered, not three captures; the amount is every capture's money, and
          // the late capture's refund is a refund: net is what the merchant keeps.
          recovered_count: 2,
          recovered_amount: 35,
          recovery_rate: 1,
          amount_recovery_rate: 0.875,
          attempts: 3,
          attempts_per_recovery: 1.5,
          refunded_count: 2,
          refunded_amount: 15,
          net_recovered_amount: 20,
        }),
      );
      expect(usd.success_by_attempt).toEqual([
        { attempt_number: 1, attempts: 2, recovered: 1, success_rate: 0.5 },
        { attempt_number: 2, attempts: 1, recovered: 1, success_rate: 1 },
      ]);
      expect(usd.time_to_recover).toMatchObject({ recovered_count: 2, p50_hours: 4, p90_hours: 72 });
      for (const dim of ['decline_code', 'decline_class', 'card_network', 'bin', 'country']) {
        expect(usd.breakdowns[dim]).toHaveLength(1);
        expect(usd.breakdowns[dim][0]).toMatchObject({ recovered_count: 2, recovered_amount: 35, refunded_amount: 15 });
      }
      // The same figures from the rows themselves.
      const [rows]: Record<string, string>[] = await db.query(
        `SELECT (SELECT count(DISTINCT transaction_id) FROM attempts WHERE merchant_id = $1 AND state = 'captured')::text
                  AS recovered,
                (SELECT sum(coalesce(partial_amount_minor, amount_minor)) FROM attempts
                  WHERE merchant_id = $1 AND state = 'captured')::text AS captured,
                (SELECT sum(amount_minor) FROM refunds WHERE merchant_id = $1 AND kind = 'refund'
                    AND status = 'Completed')::text AS refunded`,
        [m],
      );
      expect(rows).toEqual({ recovered: '2', captured: '3500', refunded: '1500' });
    };
    await check();
    await AnalyticsRepository.fold(db);
    await check();
  });

  it('puts each transaction on its UTC submission day and ISO week across a year end, and `from`/`to` are inclusive', async () => {
    const edges = await createMerchant();
    const m = await merchantRowId(db, edges.login);
    const card = { network: 'visa', bin: '411111', country: 'US', code: '51', cls: 'Soft Failure' as const };
    // Sunday 23:59:59 and Monday 00:00:00 UTC at both ISO week boundaries around the new year.
    for (const [submitted, amount] of [
      ['2026-12-27T23:59:59Z', '100'],
      ['2026-12-28T00:00:00Z', '200'],
      ['2027-01-03T23:59:59Z', '400'],
      ['2027-01-04T00:00:00Z', '800'],
    ] as const) {
      await seedTxn(db, m, { amount, submitted, ...card, status: 'Failed' });
    }
    const week = (await get(edges, '?from=2026-12-27&to=2027-01-04&bucket=week')).json.currencies[0];
    expect(week.series.map((p: any) => [p.period_start, p.failed_count, p.failed_amount])).toEqual([
      ['2026-12-21', 1, 1],
      ['2026-12-28', 2, 6],
      ['2027-01-04', 1, 8],
    ]);
    expect(week.totals).toMatchObject({ failed_count: 4, failed_amount: 15 });
    const day = (await get(edges, '?from=2026-12-28&to=2027-01-03')).json.currencies[0];
    expect(day.series).toHaveLength(7);
    expect(day.series.filter((p: any) => p.failed_count > 0).map((p: any) => p.period_start)).toEqual([
      '2026-12-28',
      '2027-01-03',
    ]);
    expect(day.totals).toMatchObject({ failed_count: 2, failed_amount: 6 });
    // A one-day range holds exactly that day.
    const one = (await get(edges, '?from=2027-01-04&to=2027-01-04&bucket=week')).json.currencies[0];
    expect(one.totals).toMatchObject({ failed_count: 1, failed_amount: 8 });
    expect(one.series.map((p: any) => p.period_start)).toEqual(['2027-01-04']);
  });

  it("shows only the merchant's own figures, and an empty range answers no currency", async () => {
    const theirs = (await get(other, RANGE)).json;
    expect(theirs.currencies).toHaveLength(1);
    expect(theirs.currencies[0].totals).toMatchObject({ failed_count: 1, failed_amount: 999, recovered_count: 1 });
    expect((await get(merchant, '?from=2025-01-01&to=2025-01-31')).json.currencies).toEqual([]);
  });

  it('refuses bad parameters with 400 RET400 naming the parameter', async () => {
    for (const [q, name] of [
      ['?from=2026-13-01&to=2026-12-01', 'from'],
      ['?from=2026-10-05&to=2026-10-04', 'from'],
      ['?from=2020-01-01&to=2026-10-04', 'from'],
      ['?to=yesterday', 'to'],
      ['?bucket=month', 'bucket'],
      ['?breakdown_limit=0', 'breakdown_limit'],
      ['?colour=red', 'colour'],
      // Postgres has no year 0.
      ['?to=0000-12-31', 'to'],
      ['?from=0000-12-31&to=0001-01-05', 'from'],
    ] as const) {
      const r = await get(merchant, q);
      expect(r.status, q).toBe(400);
      expect(r.json).toEqual({ code: 'RET400', message: `Invalid parameter: ${name}` });
    }
  });

  it('starts the default range no earlier than 0001-01-01', async () => {
    const r = await get(merchant, '?to=0001-01-05');
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ from: '0001-01-01', to: '0001-01-05', currencies: [] });
  });
});
