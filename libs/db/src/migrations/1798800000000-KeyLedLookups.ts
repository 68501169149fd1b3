import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The intake's lookups by key stay lookups by key whatever the statistics say (issue 14).
 *
 * A POST asks which of its 1,000 ids, subscriptions and card fingerprints this merchant already
 * has. Written as `merchant_id = $1 AND key = ANY($2)`, the planner weighs 1,000 index probes against
 * reading "the merchant's few rows", and takes the latter whenever the statistics say the merchant
 * is small: a new merchant, a table not analyzed since it grew. Measured on one merchant with stale
 * statistics: 18 ms per POST at 21,000 rows, 80 ms at 81,000, 369 ms at 201,000, growing with
 * the merchant (the same lookups by key take 2-6 ms at any of these sizes).
 *
 * - The unique indexes these lookups use lead with the key: (merchant_txn_id, merchant_id) and
 *   (subscription_id, merchant_id) for the subscription in recovery. The same columns, so the same
 *   uniqueness (and the same names, which the intake's race handling names).
 * - The card fingerprint index gains merchant_id: (card_hmac, merchant_id) answers "does this
 *   merchant have this fingerprint" from the index alone.
 * - Both lookups are SQL functions whose plans cannot read the merchant's rows: they take rows by
 *   key only (a MATERIALIZED CTE, or a subquery with OFFSET 0, one per fingerprint, keeps the
 *   merchant filter out of the scan), and the function's own settings leave no scan but by index
 *   (sequential and bitmap scans off). A function with SET clauses is never inlined, so the settings
 *   hold for these statements only. A fingerprint's lookup stops at this merchant's first row.
 */
export class KeyLedLookups1798800000000 implements MigrationInterface {
  name = 'KeyLedLookups1798800000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE transactions DROP CONSTRAINT transactions_merchant_txn`);
    await q.query(
      `ALTER TABLE transactions ADD CONSTRAINT transactions_merchant_txn UNIQUE (merchant_txn_id, merchant_id)`,
    );
    await q.query(`DROP INDEX IF EXISTS transactions_recovering_subscription`);
    await q.query(
      `CREATE UNIQUE INDEX transactions_recovering_subscription ON transactions (subscription_id, merchant_id)
       WHERE status IN ('Failed', 'In Retry', 'Stop Requested') AND review_status <> 'rejected'`,
    );
    await q.query(`DROP INDEX IF EXISTS transactions_card`);
    await q.query(`CREATE INDEX transactions_card ON transactions (card_hmac, merchant_id)`);
    await q.query(`
      CREATE FUNCTION retain_stored_matching(p_merchant uuid, p_ids text[], p_subscriptions text[])
      RETURNS TABLE (merchant_txn_id varchar, subscription_id varchar, status varchar, review_status varchar)
      LANGUAGE sql STABLE
      SET enable_seqscan = off SET enable_bitmapscan = off
      AS $fn$
        WITH by_id AS MATERIALIZED (
          SELECT t.merchant_id, t.merchant_txn_id, t.subscription_id, t.status, t.review_status
            FROM transactions t WHERE t.merchant_txn_id = ANY(p_ids)
        ), recovering AS MATERIALIZED (
          SELECT t.merchant_id, t.merchant_txn_id, t.subscription_id, t.status, t.review_status
            FROM transactions t
           WHERE t.subscription_id = ANY(p_subscriptions)
             AND t.status IN ('Failed', 'In Retry', 'Stop Requested') AND t.review_status <> 'rejected'
        )
        SELECT b.merchant_txn_id, b.subscription_id, b.status, b.review_status FROM by_id b
         WHERE b.merchant_id = p_merchant
        UNION
        SELECT r.merchant_txn_id, r.subscription_id, r.status, r.review_status FROM recovering r
         WHERE r.merchant_id = p_merchant
      $fn$`);
    await q.query(`
      CREATE FUNCTION retain_known_fingerprints(p_merchant uuid, p_fingerprints bpchar[])
      RETURNS TABLE (card_hmac bpchar)
      LANGUAGE sql STABLE
      SET enable_seqscan = off SET enable_bitmapscan = off
      AS $fn$
        SELECT k.h FROM unnest(p_fingerprints) AS k(h)
         CROSS JOIN LATERAL (
           SELECT 1 FROM (SELECT t.merchant_id FROM transactions t WHERE t.card_hmac = k.h OFFSET 0) by_card
            WHERE by_card.merchant_id = p_merchant LIMIT 1
         ) hit
      $fn$`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP FUNCTION IF EXISTS retain_known_fingerprints(uuid, bpchar[])`);
    await q.query(`DROP FUNCTION IF EXISTS retain_stored_matching(uuid, text[], text[])`);
    await q.query(`DROP INDEX IF EXISTS transactions_card`);
    await q.query(`CREATE INDEX transactions_card ON transactions (card_hmac)`);
    await q.query(`DROP INDEX IF EXISTS transactions_recovering_subscription`);
    await q.query(
      `CREATE UNIQUE INDEX transactions_recovering_subscription ON transactions (merchant_id, subscription_id)
       WHERE status IN ('Failed', 'In Retry', 'Stop Requested') AND review_status <> 'rejected'`,
    );
    await q.query(`ALTER TABLE transactions DROP CONSTRAINT transactions_merchant_txn`);
    await q.query(
      `ALTER TABLE transactions ADD CONSTRAINT transactions_merchant_txn UNIQUE (merchant_id, merchant_txn_id)`,
    );
  }
}
