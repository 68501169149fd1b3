import { beforeAll, describe, expect, it } from 'vitest';
import type { EntityManager } from 'typeorm';
import { nodes, type PlanNode } from '../test/plans';
import { useScratchMerchant } from '../test/scratch-merchant';
import { AttemptEntity } from './entities/attempt.entity';
import { TransactionEntity } from './entities/transaction.entity';
import { AttemptsRepository } from './repositories/attempts.repository';
import { setFieldsMany } from './repositories/set-fields-many';

// The retry worker's grouped UPDATEs (the in-flight marks of a prepared batch, the records of a
// batch's outcomes) find their rows by primary key, whatever the statistics say. Joined only on the
// batch's recordset, the planner read the table: with statistics never gathered it believed
// "pending and not prepared" matched one row, read them all and ran the recordset again for each one
// (37 ms for 27 rows in bench/attempts), and after ANALYZE it hashed a sequential scan of the table.
describe('plans of the grouped attempt updates (real Postgres)', () => {
  let attemptIds: string[] = [];
  let transactionIds: string[] = [];

  const scratch = useScratchMerchant('grouped_');

  beforeAll(async () => {
    transactionIds = (
      await scratch.db.query(
        `INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, review_status, amount_minor,
           currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code, subscription_id, account_id,
           account, subscription, payment_method, card_kind, attempt_count)
         SELECT md5(g::text || 'grouped'), $1, $2, 'g' || g, 'In Retry', 'passed', 1000, 'USD', now(), now(), now(),
           'd', '05', 's' || g, 'a' || g, '{}'::jsonb, '{}'::jsonb, '{}'::jsonb, 'pan', 1
         FROM generate_series(1, 20000) AS g RETURNING id`,
        [scratch.merchantId, scratch.submissionId],
      )
    ).map((r: { id: string }) => r.id);
    attemptIds = (
      await scratch.db.query(
        `INSERT INTO attempts (vid, retain_transaction_id, transaction_id, merchant_id, retry_number, state, scheduled_for,
           amount_minor, currency)
         SELECT md5(t.id::text), md5(t.id::text || 'rt'), t.id, $1, 1, 'pending', now(), 1000, 'USD'
           FROM unnest($2::uuid[]) AS t(id) RETURNING id`,
        [scratch.merchantId, transactionIds],
      )
    ).map((r: { id: string }) => r.id);
  }, 120_000);

  /** Runs `work` in a transaction rolled back, with each UPDATE it sends explained first: their plans. */
  const updatePlans = async (work: (m: EntityManager) => Promise<unknown>): Promise<PlanNode[][]> => {
    const runner = scratch.db.createQueryRunner();
    const plans: PlanNode[][] = [];
    await runner.startTransaction();
    try {
      const m = runner.manager;
      const query = m.query.bind(m);
      m.query = (async (sql: string, params?: unknown[]) => {
        if (/^\s*UPDATE/i.test(sql)) {
          const [row] = await runner.query(`EXPLAIN (FORMAT JSON) ${sql}`, params);
          plans.push(nodes(((row['QUERY PLAN'] ?? row) as { Plan: PlanNode }[])[0]!.Plan));
        }
        return query(sql, params);
      }) as typeof m.query;
      await work(m);
      return plans;
    } finally {
      await runner.rollbackTransaction();
      await runner.release();
    }
  };
  /** Every scan of `table` looks its rows up in the primary key (an index scan, or a bitmap of it). */
  const expectKeyed = (plan: PlanNode[], table: string) => {
    const shape = plan
      .map(
        (n) =>
          `${n['Node Type']}${n['Relation Name'] ? ` on ${n['Relation Name']}` : ''}${n['Index Name'] ? ` (${n['Index Name']})` : ''}`,
      )
      .join(' > ');
    const scans = plan.filter((n) => n['Relation Name'] === table && /Scan/.test(n['Node Type']));
    expect(scans.length, shape).toBeGreaterThan(0);
    for (const n of scans) {
      const index = n['Node Type'] === 'Bitmap Heap Scan' ? n.Plans?.[0]?.['Index Name'] : n['Index Name'];
      expect(`${n['Node Type']} ${index ?? ''}`, shape).toMatch(new RegExp(`^(Index|Bitmap Heap) Scan ${table}_pkey$`));
    }
  };

  const batch = (from: number) => attemptIds.slice(from, from + 60);
  const check = async () => {
    const prepared = await updatePlans((m) =>
      AttemptsRepository.markPreparedMany(
        m,
        batch(100).map((id) => ({
          id,
          at: new Date(),
          dataVersion: null,
          paymentMethodRef: null,
          paymentMethodView: {},
          processorAccountId: null,
        })),
      ),
    );
    expect(prepared).toHaveLength(1);
    expectKeyed(prepared[0]!, 'attempts');

    const attempts = await scratch.db.getRepository(AttemptEntity).findBy(batch(200).map((id) => ({ id })));
    const txns = await scratch.db
      .getRepository(TransactionEntity)
      .findBy(attempts.map((a) => ({ id: a.transactionId })));
    const recorded = await updatePlans(async (m) => {
      await setFieldsMany(
        m,
        AttemptEntity,
        attempts.map((row) => ({ row, fields: { state: 'declined', responseCode: '05', processedAt: new Date() } })),
      );
      await setFieldsMany(
        m,
        TransactionEntity,
        txns.map((row) => ({ row, fields: { nextAttemptAt: new Date(), attemptCount: 2 } })),
      );
    });
    expect(recorded).toHaveLength(2);
    expectKeyed(recorded[0]!, 'attempts');
    expectKeyed(recorded[1]!, 'transactions');
  };

  it('statistics never gathered: every row found by its primary key', check);
  it('after ANALYZE: the same', async () => {
    await scratch.db.query('ANALYZE attempts');
    await scratch.db.query('ANALYZE transactions');
    await check();
  });
});
