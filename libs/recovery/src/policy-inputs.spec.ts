import { createDataSource } from '@retain/db';
import { POLICY_VERSION } from '@retain/domain';
import type { DataSource, EntityManager } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { policyInputsFor } from './policy-inputs';

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
});
