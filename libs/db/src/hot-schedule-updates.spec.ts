import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DataSource } from 'typeorm';
import { scratchDatabaseUrl } from '../test/scratch-database';
import { scratchMerchant } from '../test/scratch-merchant';
import { createDataSource, dropDatabase, migrate } from './data-source';
import { TransactionEntity } from './entities';
import { CLEAR_CLAIMED_SQL } from './repositories/attempt-schedule.repository';
import { setFieldsMany } from './repositories/set-fields-many';

const ROWS = 200;
const BATCH = 50;
const ROUNDS = 4;

// Migration RoomForHotUpdates: a transaction in retry is updated twice per attempt (the tick clears
// its schedule, the record of a decline plans the next attempt). Neither changes an indexed column,
// so with room on the page for the row's next version neither writes an index entry (a HOT update).
// Rows here are as wide as the service's (~1 kB: card data, payment method, a plan), loaded in one
// statement like a POST's, then updated by the tick's statement and the record's, in batches that
// each commit, round after round. (status_changed_at is stored to the millisecond, as the service
// writes it from JavaScript: the record writes it back unchanged.)
// After each batch, VACUUM removes the dead versions, as a page's own pruning does when it is next
// read. That pruning is not used here because it waits for every transaction of the whole server
// older than the dead versions (a snapshot's xmin spans all databases), and the other test files
// running meanwhile hold some: with one transaction left open in another database, 38% of these
// updates were HOT. VACUUM waits only for this database's transactions.
describe('schedule updates of transactions in retry are HOT (real Postgres)', () => {
  // A database of its own and one connection: the table's statistics count this file's updates only,
  // flushed on demand, and VACUUM waits for no other file's transactions.
  const url = scratchDatabaseUrl('hot');
  let db: DataSource;
  let merchantId = '';

  beforeAll(async () => {
    await migrate(url);
    db = createDataSource(url, 1);
    await db.initialize();
    const scratch = await scratchMerchant(db, 'hot_');
    merchantId = scratch.merchantId;
    await db.query(
      `INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, review_status, amount_minor,
         currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code, subscription_id, account_id,
         account, subscription, payment_method, card_kind, card_enc, card_key_id, card_hmac, card_bin, card_last4,
         card_network, expiration_date, attempt_count, next_attempt_at, next_attempt_plan)
       SELECT md5('hot' || g || clock_timestamp()), $1, $2, 'hot_inv_' || g, 'In Retry', 'passed', 1999, 'USD', now(),
         now(), date_trunc('milliseconds', now()), 'div-1', '51', 'sub_hot_' || g, 'acct_hot_' || g,
         jsonb_build_object('id', 'acct_hot_' || g, 'email', 'customer' || g || '@example.com'),
         jsonb_build_object('id', 'sub_hot_' || g),
         jsonb_build_object('id', 'pm_hot_' || g, 'is_tokenized', false, 'credit_card',
           jsonb_build_object('last4', '1111', 'expiration_date', '202912', 'brand', 'visa'),
           'billing_address', jsonb_build_object('line1', g || ' Main Street', 'city', 'Springfield',
             'postal_code', '12345', 'country', 'US')),
         'pan', repeat('e', 96), 'k1', md5('card' || g) || md5('hmac' || g), '411111', '1111', 'visa', '202912', 1,
         now() + interval '1 day',
         jsonb_build_object('rule', 'adaptive', 'policy', 'adaptive-v3', 'estimate', 0.1234,
           'slot', jsonb_build_object('day_after_failure', 3, 'local_hour', 9, 'zone', 'America/New_York'),
           'why', repeat('w', 160))
       FROM generate_series(1, ${ROWS}) AS g`,
      [merchantId, scratch.submissionId],
    );
  });
  afterAll(async () => {
    await db?.destroy();
    await dropDatabase(url);
  });

  /** The table's update counts so far, this connection's pending statistics flushed first. */
  const counts = async (): Promise<{ updates: number; hot: number }> => {
    await db.query(`SELECT pg_stat_force_next_flush()`);
    const [row]: { updates: number; hot: number }[] = await db.query(
      `SELECT n_tup_upd::int AS updates, n_tup_hot_upd::int AS hot FROM pg_stat_user_tables WHERE relname = 'transactions'`,
    );
    return row!;
  };

  it('the tick clearing the schedule and a decline planning the next attempt write no index entry', async () => {
    const [{ avg }]: { avg: number }[] = await db.query(
      `SELECT avg(pg_column_size(t.*))::int AS avg FROM transactions t WHERE merchant_id = $1`,
      [merchantId],
    );
    expect(avg).toBeGreaterThan(900);
    const ids: string[] = (
      await db.query(`SELECT id FROM transactions WHERE merchant_id = $1 ORDER BY id`, [merchantId])
    ).map((r: { id: string }) => r.id);
    const before = await counts();
    for (let round = 1; round <= ROUNDS; round++) {
      for (let off = 0; off < ids.length; off += BATCH) {
        const batch = ids.slice(off, off + BATCH);
        await db.transaction((m) => m.query(CLEAR_CLAIMED_SQL, [batch]));
        await db.query(`VACUUM transactions`);
      }
      for (let off = 0; off < ids.length; off += BATCH) {
        const batch = ids.slice(off, off + BATCH);
        await db.transaction(async (m) => {
          const rows = await m.getRepository(TransactionEntity).findBy(batch.map((id) => ({ id })));
          // The fields a decline's record sets on a transaction already in retry.
          await setFieldsMany(
            m,
            TransactionEntity,
            rows.map((row) => ({
              row,
              fields: {
                status: row.status,
                nextAttemptAt: new Date(Date.now() + round * 86_400_000),
                nextAttemptPlan: { rule: 'adaptive', estimate: 0.1 * round, why: 'w'.repeat(160) },
                authCodeDescription: 'Soft Failure',
                statusChangedAt: row.statusChangedAt,
              },
            })),
          );
        });
        await db.query(`VACUUM transactions`);
      }
    }
    const after = await counts();
    const updates = after.updates - before.updates;
    expect(updates).toBe(ROWS * ROUNDS * 2);
    // At fillfactor 90 about half of these were HOT (a ~1 kB row's next version did not fit).
    expect((after.hot - before.hot) / updates).toBeGreaterThanOrEqual(0.9);
  });
});
