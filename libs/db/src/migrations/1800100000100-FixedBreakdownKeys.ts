import { classifyDecline } from '@retain/domain';
import type { MigrationInterface, QueryRunner } from 'typeorm';
import { txnDims } from './1797400000100-AnalyticsRollup';
import { RECOVERED } from './1797950000000-PartialAuthorizations';
import { append, bodies } from './1798200000000-PendingCounters';
import { GroupedIntakeRollup1798900000000 } from './1798900000000-GroupedIntakeRollup';
import { UPDATES } from './1799200000000-StatementRollupUpdates';

const TXN = ['failed_count', 'failed_amount', 'stopped_count', 'network_fees_avoided'];
const ATTEMPT = ['attempts', 'recovered_count', 'recovered_amount'];
const REFUND = ['refunded_count', 'refunded_amount'];
const sums = (counters: string[], alias: string) => counters.map((c) => `sum(${alias}${c})::bigint AS ${c}`).join(', ');
const nonZero = (counters: string[], alias: string) => counters.map((c) => `sum(${alias}${c}) <> 0`).join(' OR ');

/** The breakdowns whose keys came from columns that change after the review. */
export const FIXED_DIMS = ['decline_class', 'card_network', 'bin', 'country'] as const;

/**
 * SET items of an UPDATE of transactions (target `t`, its columns as before the UPDATE) fixing the
 * original card network, BIN and billing country from the row's current columns ('' for none), unless
 * fixed already. Run where the card may change for the first time (the review adopting another
 * payment method) and where the review ends.
 */
export const fixCardKeys = (t: string): string =>
  [
    `original_card_network = coalesce(${t}.original_card_network, ${t}.card_network, '')`,
    `original_card_bin = coalesce(${t}.original_card_bin, ${t}.card_bin, '')`,
    `original_country = coalesce(${t}.original_country, ${t}.payment_method->'billing_address'->>'country', '')`,
  ].join(',\n    ');

/** SET item fixing the original decline class from a description expression (what the review wrote), unless fixed. */
export const fixClassKey = (t: string, description: string): string =>
  `original_decline_class = coalesce(${t}.original_decline_class, ${description}, '')`;

/**
 * The columns the breakdowns read of transaction row `t`, named as the rollup's dimensions (txnDims)
 * read them: the original values once fixed, else (not reviewed yet) the current ones. coalesce stops
 * at the first value: a reviewed row's current columns are not even read. `fixed` false: the current
 * columns only (the definition before this migration, for down()).
 */
const keyColumns = (t: string, fixed = true): string => {
  const k = (original: string, current: string) => (fixed ? `coalesce(${t}.${original}, ${current})` : current);
  return `${t}.auth_code, ${k('original_decline_class', `${t}.auth_code_description`)} AS auth_code_description,
      ${k('original_card_network', `${t}.card_network`)} AS card_network,
      ${k('original_card_bin', `${t}.card_bin`)} AS card_bin,
      ${k('original_country', `${t}.payment_method->'billing_address'->>'country'`)} AS country`;
};
const KEY_COLUMNS = 'auth_code, auth_code_description, card_network, card_bin, country';

type Source = readonly [table: string, sign: string];
type Sources = readonly Source[];

/**
 * A statement's transaction rows (signed: new 1, old -1), added up by day, currency and the values
 * their keys come from first (the shape of GroupedIntakeRollup and StatementRollupUpdates): rows whose
 * counted values and keys did not change cancel before anything is expanded.
 */
const txnRow = ([src, s]: Source): string => `
  SELECT r.merchant_id, (r.submitted_ts AT TIME ZONE 'UTC')::date AS day, r.currency, ${keyColumns('r')},
         ${s} * (r.review_status <> 'rejected')::int AS failed_count,
         ${s} * CASE WHEN r.review_status <> 'rejected' THEN r.amount_minor ELSE 0 END AS failed_amount,
         ${s} * (r.status = 'Stopped')::int AS stopped_count,
         ${s} * coalesce(r.naive_network_fees_minor - r.network_fees_minor, 0) AS network_fees_avoided
    FROM ${src} r`;
const txnBody = (sources: Sources): string => {
  const signed = sources.map(txnRow).join(' UNION ALL ');
  return `
  INSERT INTO analytics_rollup_pending (merchant_id, day, currency, dim, key, ${TXN.join(', ')})
  SELECT t.merchant_id, t.day, t.currency, d.dim, d.key, ${sums(TXN, 't.')}
    FROM (SELECT merchant_id, day, currency, ${KEY_COLUMNS}, ${sums(TXN, '')} FROM (${signed}) x
           GROUP BY merchant_id, day, currency, ${KEY_COLUMNS} HAVING ${nonZero(TXN, '')}) t
    ${txnDims('t.country')}
   WHERE d.key IS NOT NULL
   GROUP BY t.merchant_id, t.day, t.currency, d.dim, d.key
  HAVING ${nonZero(TXN, 't.')};`;
};

/**
 * A statement's attempt rows, signed, added up by attempt (transaction, retry number, capture time: the
 * ttr key) first; each group left is looked up by key in transactions for its day and keys.
 */
const attemptBody = (sources: Sources): string => {
  const signed = sources
    .map(
      ([src, s]) => `SELECT a.transaction_id, a.retry_number,
        CASE WHEN a.state = 'captured' THEN a.processed_at END AS captured_at,
        ${s} * (a.state <> 'pending')::int AS attempts,
        ${s} * (a.state = 'captured')::int AS recovered_count,
        ${s} * CASE WHEN a.state = 'captured' THEN ${RECOVERED} ELSE 0 END AS recovered_amount
      FROM ${src} a`,
    )
    .join(' UNION ALL ');
  return `
  INSERT INTO analytics_rollup_pending (merchant_id, day, currency, dim, key, ${ATTEMPT.join(', ')})
  SELECT t.merchant_id, (t.submitted_ts AT TIME ZONE 'UTC')::date AS day, t.currency, d.dim, d.key,
         ${sums(ATTEMPT, 'g.')}
    FROM (SELECT transaction_id, retry_number, captured_at, ${sums(ATTEMPT, '')} FROM (${signed}) x
           GROUP BY transaction_id, retry_number, captured_at HAVING ${nonZero(ATTEMPT, '')}) g
    -- One lookup by key per group (OFFSET 0 keeps it from being flattened into a join over transactions).
    CROSS JOIN LATERAL (
      SELECT tx.merchant_id, tx.submitted_ts, tx.currency, tx.failed_at, ${keyColumns('tx')}
        FROM transactions tx WHERE tx.id = g.transaction_id OFFSET 0) t
    ${txnDims('t.country', [
      `('attempt', g.retry_number::text)`,
      `('ttr', CASE WHEN g.captured_at IS NOT NULL
                THEN greatest(0, floor(extract(epoch FROM g.captured_at - t.failed_at) / 3600))::bigint::text END)`,
    ])}
   WHERE d.key IS NOT NULL
   GROUP BY 1, 2, 3, 4, 5
  HAVING ${nonZero(ATTEMPT, 'g.')};`;
};

/** A statement's refund rows, signed, added up by transaction first (completed refunds that gave money back). */
const refundBody = (sources: Sources): string => {
  const signed = sources
    .map(
      ([src, s]) => `SELECT f.transaction_id,
        ${s} * (f.kind = 'refund' AND f.status = 'Completed' AND f.amount_minor > 0)::int AS refunded_count,
        ${s} * CASE WHEN f.kind = 'refund' AND f.status = 'Completed' THEN f.amount_minor ELSE 0 END AS refunded_amount
      FROM ${src} f`,
    )
    .join(' UNION ALL ');
  return `
  INSERT INTO analytics_rollup_pending (merchant_id, day, currency, dim, key, ${REFUND.join(', ')})
  SELECT t.merchant_id, (t.submitted_ts AT TIME ZONE 'UTC')::date AS day, t.currency, d.dim, d.key,
         ${sums(REFUND, 'g.')}
    FROM (SELECT transaction_id, ${sums(REFUND, '')} FROM (${signed}) x
           GROUP BY transaction_id HAVING ${nonZero(REFUND, '')}) g
    CROSS JOIN LATERAL (
      SELECT tx.merchant_id, tx.submitted_ts, tx.currency, ${keyColumns('tx')}
        FROM transactions tx WHERE tx.id = g.transaction_id OFFSET 0) t
    ${txnDims('t.country')}
   WHERE d.key IS NOT NULL
   GROUP BY 1, 2, 3, 4, 5
  HAVING ${nonZero(REFUND, 'g.')};`;
};

const NEW: Sources = [['new_rows', '1']];
const OLD: Sources = [['old_rows', '-1']];
const BOTH: Sources = [...NEW, ...OLD];
/** The trigger functions this migration replaces, by name: their new bodies. */
const FUNCTIONS: Record<string, string> = {
  analytics_transactions_ins: txnBody(NEW),
  analytics_transactions_upd_grouped: txnBody(BOTH),
  analytics_transactions_del: txnBody(OLD),
  // Pending attempts count nothing: a statement of only those (the scheduler's) returns at once.
  analytics_attempts_ins: `IF NOT EXISTS (SELECT 1 FROM new_rows WHERE state <> 'pending') THEN RETURN NULL; END IF;
    ${attemptBody(NEW)}`,
  analytics_attempts_upd_grouped: attemptBody(BOTH),
  analytics_attempts_del: attemptBody(OLD),
  analytics_refunds_ins: refundBody(NEW),
  analytics_refunds_upd: refundBody(BOTH),
  analytics_refunds_del: refundBody(OLD),
};

const replace = (name: string, body: string): string => `
  CREATE OR REPLACE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $fn$
  BEGIN
    ${body}
    RETURN NULL;
  END $fn$`;

/**
 * The analytics breakdowns by decline class, card network, BIN and country, keyed on values fixed when
 * the review ends (issue: a recovered soft decline showed under `unclassified` with nothing recovered,
 * and `soft` showed recoveries against no failures).
 *
 * Every contribution of a transaction (its failure, each attempt, each refund) was keyed on its
 * transaction's columns as they were when that row was written. Those columns change later: a capture
 * sets auth_code_description to null, each decline and the cancel set it to that decline's class, and
 * adopting another payment method (or new card data from the account updater) changes the card and the
 * billing address. The UPDATE trigger moved the failure to the new keys; the attempts and refunds
 * written before stayed under the old ones. Now the review fixes the values the keys come from on
 * the row (original_decline_class, original_card_network, original_card_bin, original_country;
 * `fixCardKeys`, `fixClassKey`): the class it wrote, and the card and address it reviewed (fixed
 * already if the review adopted another payment method: the submitted card's). They never change
 * after, and every attempt and refund comes after them, so all of a transaction's contributions land
 * under one key and each breakdown is the sum over the rows of their original values. The decline
 * code (the submitted auth_code) never changed.
 *
 * The trigger functions read the original values (the current columns of a transaction not reviewed
 * yet) and keep their grouped shape. An UPDATE of a reviewed transaction no longer changes what they
 * group by, so a capture's or a decline's bookkeeping cancels before any expansion (it moved the
 * failure before); the refunds' triggers, which expanded every refund row, get the grouped shape too.
 *
 * Rows already reviewed get their original values: the card, address and class of their current
 * columns, except the class of a transaction with attempts (its current one is its last attempt's,
 * or null once captured), which is its original decline's as the review classifies it. Their four
 * breakdowns are then recounted from the rows. The tables are locked against writes meanwhile
 * (reads go on): on 1,000,000 transactions, a matter of tens of seconds.
 */
export class FixedBreakdownKeys1800100000100 implements MigrationInterface {
  name = 'FixedBreakdownKeys1800100000100';

  async up(q: QueryRunner): Promise<void> {
    await lockForRecount(q);
    await backfill(q);
    for (const [name, body] of Object.entries(FUNCTIONS)) await q.query(replace(name, body));
    await recount(q, true);
  }

  async down(q: QueryRunner): Promise<void> {
    await lockForRecount(q);
    await new GroupedIntakeRollup1798900000000().up(q);
    await q.query(replace('analytics_transactions_upd_grouped', UPDATES.transactions));
    await q.query(replace('analytics_attempts_upd_grouped', UPDATES.attempts));
    const previous = bodies(append);
    await q.query(replace('analytics_transactions_del', previous['transactions']!['del']!));
    await q.query(
      replace(
        'analytics_attempts_ins',
        `IF NOT EXISTS (SELECT 1 FROM new_rows WHERE state <> 'pending') THEN RETURN NULL; END IF;
        ${previous['attempts']!['ins']}`,
      ),
    );
    await q.query(replace('analytics_attempts_del', previous['attempts']!['del']!));
    for (const op of ['ins', 'upd', 'del'])
      await q.query(replace(`analytics_refunds_${op}`, previous['refunds']![op]!));
    await recount(q, false);
    // The previous functions do not read these columns: clearing them appends nothing.
    await q.query(
      `UPDATE transactions SET original_decline_class = NULL, original_card_network = NULL,
         original_card_bin = NULL, original_country = NULL
       WHERE original_decline_class IS NOT NULL OR original_card_network IS NOT NULL
         OR original_card_bin IS NOT NULL OR original_country IS NOT NULL`,
    );
  }
}

/**
 * Writes wait until the recount is committed (reads go on): a write meanwhile would append a
 * contribution under keys the recount then counts again. A fold in progress is waited for.
 */
async function lockForRecount(q: QueryRunner): Promise<void> {
  await q.query(`LOCK TABLE transactions, attempts, refunds, analytics_rollup, analytics_rollup_pending IN SHARE MODE`);
}

/**
 * The keys of the rows reviewed already. Run before the trigger functions are replaced: the previous
 * ones do not read these columns, so this UPDATE appends nothing.
 */
async function backfill(q: QueryRunner): Promise<void> {
  // The original decline's class, as the review reads it (by the network rules of its day), for each
  // combination of network, code and advice code of transactions with attempts.
  const combos: { network: string; code: string; mac: string; day: string }[] = await q.query(
    `SELECT DISTINCT coalesce(t.card_network, '') AS network, t.auth_code AS code,
            coalesce(t.network_advice_code, '') AS mac, to_char(t.failed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day
       FROM transactions t
      WHERE t.review_status = 'passed' AND EXISTS (SELECT 1 FROM attempts a WHERE a.transaction_id = t.id)`,
  );
  await q.query(
    `CREATE TEMP TABLE original_classes (network text, code text, mac text, day date, description text,
       PRIMARY KEY (network, code, mac, day)) ON COMMIT DROP`,
  );
  for (let i = 0; i < combos.length; i += 5000) {
    const rows = combos.slice(i, i + 5000).map((c) => {
      const { description } = classifyDecline(
        { network: c.network || null, responseCode: c.code, merchantAdviceCode: c.mac || null },
        // Rule sets take effect at a UTC midnight: any time of the day reads the code the same way.
        new Date(`${c.day}T12:00:00Z`),
      );
      return { ...c, description };
    });
    await q.query(
      `INSERT INTO original_classes
       SELECT * FROM jsonb_to_recordset($1::jsonb) AS v(network text, code text, mac text, day date, description text)`,
      [JSON.stringify(rows)],
    );
  }
  await q.query(
    `UPDATE transactions t SET
       original_decline_class = coalesce(
         (SELECT o.description FROM original_classes o
           WHERE t.review_status = 'passed' AND o.network = coalesce(t.card_network, '') AND o.code = t.auth_code
             AND o.mac = coalesce(t.network_advice_code, '') AND o.day = (t.failed_at AT TIME ZONE 'UTC')::date
             AND EXISTS (SELECT 1 FROM attempts a WHERE a.transaction_id = t.id)),
         t.auth_code_description, ''),
       ${fixCardKeys('t')}
     WHERE t.review_status <> 'pending' AND t.original_decline_class IS NULL`,
  );
}

/**
 * The four breakdowns recounted from the rows (`fixed`: by their fixed keys; false: by their current
 * columns, as before this migration): their pending contributions dropped, their rollup rows rebuilt.
 */
async function recount(q: QueryRunner, fixed: boolean): Promise<void> {
  const dimList = FIXED_DIMS.map((d) => `'${d}'`).join(', ');
  await q.query(`DELETE FROM analytics_rollup_pending WHERE dim IN (${dimList})`);
  await q.query(`DELETE FROM analytics_rollup WHERE dim IN (${dimList})`);
  const all = [...TXN, ...ATTEMPT, ...REFUND];
  const zero = (except: string[]) => all.filter((c) => !except.includes(c)).map((c) => `0 AS ${c}`);
  const head = `t.merchant_id, (t.submitted_ts AT TIME ZONE 'UTC')::date AS day, t.currency, ${keyColumns('t', fixed)}`;
  // Every row's contribution, added up by day, currency and the values the keys come from, then
  // expanded like the triggers do, keeping the four dimensions recounted.
  await q.query(`
    INSERT INTO analytics_rollup (merchant_id, day, currency, dim, key, ${all.join(', ')})
    SELECT t.merchant_id, t.day, t.currency, d.dim, d.key, ${sums(all, 't.')}
      FROM (SELECT merchant_id, day, currency, ${KEY_COLUMNS}, ${sums(all, '')} FROM (
        SELECT ${head}, ${[
          `(t.review_status <> 'rejected')::int AS failed_count`,
          `CASE WHEN t.review_status <> 'rejected' THEN t.amount_minor ELSE 0 END AS failed_amount`,
          `(t.status = 'Stopped')::int AS stopped_count`,
          `coalesce(t.naive_network_fees_minor - t.network_fees_minor, 0) AS network_fees_avoided`,
          ...zero(TXN),
        ].join(', ')}
          FROM transactions t
        UNION ALL
        SELECT ${head}, ${[
          ...zero(ATTEMPT).slice(0, TXN.length),
          `(a.state <> 'pending')::int AS attempts`,
          `(a.state = 'captured')::int AS recovered_count`,
          `CASE WHEN a.state = 'captured' THEN ${RECOVERED} ELSE 0 END AS recovered_amount`,
          ...zero(ATTEMPT).slice(TXN.length),
        ].join(', ')}
          FROM attempts a JOIN transactions t ON t.id = a.transaction_id
        UNION ALL
        SELECT ${head}, ${[
          ...zero(REFUND),
          `(f.kind = 'refund' AND f.status = 'Completed' AND f.amount_minor > 0)::int AS refunded_count`,
          `CASE WHEN f.kind = 'refund' AND f.status = 'Completed' THEN f.amount_minor ELSE 0 END AS refunded_amount`,
        ].join(', ')}
          FROM refunds f JOIN transactions t ON t.id = f.transaction_id
      ) c GROUP BY merchant_id, day, currency, ${KEY_COLUMNS}) t
      ${txnDims('t.country')}
     WHERE d.dim IN (${dimList}) AND d.key IS NOT NULL
     GROUP BY t.merchant_id, t.day, t.currency, d.dim, d.key
    HAVING ${nonZero(all, 't.')}`);
}
