import {
  closeTestDb,
  insertAttemptRow,
  insertMerchantRow,
  insertRefundRow,
  insertTransactionRow,
  startApp,
  testDb,
  usePrivateDatabase,
  type RunningApp,
} from '@retain/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/** One unlabelled series of an app's /metrics (the `app` default label aside), NaN when absent. */
async function scrape(app: RunningApp, name: string): Promise<number> {
  const text = await (await fetch(`${app.url}/metrics`)).text();
  return Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\d+)$`, 'm').exec(text)?.[1] ?? NaN);
}

// The two money alerts (RetainUnreconciledAttempts, RetainRefundsAwaitingNotification) read gauges that
// each pod of the app exports. They must say what Postgres says at the scrape, on every replica: a
// gauge set only at the end of the refund batch (once a day) read 0 on a pod started since (the critical
// alert resolved while refunds stayed unsettled) and kept firing for a day after they settled; set only
// by the retry tick, a replica the tick skipped kept an old count.
describe('money alert gauges follow Postgres at each scrape', () => {
  usePrivateDatabase('moneyg');
  let batcher: RunningApp;
  let worker: RunningApp;

  beforeAll(async () => {
    [batcher, worker] = await Promise.all([
      // No batch runs during the test (1 January only); the alert thresholds ÷ the scale are milliseconds.
      startApp('refund-batcher', { env: { REFUND_BATCH_CRON: '0 0 1 1 *', RETRY_TIME_SCALE: '1000000' } }),
      // The tick (which reconciles) runs once at start, then not for an hour: a replica it does not reach.
      startApp('retry-worker', { env: { SCHEDULER_TICK: '1h', RETRY_TIME_SCALE: '1000000' } }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([batcher.stop(), worker.stop()]);
    await closeTestDb();
  });

  it('retain_refunds_awaiting_notification: up while a refund awaits its notification, down once settled', async () => {
    expect(await scrape(batcher, 'retain_refunds_awaiting_notification')).toBe(0);
    const db = await testDb();
    const t = await insertTransactionRow(db, await insertMerchantRow(db), {
      status: 'Refund Requested',
      capturedMinor: '1999',
    });
    const refund = await insertRefundRow(db, t, 'refund', '1999');
    // Accepted by the processor without a result (Adyen `received`) an hour ago: past the threshold.
    await db.query(
      `UPDATE refunds SET processor_refund_id = 'psp_awaiting', sent_at = now() - interval '1 hour' WHERE id = $1`,
      [refund],
    );
    expect(await scrape(batcher, 'retain_refunds_awaiting_notification')).toBe(1);
    await db.query(`UPDATE refunds SET status = 'Completed' WHERE id = $1`, [refund]);
    expect(await scrape(batcher, 'retain_refunds_awaiting_notification')).toBe(0);
  });

  it('retain_unreconciled_attempts: up while an attempt stays unknown, down once resolved', async () => {
    expect(await scrape(worker, 'retain_unreconciled_attempts')).toBe(0);
    const db = await testDb();
    const t = await insertTransactionRow(db, await insertMerchantRow(db));
    const a = await insertAttemptRow(db, t, { state: 'unknown', preparedAt: new Date(Date.now() - 3_600_000) });
    // Its next lookup is not due: a tick reaching this pod would leave it unknown (as failing lookups do).
    await db.query(`UPDATE attempts SET lookup_after = now() + interval '1 day' WHERE id = $1`, [a.id]);
    expect(await scrape(worker, 'retain_unreconciled_attempts')).toBe(1);
    await db.query(`UPDATE attempts SET state = 'declined', status = 'Failed' WHERE id = $1`, [a.id]);
    expect(await scrape(worker, 'retain_unreconciled_attempts')).toBe(0);
  });
});
