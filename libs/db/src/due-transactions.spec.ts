import { excessFeeAt } from '@retain/domain';
import type { EntityManager } from 'typeorm';
import { describe, expect, it } from 'vitest';
import { useScratchMerchant } from '../test/scratch-merchant';
import { TransactionEntity } from './entities/transaction.entity';
import { AttemptScheduleRepository } from './repositories/attempt-schedule.repository';
import { setFieldsMany } from './repositories/set-fields-many';

// Migration DueTransactions: the retry schedule's index lives in transaction_due, kept equal to
// transactions.next_attempt_at by triggers, so that a schedule update of a transaction is HOT (no
// entry in any of the table's indexes), and the tick still hands out exactly the due transactions.
describe('the retry schedule outside the transactions table (real Postgres)', () => {
  const scratch = useScratchMerchant('due_', ['attempts']);

  /** `n` transactions of the scratch merchant, prefix `p`, due at `due` (SQL, per row g) or not; `sql`: where. */
  const insert = async (
    p: string,
    n: number,
    due: string | null,
    status = 'In Retry',
    sql: Pick<typeof scratch.db, 'query'> = scratch.db,
  ): Promise<string[]> =>
    (
      await sql.query(
        `INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, review_status, amount_minor,
           currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code, subscription_id, account_id,
           account, subscription, payment_method, card_kind, attempt_count, next_attempt_at)
         SELECT md5($3 || g), $1, $2, $3 || g, $5, 'passed', 1000, 'USD', now(), now(), now(), 'd', '05',
           $3 || 's' || g, $3 || 'a' || g, '{}'::jsonb, '{}'::jsonb, '{}'::jsonb, 'pan', 1, ${due ?? 'NULL'}
         FROM generate_series(1, $4::int) AS g ORDER BY g RETURNING id`,
        [scratch.merchantId, scratch.submissionId, p, n, status],
      )
    ).map((r: { id: string }) => r.id);
  /** The schedule as the tick reads it, and as the transactions say it, of the scratch merchant. */
  const schedules = async () => {
    const [index, column] = await Promise.all([
      scratch.db.query(
        `SELECT d.transaction_id AS id, d.due_at AS at FROM transaction_due d
           JOIN transactions t ON t.id = d.transaction_id WHERE t.merchant_id = $1 ORDER BY 1`,
        [scratch.merchantId],
      ),
      scratch.db.query(
        `SELECT id, next_attempt_at AS at FROM transactions WHERE merchant_id = $1 AND next_attempt_at IS NOT NULL ORDER BY 1`,
        [scratch.merchantId],
      ),
    ]);
    return { index, column };
  };

  /**
   * Runs `fn` in one transaction, rolled back, rows and claims alike: other spec files' due rows (the
   * database is shared) are claimed too and must stay as they were, and only ours are looked at; a
   * retry-worker still running from another file cannot see (and claim) ours, uncommitted.
   */
  const rolledBack = async (fn: (m: EntityManager) => Promise<void>): Promise<void> => {
    const runner = scratch.db.createQueryRunner();
    await runner.startTransaction();
    try {
      await fn(runner.manager);
    } finally {
      await runner.rollbackTransaction();
      await runner.release();
    }
  };

  it('follows next_attempt_at through inserts, updates (SQL, entity save, grouped), clears and deletes', async () => {
    const due = await insert('f', 3, `now() + interval '1 hour'`);
    const idle = await insert('i', 2, null);
    let s = await schedules();
    expect(s.index).toHaveLength(3);
    expect(s.index).toEqual(s.column);

    await scratch.db.query(`UPDATE transactions SET next_attempt_at = now() + interval '2 days' WHERE id = $1`, [
      idle[0],
    ]);
    await scratch.db.query(`UPDATE transactions SET next_attempt_at = NULL WHERE id = $1`, [due[0]]);
    await scratch.db.query(`UPDATE transactions SET attempt_count = attempt_count + 1 WHERE id = ANY($1::uuid[])`, [
      due,
    ]);
    const entity = await scratch.db.getRepository(TransactionEntity).findOneByOrFail({ id: due[1] });
    entity.nextAttemptAt = new Date(Date.now() + 86_400_000);
    await scratch.db.getRepository(TransactionEntity).save(entity);
    const rows = await scratch.db.getRepository(TransactionEntity).findBy([{ id: idle[1]! }, { id: due[2]! }]);
    await scratch.db.transaction((m) =>
      setFieldsMany(
        m,
        TransactionEntity,
        rows.map((row) => ({
          row,
          fields: { nextAttemptAt: row.id === due[2] ? null : new Date(Date.now() + 3_600_000) },
        })),
      ),
    );
    s = await schedules();
    expect(s.index.map((r: { id: string }) => r.id).sort()).toEqual([idle[0], idle[1], due[1]].sort());
    expect(s.index).toEqual(s.column);

    await scratch.db.query(`DELETE FROM transactions WHERE id = ANY($1::uuid[])`, [[...due, ...idle]]);
    s = await schedules();
    expect(s.index).toEqual([]);
    const [{ n }] = await scratch.db.query(
      `SELECT count(*)::int AS n FROM transaction_due WHERE transaction_id = ANY($1::uuid[])`,
      [[...due, ...idle]],
    );
    expect(n).toBe(0);
  });

  it('the tick claims the due transactions only, in due order, each once, and clears their schedule', async () => {
    const schedule = new AttemptScheduleRepository();
    await rolledBack(async (m) => {
      const late = await insert('l', 2, `now() - interval '1 minute' + g * interval '1 second'`, 'In Retry', m);
      const early = await insert('e', 2, `now() - interval '1 hour' + g * interval '1 second'`, 'In Retry', m);
      const future = await insert('u', 2, `now() + interval '1 hour'`, 'In Retry', m);
      const stopped = await insert('s', 1, `now() - interval '2 hours'`, 'In Retry', m);
      await m.query(`UPDATE transactions SET stop_requested_at = now() WHERE id = $1`, [stopped[0]]);
      const captured = await insert('c', 1, `now() - interval '2 hours'`, 'Captured', m);
      const claimed = await schedule.claimDue(m, 10_000);
      const ours: { transaction_id: string }[] = await m.query(
        `SELECT transaction_id FROM attempts WHERE id = ANY($1::uuid[]) AND merchant_id = $2 ORDER BY scheduled_for`,
        [claimed, scratch.merchantId],
      );
      expect(ours.map((a) => a.transaction_id)).toEqual([...early, ...late]);
      expect(await schedule.claimDue(m, 10_000)).toEqual([]);
      const left: { id: string }[] = await m.query(
        `SELECT d.transaction_id AS id FROM transaction_due d JOIN transactions t ON t.id = d.transaction_id
          WHERE t.merchant_id = $1 ORDER BY 1`,
        [scratch.merchantId],
      );
      expect(left.map((r) => r.id)).toEqual([...future, ...stopped, ...captured].sort());
      const [{ n }] = await m.query(
        `SELECT count(*)::int AS n FROM transactions WHERE id = ANY($1::uuid[]) AND next_attempt_at IS NULL AND attempt_count = 2`,
        [[...early, ...late]],
      );
      expect(n).toBe(4);
    });
  });

  it("a claimed transaction's attempt carries its schedule, plan, amount, card, retry number, fee risked and deposit flag", async () => {
    const schedule = new AttemptScheduleRepository();
    await rolledBack(async (m) => {
      const [visa, amex] = await insert('p', 2, `now() - interval '1 day' + g * interval '1 minute'`, 'In Retry', m);
      const plan = { rule: 'adaptive', slot: { day_after_failure: 3, local_hour: 9 }, policy_version: 'adaptive-x' };
      await m.query(
        `UPDATE transactions SET next_attempt_plan = $2, card_hmac = repeat('a', 64), card_network = 'Visa',
                amount_minor = 1999, currency = 'EUR', attempt_count = 3, forced_deposit_planned = true WHERE id = $1`,
        [visa, JSON.stringify(plan)],
      );
      await m.query(`UPDATE transactions SET card_network = 'Amex' WHERE id = $1`, [amex]);
      const claimed = await schedule.claimDue(m, 10_000);
      const rows: Record<string, unknown>[] = await m.query(
        `SELECT a.transaction_id, a.merchant_id, a.retry_number, a.state, abs(extract(epoch FROM a.scheduled_for - t.due_at)) < 0.001 AS on_time,
                a.amount_minor::int AS amount_minor, a.currency, a.card_hmac, a.card_network, a.plan,
                a.network_fee_risked_minor, a.forced_deposit
           FROM attempts a JOIN (VALUES ($2::uuid, now() - interval '1 day' + interval '1 minute'),
                                        ($3::uuid, now() - interval '1 day' + interval '2 minutes')) AS t(id, due_at)
             ON t.id = a.transaction_id
          WHERE a.id = ANY($1::uuid[]) ORDER BY a.retry_number DESC`,
        [claimed, visa, amex],
      );
      expect(rows).toEqual([
        {
          transaction_id: visa,
          merchant_id: scratch.merchantId,
          retry_number: 4,
          state: 'pending',
          on_time: true,
          amount_minor: 1999,
          currency: 'EUR',
          card_hmac: 'a'.repeat(64),
          card_network: 'Visa',
          plan,
          network_fee_risked_minor: excessFeeAt('Visa', new Date()),
          forced_deposit: true,
        },
        {
          transaction_id: amex,
          merchant_id: scratch.merchantId,
          retry_number: 2,
          state: 'pending',
          on_time: true,
          amount_minor: 1000,
          currency: 'USD',
          card_hmac: null,
          card_network: 'Amex',
          plan: null,
          network_fee_risked_minor: 0,
          forced_deposit: false,
        },
      ]);
    });
  });

  it('a schedule update of a transaction is HOT: it writes no index entry', async () => {
    const ids = await insert('h', 2000, `now() + interval '1 day'`);
    // Spread over the table as the tick's and the records' batches are: one row in 20.
    const some = ids.filter((_, i) => i % 20 === 0);
    const hot = await scratch.db.transaction(async (m) => {
      const before = await m.query(`SELECT pg_stat_get_xact_tuples_hot_updated('transactions'::regclass)::int AS n`);
      await m.query(
        `UPDATE transactions SET next_attempt_at = NULL, next_attempt_plan = NULL, attempt_count = attempt_count + 1,
           updated_at = now() WHERE id = ANY($1::uuid[])`,
        [some],
      );
      const after = await m.query(`SELECT pg_stat_get_xact_tuples_hot_updated('transactions'::regclass)::int AS n`);
      return after[0].n - before[0].n;
    });
    expect(hot).toBe(some.length);
  });
});
