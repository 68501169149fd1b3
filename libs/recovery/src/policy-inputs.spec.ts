import { createDataSource } from '@retain/db';
import { LEGACY_POLICY_VERSION, POLICY_VERSION, firstAttemptAt, recoveryWindowEnd } from '@retain/domain';
import type { DataSource, EntityManager } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { policyInputsFor, sharedPolicyReads, transactionWindowEnd } from './policy-inputs';

// Inside a database transaction every statement goes to one client: statements sent while another is
// out are queued by pg today (with a DeprecationWarning seen in the apps' output) and refused by pg 9.
describe('policyInputsFor on one transaction (real Postgres)', () => {
  let db: DataSource;
  let merchantId = '';
  let transactionId = '';

  beforeAll(async () => {
    db = createDataSource(process.env.DATABASE_URL!, 2);
    await db.initialize();
    const [m] = await db.query(
      `INSERT INTO merchants (merchant_vid, login) VALUES (md5(random()::text), 'inputs_' || md5(random()::text))
       RETURNING id`,
    );
    merchantId = m.id;
    const [sub] = await db.query(
      `INSERT INTO submissions (merchant_id, request_id, received_count, accepted_count, rejected_count)
       VALUES ($1, md5(random()::text), 1, 1, 0) RETURNING id`,
      [merchantId],
    );
    const [t] = await db.query(
      `INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, review_status, amount_minor,
         currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code, subscription_id, account_id,
         account, subscription, payment_method, card_kind, policy_version)
       VALUES (md5(random()::text), $1, $2, 'inputs-1', 'Failed', 'passed', 1999, 'USD', now(), now(), now(), 'd', '51',
         's-inputs', 'a-inputs', '{}'::jsonb, '{}'::jsonb, '{"billing_address":{"country":"US"}}'::jsonb, 'pan', $3)
       RETURNING id`,
      [merchantId, sub.id, POLICY_VERSION],
    );
    transactionId = t.id;
  });
  afterAll(async () => {
    await db.query(`DELETE FROM transactions WHERE merchant_id = $1`, [merchantId]);
    await db.destroy();
  });

  it('sends its statements one at a time on the caller’s transaction, never two at once', async () => {
    let out = 0;
    let overlapping = 0;
    const inputs = await db.transaction(async (m: EntityManager) => {
      // The caller's transaction, counting statements sent while one is still out.
      const tracked = {
        query: async (sql: string, params?: unknown[]) => {
          if (out++ > 0) overlapping++;
          try {
            return await m.query(sql, params);
          } finally {
            out--;
          }
        },
      };
      return policyInputsFor(tracked, merchantId, transactionId, true);
    });
    expect(overlapping).toBe(0);
    // And the inputs are the adaptive policy's (the account's history was read).
    expect(inputs).toHaveProperty('accountOutcomes', { approvals: 0, declines: 0 });
  });

  it('gives the same inputs from reads shared by many plans (the review), reading them once', async () => {
    const alone = await policyInputsFor(db, merchantId, transactionId, true);
    const shared = await sharedPolicyReads(db, [{ merchantId, transactionId }]);
    let statements = 0;
    const counted = { query: (sql: string, params?: unknown[]) => (statements++, db.query(sql, params)) };
    expect(await policyInputsFor(counted, merchantId, transactionId, true, shared)).toEqual(alone);
    // The row, the slot counts (first use of its class), no history: it was read with the others.
    expect(statements).toBe(2);
    statements = 0;
    expect(await policyInputsFor(counted, merchantId, transactionId, true, shared)).toEqual(alone);
    expect(statements).toBe(1);
  });

  it('reads the original decline at its timestamp but never after the submission (a Visa 57 sent with a later timestamp)', async () => {
    // Submitted on 24 Oct 2026 at 20:00 UTC with a `timestamp` 7 hours later (local time sent as UTC).
    // The rules read the decline at the submission: an issuer's 57 was then read as 05 and retried
    // (network-rules.md), so the adaptive plan retries it like the review's classification does.
    const [sub] = await db.query(`SELECT submission_id FROM transactions WHERE id = $1`, [transactionId]);
    const [t] = await db.query(
      `INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, review_status, amount_minor,
         currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code, subscription_id, account_id,
         account, subscription, payment_method, card_kind, card_network, policy_version)
       VALUES (md5(random()::text), $1, $2, 'inputs-57', 'Failed', 'passed', 1999, 'USD', '2026-10-25T03:00:00Z',
         '2026-10-24T20:00:00Z', '2026-10-24T20:00:00Z', 'd', '57', 's-inputs-57', 'a-inputs-57', '{}'::jsonb,
         '{}'::jsonb, '{"billing_address":{"country":"US"}}'::jsonb, 'pan', 'visa', $3)
       RETURNING id`,
      [merchantId, sub.submission_id, POLICY_VERSION],
    );
    const submittedAt = new Date('2026-10-24T20:00:00Z');
    const plan = firstAttemptAt({
      ...(await policyInputsFor(db, merchantId, t.id, true)),
      startedAt: submittedAt,
      now: new Date('2026-10-24T20:00:05Z'),
      lastDecline: { responseCode: '57', merchantAdviceCode: null, at: submittedAt },
      network: 'visa',
      amountMinor: 1999n,
      cardHistory: [],
      cardDataVersion: null,
      timeScale: 1,
    });
    expect(plan).toMatchObject({ kind: 'retry' });
  });
});

describe('transactionWindowEnd (real Postgres)', () => {
  let db: DataSource;
  let merchantId = '';
  let submissionId = '';
  const DAY = 86_400_000;

  beforeAll(async () => {
    db = createDataSource(process.env.DATABASE_URL!, 2);
    await db.initialize();
    const [m] = await db.query(
      `INSERT INTO merchants (merchant_vid, login) VALUES (md5(random()::text), 'window_' || md5(random()::text))
       RETURNING id`,
    );
    merchantId = m.id;
    const [sub] = await db.query(
      `INSERT INTO submissions (merchant_id, request_id, received_count, accepted_count, rejected_count)
       VALUES ($1, md5(random()::text), 3, 3, 0) RETURNING id`,
      [merchantId],
    );
    submissionId = sub.id;
    await db.query(
      `INSERT INTO policy_experiments (id, merchant_id, name, holdout_share, holdout_policy, variants)
       VALUES ('exp-window', $1, 'short window', 0, $2, $3::jsonb)`,
      [
        merchantId,
        LEGACY_POLICY_VERSION,
        JSON.stringify([
          { name: 'short', policy_version: POLICY_VERSION, weight: 1, learning: false, config: { windowDays: 3 } },
          // Stored before the tunables had ranges (TUNABLE_LIMITS): a window the planner would walk day by day.
          {
            name: 'vast',
            policy_version: POLICY_VERSION,
            weight: 1,
            learning: false,
            config: { windowDays: 1_000_000, maxAttempts: 3 },
          },
        ]),
      ],
    );
  });
  afterAll(async () => {
    await db.query(`DELETE FROM transactions WHERE merchant_id = $1`, [merchantId]);
    await db.query(`DELETE FROM policy_experiments WHERE merchant_id = $1`, [merchantId]);
    await db.destroy();
  });

  const transaction = async (policyVersion: string, arm: string | null) => {
    const [t] = await db.query(
      `INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, review_status, amount_minor,
         currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code, subscription_id, account_id,
         account, subscription, payment_method, card_kind, policy_version, experiment_id, experiment_arm)
       VALUES (md5(random()::text), $1, $2, md5(random()::text), 'In Retry', 'passed', 1999, 'USD',
         now() - interval '2 days', now() - interval '1 day', now(), 'd', '51', md5(random()::text), 'a-window', '{}'::jsonb,
         '{}'::jsonb, '{"billing_address":{"country":"US"}}'::jsonb, 'pan', $3, $4, $5)
       RETURNING id, submitted_ts`,
      [merchantId, submissionId, policyVersion, arm ? 'exp-window' : null, arm],
    );
    return {
      id: t.id as string,
      merchantId,
      submittedTs: new Date(t.submitted_ts),
      policyVersion,
      experimentId: arm ? 'exp-window' : null,
      experimentArm: arm,
    };
  };

  it('is the window the policy inputs give, reading no more than the experiment arm', async () => {
    const cases = [
      await transaction(POLICY_VERSION, null),
      await transaction(LEGACY_POLICY_VERSION, null),
      await transaction(POLICY_VERSION, 'short'),
    ];
    const ends: number[] = [];
    for (const [i, txn] of cases.entries()) {
      for (const scale of [1, 1440]) {
        const inputs = await policyInputsFor(db, merchantId, txn.id, false);
        const expected = recoveryWindowEnd({ ...inputs, startedAt: txn.submittedTs, timeScale: scale });
        let statements = 0;
        const counted = { query: (sql: string, params?: unknown[]) => (statements++, db.query(sql, params)) };
        const end = await transactionWindowEnd(counted, txn, scale);
        expect(end.toISOString()).toBe(expected.toISOString());
        // The slot counts and the account history are a plan's inputs, not the window's.
        expect(statements).toBe(i === 2 ? 1 : 0);
        if (scale === 1) ends.push(end.getTime() - txn.submittedTs.getTime());
      }
    }
    // The arm's windowDays (3) is the experiment transaction's window; the others keep the default.
    expect(ends[2]).toBe(3 * DAY);
    expect(ends[0]).toBeGreaterThan(3 * DAY);
  });

  it('plans a variant stored with a setting out of its range by the default for that setting, keeping the others', async () => {
    const txn = await transaction(POLICY_VERSION, 'vast');
    const inputs = await policyInputsFor(db, merchantId, txn.id, false);
    expect(inputs.config).toEqual({ maxAttempts: 3 });
    const end = await transactionWindowEnd(db, txn, 1);
    expect(end.getTime() - txn.submittedTs.getTime()).toBe(30 * DAY);
  });
});
