// bench/scale: the service at the size of a big merchant (issue 14). Seeds N transactions
// (default 1,000,000) of ONE merchant in the service's own schema, server-side (INSERT ... SELECT
// FROM generate_series, 100k per statement, through the analytics rollup triggers): two years of
// history, newest submitted_ts last; a status mix of the statuses the schema allows (~38% Captured,
// ~42% Cancelled, Settled, Refunded, Partially Refunded, Stopped, Refund Requested, and in the newest
// 10% the recovering ones: Failed, In Retry, Stop Requested); 4 transactions per subscription
// (spread over the two years), ~6 per account; ~1.7 attempts per transaction; a refund per
// Refunded / Partially Refunded / Refund Requested transaction; a delivered webhook message per
// finished transaction with attempts; a completed outbox row per slice of ATTEMPTS_PER_JOB attempts (as the tick writes them). Then ANALYZE, and:
//   1. GET variants through the real intake-api over HTTP (default list, one status, several
//      statuses, rare statuses, subscription_id, account_id, updated_since, a page at a cursor in
//      the middle, one transaction with related=true, the refunds list and one transaction's
//      refunds): p50/p99 at 1 client and at 8 concurrent clients, 200 calls each (5 warm-up calls
//      dropped). Goal: p99 < 50 ms at 1 client, < 150 ms at 8.
//   2. POST /v1/retain/transactions of 100 new transactions (half of them of existing subscriptions
//      whose transactions are all finished, so the duplicate and subscription checks hit stored
//      rows) at 1 and 8 clients, against the same POSTs on an EMPTY database: a second private
//      database (a second benchEnv, its own merchant and intake-api). Goal: p50 at 1M <= 1.1x empty.
//   3. Stale statistics: autovacuum off on transactions, 400,000 more 'Failed' transactions at the
//      newest end WITHOUT ANALYZE, then the status lists again (the issue saw 0.3-1.3 s for
//      status=Captured); EXPLAIN ANALYZE of the status=Captured page printed. Autovacuum back on,
//      ANALYZE.
//   4. The retry tick's database work, timed directly with the repository functions the tick calls
//      (dist/: AttemptsRepository.dueForLookup + countUnknownOlderThan, then one batch in one
//      transaction: AttemptScheduleRepository.claimDue(500) + addToOutbox, then
//      AnalyticsRepository.fold + PolicyStatsRepository.fold), with 50,000 transactions due; each
//      batch is rolled back so the backlog stays 50,000 for every tick (Redis publish not included;
//      a tick of the app repeats the batch while whole batches are due, up to one tick period).
//      Goal: p99 < 100 ms.
//   5. The drain: 50,000 transactions submitted through the API with distinct valid cards, made
//      due, drained by one retry-worker (SCHEDULER_TICK 200ms) against the built-in sandbox
//      processor: attempts per second (charges sent) and captured per second, against the same
//      drain on the empty database (a drain without progress for a minute stops and says why).
// Prints a final table of each figure against its goal. Both private databases are dropped.
// Run: npx node bench/scale/scale.bench.mjs [transactions]
//   (env SCALE_DRAIN=<n> changes the drained count, default 50000; SCALE_STALE=<n> the stale
//   insert, default 400000; SCALE_CALLS=<n> the calls per variant, default 200; SCALE_BACKLOG_MIN=<m>
//   plans the drained transactions m minutes ago, a backlog met late, default 0)
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { root } from '../../tools/infra.mjs';
import { benchEnv, percentile, table, visa } from '../lib.mjs';

const require = createRequire(import.meta.url);
const N = Number(process.argv[2] ?? 1_000_000);
const STALE = Number(process.env.SCALE_STALE ?? 400_000);
const DRAIN = Number(process.env.SCALE_DRAIN ?? 50_000);
const DUE = 50_000;
const CALLS = Number(process.env.SCALE_CALLS ?? 200);
// The drained transactions' planned moment, minutes ago: 0 = due now; 60 = a backlog the workers
// (down for an hour) meet late, every attempt past LATE_ATTEMPT_MS and checked against its window.
const BACKLOG_MIN = Number(process.env.SCALE_BACKLOG_MIN ?? 0);
const BATCH = 100_000;
const S = Math.max(1, Math.floor(N / 4)); // subscriptions: 4 transactions each, a quarter of the history apart
const A = Math.max(1, Math.floor((S * 2) / 3)); // accounts: ~1.5 subscriptions, ~6 transactions each
const RECENT = Math.floor(N * 0.9); // g > RECENT: the newest 10%, where recovering statuses live
const FINISHED_SUBS = Math.floor(S * 0.6); // subscriptions s < 0.6 S have no recovering transaction
const fmt = (n) => Math.round(n).toLocaleString('en-US');
const loadStart = os
  .loadavg()
  .map((l) => l.toFixed(2))
  .join(' ');
const log = (m) => process.stderr.write(`[scale] ${m}\n`);

const {
  AnalyticsRepository,
  AttemptScheduleRepository,
  CLAIM_DUE_SQL,
  AttemptsRepository,
  PolicyStatsRepository,
  listQuery,
} = require(path.join(root, 'dist/libs/db/src/index.js'));
const { ATTEMPTS_PER_JOB, addToOutbox, attemptJobs, createRedis, QueueName, JOB_NAMES } = require(
  path.join(root, 'dist/libs/queues/src/index.js'),
);
const { Queue } = require('bullmq');

// Every app process this bench starts, killed when it exits however it exits; on an error both
// private databases are dropped too.
const children = [];
process.on('exit', () => children.forEach((c) => c.kill('SIGTERM')));
const envs = [];
async function openEnv(name) {
  const e = await benchEnv(name);
  envs.push(e);
  const startApp = e.startApp;
  e.startApp = async (...args) => {
    const app = await startApp(...args);
    children.push(app.child);
    return app;
  };
  return e;
}
const env = await openEnv('scale');
try {
  await main();
} catch (err) {
  console.error(err);
  for (const e of envs) await e.close().catch(() => {});
  process.exit(1);
}
for (const e of envs) await e.close();
process.exit(0);

async function main() {
  // The server settings the README asks for (shared_buffers >= 256 MB): figures at a million depend on them.
  const settings = await env.db.query(
    `SELECT name, setting, unit FROM pg_settings WHERE name IN ('shared_buffers', 'effective_cache_size', 'autovacuum') ORDER BY name`,
  );
  const shown = settings.map((r) => {
    const kb = r.unit === '8kB' ? Number(r.setting) * 8 : null;
    return `${r.name} ${kb === null ? r.setting : `${Math.round(kb / 1024)} MB`}`;
  });
  console.log(`Postgres: ${shown.join(', ')}`);
  const merchant = await env.createMerchant();
  const [{ id: merchantId }] = await env.db.query(`SELECT id FROM merchants WHERE login = $1`, [merchant.login]);

  // ---------------------------------------------------------------- seeding
  const CAPTURED_LIKE = `('Captured', 'Settled', 'Refunded', 'Partially Refunded', 'Refund Requested')`;
  const t0 = performance.now();
  const submissionIds = (
    await env.db.query(
      `INSERT INTO submissions (merchant_id, request_id, received_count, accepted_count, rejected_count, reviewed_at, created_at)
     SELECT $1, md5('scale-sub' || k || $3), 1000, 1000, 0, now(), now() - make_interval(days => 731)
       FROM generate_series(1, $2::int) AS k ORDER BY k RETURNING id`,
      [merchantId, Math.ceil(N / 1000), randomBytes(4).toString('hex')],
    )
  ).map((r) => r.id);

  const txnInsert = `
  WITH src AS (
    SELECT g, (g::bigint * 7919 % 1000)::int AS h, g % $6::int AS s
      FROM generate_series($3::int, $4::int) AS g),
  st AS (
    SELECT g, h, s,
      CASE WHEN g > $8::int THEN
             CASE WHEN h < 450 THEN 'Failed' WHEN h < 700 THEN 'In Retry' WHEN h < 720 THEN 'Stop Requested'
                  WHEN h < 850 THEN 'Captured' ELSE 'Cancelled' END
           ELSE
             CASE WHEN h < 400 THEN 'Captured' WHEN h < 850 THEN 'Cancelled' WHEN h < 900 THEN 'Settled'
                  WHEN h < 940 THEN 'Refunded' WHEN h < 955 THEN 'Partially Refunded' WHEN h < 985 THEN 'Stopped'
                  WHEN h < 990 THEN 'Refund Requested' ELSE 'Captured' END
      END AS status,
      now() - interval '1 day' - make_interval(secs => ($5::int - g)::float8 * 730 * 86400 / $5::int) AS ts
    FROM src),
  ac AS (
    SELECT *, CASE status WHEN 'Failed' THEN 0 WHEN 'In Retry' THEN 1 + g % 2 WHEN 'Stop Requested' THEN 1
                WHEN 'Cancelled' THEN 1 + g % 3 WHEN 'Stopped' THEN g % 2 ELSE 1 + (h / 7) % 2 END AS attempts
      FROM st)
  INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, review_status, amount_minor,
    currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code, auth_code_description,
    avs_code, cvn_code, subscription_id, account_id, account, subscription, payment_method, metadata, card_kind,
    card_hmac, card_bin, card_last4, card_network, expiration_date, attempt_count, next_attempt_at,
    processor_transaction_id, captured_amount_minor, settled_at, settlement_checked_at, stop_requested_at, created_at, updated_at)
  SELECT md5(g::text || 'v') || left(md5(g::text || 'w'), 8), $1, ($2::uuid[])[1 + (g - 1) / 1000], 't' || g,
    status, 'passed', 500 + (g::bigint * 7919) % 19500, CASE WHEN h % 10 = 0 THEN 'EUR' ELSE 'USD' END,
    ts - interval '1 hour', ts, least(now(), ts + make_interval(days => attempts)), 'div-1',
    (ARRAY['51','51','51','05','05','54','91','14','62','13'])[1 + g % 10],
    CASE WHEN g % 10 IN (7, 8, 9) THEN 'Hard Failure' ELSE 'Soft Failure' END, 'Y', 'M',
    's' || s, 'a' || (s % $7::int),
    jsonb_build_object('id', 'a' || (s % $7::int), 'vid', md5('acct' || (s % $7::int)) || '00000000',
      'email', 'customer' || (s % $7::int) || '@example.com'),
    jsonb_build_object('id', 's' || s),
    jsonb_build_object('id', 'pm' || s, 'vid', md5('pm' || s) || '00000000', 'account_holder', 'Jane Doe',
      'is_tokenized', false, 'primary', true, 'card_account_display', '411111XXXXXX' || lpad((s % 10000)::text, 4, '0'),
      'billing_address', jsonb_build_object('line1', '1 Main St', 'city', 'Springfield', 'postal_code', '12345',
        'country', (ARRAY['US','US','US','GB','DE','BR','AU','IN'])[1 + g % 8])),
    jsonb_build_object('plan', 'gold', 'cohort', (g % 7)::text), 'clear',
    md5('card' || s) || md5('card2' || s), (400000 + s % 20)::text || '12', lpad((s % 10000)::text, 4, '0'),
    (ARRAY['visa','visa','mastercard','amex'])[1 + g % 4], '202912', attempts,
    CASE WHEN status IN ('Failed', 'In Retry') THEN now() + make_interval(days => 1 + g % 20) END,
    CASE WHEN status IN ${CAPTURED_LIKE} THEN 'sbx_' || md5(g::text || 'p') END,
    CASE WHEN status IN ${CAPTURED_LIKE} THEN 500 + (g::bigint * 7919) % 19500 END,
    CASE WHEN status = 'Settled' THEN ts + make_interval(days => attempts + 1) END,
    CASE WHEN status IN ${CAPTURED_LIKE} THEN now() - make_interval(mins => g % 600) END,
    CASE WHEN status IN ('Stop Requested', 'Stopped') THEN ts + interval '12 hours' END,
    ts, least(now(), ts + make_interval(days => attempts))
  FROM ac`;
  const batchTxns = `t.merchant_id = $1 AND t.merchant_txn_id IN (SELECT 't' || g FROM generate_series($2::int, $3::int) AS g)`;
  const attemptInsert = `
  INSERT INTO attempts (vid, retain_transaction_id, transaction_id, merchant_id, retry_number, state, status,
    scheduled_for, prepared_at, processed_at, amount_minor, currency, card_hmac, card_network, response_code,
    auth_code_description, processor_transaction_id, created_at, updated_at)
  SELECT md5(t.id::text || r) || left(md5(t.id::text || r || 'x'), 8), 'rt_' || left(md5(t.id::text || r), 30), t.id,
    t.merchant_id, r, x.state, CASE x.state WHEN 'captured' THEN 'Captured' ELSE 'Failed' END,
    t.failed_at + make_interval(days => r), t.failed_at + make_interval(days => r),
    t.failed_at + make_interval(days => r, secs => 1), t.amount_minor, t.currency, t.card_hmac, t.card_network,
    CASE x.state WHEN 'captured' THEN '00' WHEN 'error' THEN NULL ELSE t.auth_code END,
    CASE x.state WHEN 'declined' THEN 'Soft Failure' END,
    CASE x.state WHEN 'captured' THEN t.processor_transaction_id END,
    t.failed_at + make_interval(days => r), t.failed_at + make_interval(days => r, secs => 1)
  FROM transactions t CROSS JOIN LATERAL generate_series(1, t.attempt_count) AS r
  CROSS JOIN LATERAL (SELECT CASE WHEN t.status IN ${CAPTURED_LIKE} AND r = t.attempt_count THEN 'captured'
                                  WHEN (hashtext(t.vid) + r) % 200 = 0 THEN 'error' ELSE 'declined' END AS state) x
  WHERE ${batchTxns}`;
  const outboxInsert = `
  INSERT INTO outbox (queue, job_name, payload, published_at, completed_at, publish_count, created_at)
  SELECT 'retry.attempt', '${JOB_NAMES['retry.attempt']}', jsonb_build_object('v', 2, 'attemptIds', jsonb_agg(s.id)),
         min(s.scheduled_for), CASE WHEN count(s.processed_at) = count(*) THEN max(s.processed_at) END, 1,
         min(s.scheduled_for)
    FROM (SELECT a.id, a.scheduled_for, a.processed_at,
                 (row_number() OVER (ORDER BY a.scheduled_for, a.id) - 1) / ${ATTEMPTS_PER_JOB} AS slice
            FROM attempts a JOIN transactions t ON t.id = a.transaction_id WHERE ${batchTxns}) s
   GROUP BY s.slice`;
  const refundInsert = `
  INSERT INTO refunds (vid, merchant_id, transaction_id, kind, amount_minor, currency, status, previous_status,
    requested_at, "timestamp", sent_at, processor_refund_id, created_at, updated_at)
  SELECT md5(t.id::text || 'r') || left(md5(t.id::text || 'rr'), 8), t.merchant_id, t.id, 'refund',
    CASE t.status WHEN 'Partially Refunded' THEN t.amount_minor / 2 ELSE t.amount_minor END, t.currency,
    CASE t.status WHEN 'Refund Requested' THEN 'Processing' ELSE 'Completed' END, 'Captured',
    t.status_changed_at, t.status_changed_at,
    CASE WHEN t.status <> 'Refund Requested' THEN t.status_changed_at END,
    CASE WHEN t.status <> 'Refund Requested' THEN 're_' || md5(t.id::text) END, t.status_changed_at, t.status_changed_at
  FROM transactions t WHERE t.status IN ('Refunded', 'Partially Refunded', 'Refund Requested') AND ${batchTxns}`;
  const webhookInsert = `
  INSERT INTO webhook_messages (message_id, merchant_id, event_name, payload_id, transaction_id, body, status,
    attempt_count, delivered_at, last_status_code, created_at, updated_at)
  SELECT upper(left(md5(t.id::text || 'm') || md5(t.id::text || 'n'), 27)), t.merchant_id,
    CASE WHEN t.status IN ${CAPTURED_LIKE} THEN 'retry succeeded' ELSE 'retry failed' END, t.vid, t.id,
    jsonb_build_object('header', jsonb_build_object('event_name',
        CASE WHEN t.status IN ${CAPTURED_LIKE} THEN 'retry succeeded' ELSE 'retry failed' END, 'payload_id', t.vid),
      'content', jsonb_build_object('id', t.merchant_txn_id, 'vid', t.vid, 'status', t.status,
        'amount', t.amount_minor / 100.0, 'currency', t.currency)),
    'delivered', 1, t.status_changed_at, 202, t.status_changed_at, t.status_changed_at
  FROM transactions t
  WHERE t.attempt_count > 0 AND t.status NOT IN ('Failed', 'In Retry', 'Stop Requested') AND ${batchTxns}`;

  for (let done = 0; done < N; done += BATCH) {
    const from = done + 1;
    const to = Math.min(N, done + BATCH);
    const steps = [];
    let s = performance.now();
    await env.db.query(txnInsert, [merchantId, submissionIds, from, to, N, S, A, RECENT]);
    steps.push(`transactions ${((performance.now() - s) / 1000).toFixed(1)}`);
    for (const [name, sql] of [
      ['attempts', attemptInsert],
      ['outbox', outboxInsert],
      ['refunds', refundInsert],
      ['webhooks', webhookInsert],
    ]) {
      s = performance.now();
      await env.db.query(sql, [merchantId, from, to]);
      steps.push(`${name} ${((performance.now() - s) / 1000).toFixed(1)}`);
    }
    log(
      `seeded ${fmt(to)} transactions (${((performance.now() - t0) / 1000).toFixed(0)} s; this batch: ${steps.join(', ')} s)`,
    );
  }
  // The rollup triggers append to pending tables that the retry tick folds: fold the seed's now.
  let folded = 0;
  for (let n; (n = await AnalyticsRepository.fold(env.db)) > 0;) folded += n;
  const seedSeconds = (performance.now() - t0) / 1000;
  const ta = performance.now();
  await env.db.query(`ANALYZE`);
  const analyzeSeconds = (performance.now() - ta) / 1000;
  const counts = {};
  for (const t of ['transactions', 'attempts', 'refunds', 'webhook_messages', 'outbox', 'analytics_rollup'])
    counts[t] = (await env.db.query(`SELECT count(*)::int AS n FROM ${t}`))[0].n;
  const statusMix = await env.db.query(
    `SELECT status, count(*)::int AS n FROM transactions WHERE merchant_id = $1 GROUP BY status ORDER BY n DESC`,
    [merchantId],
  );
  const sizes = await env.db.query(
    `SELECT pg_size_pretty(pg_total_relation_size('transactions')) AS transactions,
          pg_size_pretty(pg_total_relation_size('attempts')) AS attempts,
          pg_size_pretty(pg_database_size(current_database())) AS db`,
  );

  // Sizing: rows and bytes per table, and what the retention sweep keeps of them at its defaults
  // (outbox 7 days after completion, delivered pushes 30 days; transactions, attempts, refunds and
  // the rollup are never deleted). Bytes kept are estimated at each table's bytes per row.
  const keptSql = {
    transactions: `SELECT count(*) FROM transactions`,
    attempts: `SELECT count(*) FROM attempts`,
    refunds: `SELECT count(*) FROM refunds`,
    outbox: `SELECT count(*) FROM outbox WHERE completed_at IS NULL OR completed_at >= now() - interval '7 days'`,
    webhook_messages: `SELECT count(*) FROM webhook_messages WHERE status NOT IN ('delivered', 'dead')
                         OR coalesce(delivered_at, dead_at) >= now() - interval '30 days'`,
    analytics_rollup: `SELECT count(*) FROM analytics_rollup`,
  };
  const sizing = [];
  for (const [t, kept] of Object.entries(keptSql)) {
    const [{ bytes, rows, keep }] = await env.db.query(
      `SELECT pg_total_relation_size($1::regclass)::float8 AS bytes, (SELECT count(*) FROM ${t})::float8 AS rows,
              (${kept})::float8 AS keep`,
      [t],
    );
    const perRow = rows > 0 ? bytes / rows : 0;
    sizing.push({
      table: t,
      rows: fmt(rows),
      MB: (bytes / 1048576).toFixed(0),
      bytes_per_row: Math.round(perRow),
      rows_kept_by_retention: fmt(keep),
      MB_kept: ((keep * perRow) / 1048576).toFixed(0),
    });
  }

  // ---------------------------------------------------------------- HTTP helpers
  const intake = await env.startApp('intake-api');
  const auth = (m) => ({ authorization: `Bearer ${m.api_key}` });
  const rnd = (n) => Math.floor(Math.random() * n);
  const refundIds = (
    await env.db.query(
      `SELECT t.merchant_txn_id AS id FROM refunds r JOIN transactions t ON t.id = r.transaction_id
      WHERE r.merchant_id = $1 ORDER BY random() LIMIT 1000`,
      [merchantId],
    )
  ).map((r) => r.id);
  const middle = `t${Math.floor(N / 2)}`;
  const dayAgo = new Date(Date.now() - 86_400_000).toISOString();

  /** Each GET variant: its path per call, and (lists) the filters of its SQL, for EXPLAIN. */
  const L = 100; // the list's default limit (decisions §5)
  const variants = [
    { name: 'list, default', path: () => `/v1/retain/transactions`, filters: { limit: L } },
    {
      name: 'list, status=Captured',
      path: () => `/v1/retain/transactions?status=Captured`,
      filters: { limit: L, statuses: ['Captured'] },
    },
    {
      name: 'list, status=Failed',
      path: () => `/v1/retain/transactions?status=Failed`,
      filters: { limit: L, statuses: ['Failed'] },
    },
    {
      name: 'list, status=Failed,In Retry,Stop Requested',
      path: () => `/v1/retain/transactions?status=${encodeURIComponent('Failed,In Retry,Stop Requested')}`,
      filters: { limit: L, statuses: ['Failed', 'In Retry', 'Stop Requested'] },
    },
    {
      name: 'list, status=Refunded,Partially Refunded,Stopped',
      path: () => `/v1/retain/transactions?status=${encodeURIComponent('Refunded,Partially Refunded,Stopped')}`,
      filters: { limit: L, statuses: ['Refunded', 'Partially Refunded', 'Stopped'] },
    },
    {
      name: 'list, subscription_id',
      path: () => `/v1/retain/transactions?subscription_id=s${rnd(S)}`,
      filters: { limit: L, subscriptionId: `s${Math.floor(S / 3)}` },
    },
    {
      name: 'list, account_id',
      path: () => `/v1/retain/transactions?account_id=a${rnd(A)}`,
      filters: { limit: L, accountId: `a${Math.floor(A / 3)}` },
    },
    {
      name: 'list, updated_since (last 24 h)',
      path: () => `/v1/retain/transactions?updated_since=${encodeURIComponent(dayAgo)}`,
      filters: { limit: L, updatedSince: new Date(dayAgo) },
    },
    {
      name: 'list, starting_after (middle)',
      path: () => `/v1/retain/transactions?starting_after=${middle}`,
      filters: { limit: L, startingAfter: middle },
    },
    { name: 'GET one, related=true', path: () => `/v1/retain/transactions/t${1 + rnd(N)}?related=true` },
    { name: 'refunds list', path: () => `/v1/retain/refunds` },
    { name: 'refunds of one transaction', path: () => `/v1/retain/refunds/${refundIds[rnd(refundIds.length)]}` },
  ];

  async function run(clients, calls, once) {
    const times = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: clients }, async () => {
        while (next++ < calls) {
          const s = performance.now();
          await once();
          times.push(performance.now() - s);
        }
      }),
    );
    return times;
  }

  async function get(base, m, p) {
    const r = await fetch(`${base}${p}`, { headers: auth(m) });
    const body = await r.json();
    if (r.status !== 200) throw new Error(`GET ${p}: ${r.status} ${JSON.stringify(body)}`);
    return body;
  }

  async function measureGets(label, list) {
    const rows = [];
    for (const v of list) {
      const body = await get(intake.base, merchant, v.path());
      for (const clients of [1, 8]) {
        const times = await run(clients, CALLS + 5, () => get(intake.base, merchant, v.path()));
        times.splice(0, 5); // warm-up
        const p99 = percentile(times, 99);
        const goal = clients === 1 ? 50 : 150;
        rows.push({
          phase: label,
          variant: v.name,
          clients,
          calls: times.length,
          rows: body.data.length,
          'p50 ms': percentile(times, 50).toFixed(1),
          'p99 ms': p99.toFixed(1),
          goal: `p99 < ${goal} ms: ${p99 < goal ? 'met' : 'MISSED'}`,
          _p99: p99,
          _v: v,
        });
        log(`${label}: ${v.name} @${clients}: p50 ${percentile(times, 50).toFixed(1)} p99 ${p99.toFixed(1)} ms`);
      }
    }
    return rows;
  }

  async function explainList(f) {
    const { sql, params } = listQuery(merchantId, f, f.startingAfter ? await cursorOf(f.startingAfter) : null);
    const plan = await env.db.query(`EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) ${sql}`, params);
    return plan.map((r) => r['QUERY PLAN']).join('\n');
  }
  async function cursorOf(id) {
    const [c] = await env.db.query(
      `SELECT submitted_ts AS "submittedTs", vid FROM transactions WHERE merchant_id = $1 AND merchant_txn_id = $2`,
      [merchantId, id],
    );
    return c;
  }

  // ---------------------------------------------------------------- 1. reads at N
  log('reads');
  const readRows = await measureGets('fresh stats', variants);

  // ---------------------------------------------------------------- 2. POST at N vs empty
  let cardNo = 1_000_000;
  function newTransaction(sub, i, prefix) {
    const id = `${prefix}_${randomBytes(8).toString('hex')}_${i}`;
    return {
      id,
      timestamp: new Date().toISOString(),
      amount: 19.99,
      currency: 'USD',
      status: 'Failed',
      division_number: 'div-1',
      auth_code: '51',
      avs_code: 'Y',
      cvn_code: 'M',
      account: { id: `acct_${id}`, email: 'jane@example.com' },
      subscription: { id: sub ?? `sub_${id}` },
      payment_method: {
        id: `pm_${id}`,
        is_tokenized: false,
        account_holder: 'Jane Doe',
        billing_address: { line1: '1 Main St', city: 'Springfield', country: 'US', postal_code: '12345' },
        credit_card: { account: visa(cardNo++), expiration_date: '202912' },
      },
      metadata: { plan: 'gold' },
    };
  }
  /** A POST of 100: even items take the next finished subscription of the seed (all its transactions final). */
  function postBody(state) {
    return JSON.stringify({
      transactions: Array.from({ length: 100 }, (_, i) =>
        newTransaction(i % 2 === 0 && state.sub < FINISHED_SUBS ? `s${state.sub++}` : null, i, 'p'),
      ),
    });
  }
  async function post(base, m, body) {
    const r = await fetch(`${base}/v1/retain/transactions`, {
      method: 'POST',
      headers: { ...auth(m), 'content-type': 'application/json' },
      body,
    });
    const text = await r.text();
    if (r.status !== 200) throw new Error(`POST ${r.status} ${text.slice(0, 300)}`);
  }
  /**
   * What the POSTs cost Postgres beyond time: pages read into shared_buffers (this database's
   * blks_read) and full-page images written to the WAL (the server's; nothing else writes meanwhile).
   */
  async function pageCounters(e) {
    const [r] = await e.db.query(
      `SELECT (SELECT blks_read FROM pg_stat_database WHERE datname = current_database())::float8 AS read,
              (SELECT wal_fpi FROM pg_stat_wal)::float8 AS fpi, (SELECT wal_bytes FROM pg_stat_wal)::float8 AS wal`,
    );
    return r;
  }
  async function measurePosts(e, base, m) {
    const state = { sub: 1 }; // s0 holds g = N, in the newest (recovering) band
    for (let i = 0; i < 5; i++) await post(base, m, postBody(state)); // warm-up
    const out = {};
    for (const clients of [1, 8]) {
      const bodies = Array.from({ length: CALLS }, () => postBody(state));
      let k = 0;
      await e.db.query('SELECT pg_stat_clear_snapshot()');
      const c0 = await pageCounters(e);
      const times = await run(clients, CALLS, () => post(base, m, bodies[k++]));
      // Idle backends flush their pending statistics within 10 s (PostgreSQL 15's PGSTAT_IDLE_INTERVAL).
      await new Promise((r) => setTimeout(r, 11_000));
      await e.db.query('SELECT pg_stat_clear_snapshot()');
      const c1 = await pageCounters(e);
      const rows = CALLS * 100;
      out[clients] = {
        p50: percentile(times, 50),
        p99: percentile(times, 99),
        readPerRow: (c1.read - c0.read) / rows,
        fpiPerRow: (c1.fpi - c0.fpi) / rows,
        walKbPerRow: (c1.wal - c0.wal) / rows / 1024,
      };
    }
    return out;
  }
  log('POST at N');
  const postFull = await measurePosts(env, intake.base, merchant);
  log(`POST at N: ${JSON.stringify(postFull)}`);
  const empty = await openEnv('scale_empty');
  const emptyMerchant = await empty.createMerchant();
  const emptyIntake = await empty.startApp('intake-api');
  log('POST on an empty database');
  const postEmpty = await measurePosts(empty, emptyIntake.base, emptyMerchant);
  log(`POST empty: ${JSON.stringify(postEmpty)}`);

  // ---------------------------------------------------------------- 3. stale statistics
  log('stale statistics');
  await env.db.query(`ALTER TABLE transactions SET (autovacuum_enabled = false, toast.autovacuum_enabled = false)`);
  const [{ maxTs }] = await env.db.query(
    `SELECT max(submitted_ts) AS "maxTs" FROM transactions WHERE merchant_id = $1`,
    [merchantId],
  );
  const [{ id: staleSubmission }] = await env.db.query(
    `INSERT INTO submissions (merchant_id, request_id, received_count, accepted_count, rejected_count)
   VALUES ($1, md5(random()::text), $2, $2, 0) RETURNING id`,
    [merchantId, STALE],
  );
  const ts0 = performance.now();
  for (let done = 0; done < STALE; done += BATCH) {
    const n = Math.min(BATCH, STALE - done);
    await env.db.query(
      `INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, review_status, amount_minor,
       currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code, auth_code_description,
       subscription_id, account_id, account, subscription, payment_method, card_kind, card_hmac, card_bin, card_last4,
       card_network, expiration_date)
     SELECT md5(g::text || 'stale') || left(md5(g::text || 'stale2'), 8), $1, $2, 'st' || g, 'Failed', 'pending',
       1999, 'USD', ts - interval '1 minute', ts, ts, 'div-1', '51', 'Soft Failure', 'sts' || g, 'sta' || g,
       jsonb_build_object('id', 'sta' || g, 'email', 'stale' || g || '@example.com'), jsonb_build_object('id', 'sts' || g),
       jsonb_build_object('id', 'stpm' || g, 'is_tokenized', false, 'billing_address', jsonb_build_object('country', 'US')),
       'clear', md5('stcard' || g) || md5('stcard2' || g), '411111', lpad((g % 10000)::text, 4, '0'), 'visa', '202912'
     FROM (SELECT g, $3::timestamptz + make_interval(secs => g::float8 * 3600 / $5::int) AS ts
             FROM generate_series($4::int, $4::int + $6::int - 1) AS g) s`,
      [merchantId, staleSubmission, maxTs, done + 1, STALE, n],
    );
  }
  const staleSeconds = (performance.now() - ts0) / 1000;
  const staleVariants = variants.filter((v) => v.filters && (v.filters.statuses || v.name === 'list, default'));
  const staleRows = await measureGets(`stale stats (+${fmt(STALE)} Failed)`, staleVariants);
  const [{ last_analyze: lastAnalyze, last_autoanalyze: lastAutoanalyze }] = await env.db.query(
    `SELECT last_analyze, last_autoanalyze FROM pg_stat_user_tables WHERE relname = 'transactions'`,
  );
  const staleCapturedPlan = await explainList({ limit: L, statuses: ['Captured'] });
  // Plans of every list that missed its goal (with the statistics it missed under).
  const missedPlans = [];
  for (const r of [...staleRows]) {
    if (
      r._p99 >= (r.clients === 1 ? 50 : 150) &&
      r._v.filters &&
      !missedPlans.some((p) => p.name === r.phase + r.variant)
    )
      missedPlans.push({
        name: r.phase + r.variant,
        label: `${r.phase}: ${r.variant}`,
        plan: await explainList(r._v.filters),
      });
  }
  await env.db.query(`ALTER TABLE transactions RESET (autovacuum_enabled, toast.autovacuum_enabled)`);
  await env.db.query(`ANALYZE transactions`);
  for (const r of readRows) {
    if (
      r._p99 >= (r.clients === 1 ? 50 : 150) &&
      r._v.filters &&
      !missedPlans.some((p) => p.name === r.phase + r.variant)
    )
      missedPlans.push({
        name: r.phase + r.variant,
        label: `${r.phase}: ${r.variant} (plan after the stale rows and a new ANALYZE)`,
        plan: await explainList(r._v.filters),
      });
  }

  // ---------------------------------------------------------------- 4. the tick, 50,000 due
  log('tick');
  const [{ n: dueSet }] = await env.db.query(
    `WITH d AS (
     UPDATE transactions SET next_attempt_at = now() - make_interval(secs => random() * 86400)
      WHERE id IN (SELECT id FROM transactions WHERE merchant_id = $1 AND status IN ('Failed', 'In Retry')
                     AND review_status = 'passed' AND stop_requested_at IS NULL LIMIT $2)
     RETURNING 1)
   SELECT count(*)::int AS n FROM d`,
    [merchantId, DUE],
  );
  await env.db.query(`ANALYZE transactions`);
  const schedule = new AttemptScheduleRepository();
  const tickTimes = [];
  const claimTimes = [];
  let claimed = 0;
  class Rollback extends Error {}
  for (let i = 0; i < 105; i++) {
    const s = performance.now();
    await AttemptsRepository.dueForLookup(env.db, 100, 24 * 3_600_000);
    await AttemptsRepository.countUnknownOlderThan(env.db, 3_600_000);
    let c0 = 0;
    try {
      await env.db.transaction(async (m) => {
        c0 = performance.now();
        const ids = await schedule.claimDue(m, 500);
        await addToOutbox(m, attemptJobs(ids));
        claimed = ids.length;
        claimTimes.push(performance.now() - c0);
        throw new Rollback();
      });
    } catch (e) {
      if (!(e instanceof Rollback)) throw e;
    }
    await AnalyticsRepository.fold(env.db);
    await PolicyStatsRepository.fold(env.db);
    tickTimes.push(performance.now() - s);
  }
  tickTimes.splice(0, 5);
  claimTimes.splice(0, 5);
  const tickP50 = percentile(tickTimes, 50);
  const tickP99 = percentile(tickTimes, 99);
  const tickPlan = (await env.db.query(`EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) ${CLAIM_DUE_SQL}`, [500]))
    .map((r) => r['QUERY PLAN'])
    .join('\n');
  // Back to the future: the drain below must only see its own due transactions.
  await env.db.query(
    `UPDATE transactions SET next_attempt_at = now() + interval '10 days'
    WHERE next_attempt_at IS NOT NULL AND next_attempt_at <= now()`,
  );

  // ---------------------------------------------------------------- 5. the drain
  async function drain(e, m, base, prefix) {
    const [{ id: mid }] = await e.db.query(`SELECT id FROM merchants WHERE login = $1`, [m.login]);
    for (let off = 0; off < DRAIN; off += 1000) {
      const transactions = Array.from({ length: Math.min(1000, DRAIN - off) }, (_, k) => {
        const i = off + k;
        return {
          id: `${prefix}_${i}`,
          timestamp: new Date().toISOString(),
          amount: 10,
          currency: 'USD',
          status: 'Failed',
          division_number: 'd',
          auth_code: '05',
          account: { id: `${prefix}a${i}` },
          subscription: { id: `${prefix}s${i}` },
          payment_method: {
            id: `${prefix}p${i}`,
            is_tokenized: false,
            credit_card: { account: visa(5_000_000 + i), expiration_date: '202912' },
          },
        };
      });
      await post(base, m, JSON.stringify({ transactions }));
    }
    // Skip the review: every drained transaction is due now.
    // TypeORM answers an UPDATE ... RETURNING with [rows, affected count].
    const [made] = await e.db.query(
      `UPDATE transactions t SET review_status = 'passed',
              next_attempt_at = now() - ($3::double precision * interval '1 minute')
       FROM submissions s WHERE s.id = t.submission_id AND s.merchant_id = $1 AND t.merchant_id = $1
        AND t.merchant_txn_id LIKE $2 AND t.review_status = 'pending' RETURNING t.id`,
      [mid, `${prefix}\\_%`, BACKLOG_MIN],
    );
    const drained = made.map((r) => r.id);
    const n = drained.length;
    if (n !== DRAIN) throw new Error(`drain: ${n} of ${DRAIN} transactions made due`);
    const s = performance.now();
    const worker = await e.startApp('retry-worker', { SCHEDULER_TICK: '200ms' });
    let stalled = null;
    let last = { left: Infinity, at: performance.now() };
    for (;;) {
      // Progress of the drained transactions only, by key (primary key, attempts by transaction): a
      // count over every pending attempt read all 1.6M attempts every 100 ms and competed with the drain.
      const [{ due, pending }] = await e.db.query(
        `SELECT (SELECT count(*)::int FROM transactions WHERE id = ANY($1::uuid[]) AND next_attempt_at <= now()) AS due,
              (SELECT count(*)::int FROM attempts WHERE transaction_id = ANY($1::uuid[]) AND state = 'pending') AS pending`,
        [drained],
      );
      if (due === 0 && pending === 0) break;
      if (due + pending < last.left) last = { left: due + pending, at: performance.now() };
      if (performance.now() - last.at > 60_000) {
        // No progress for a minute: say why (a failed attempt job's reason) rather than wait.
        const redis = createRedis(e.env.REDIS_URL);
        const q = new Queue(QueueName.RetryAttempt, { connection: redis, prefix: e.env.QUEUE_PREFIX });
        const [job] = [...(await q.getDelayed(0, 0)), ...(await q.getFailed(0, 0))];
        await q.close();
        redis.disconnect();
        stalled = `STALLED with ${due} due and ${pending} pending: ${job?.failedReason ?? 'no failed job'}`;
        log(stalled);
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    const seconds = (performance.now() - s) / 1000;
    worker.child.kill('SIGTERM');
    const states = await e.db.query(
      `SELECT a.state, count(*)::int AS n FROM attempts a JOIN transactions t ON t.id = a.transaction_id
      WHERE t.merchant_id = $1 AND t.merchant_txn_id LIKE $2 GROUP BY a.state`,
      [mid, `${prefix}\\_%`],
    );
    const by = Object.fromEntries(states.map((r) => [r.state, r.n]));
    const attempts = states.reduce((a, r) => a + r.n, 0);
    return { seconds, attempts, captured: by.captured ?? 0, by, stalled };
  }
  log('drain at N');
  const drainFull = await drain(env, merchant, intake.base, 'dr');
  log(`drain at N: ${JSON.stringify(drainFull)}`);
  log('drain on the empty database');
  const drainEmpty = await drain(empty, emptyMerchant, emptyIntake.base, 'dr');
  log(`drain empty: ${JSON.stringify(drainEmpty)}`);

  // ---------------------------------------------------------------- report
  const strip = (rows) => rows.map(({ _p99, _v, ...r }) => r);
  console.log(
    `\nbench/scale: ${fmt(N)} transactions of one merchant seeded in ${seedSeconds.toFixed(0)} s ` +
      `(${fmt(N / seedSeconds)} transactions/s, with attempts, refunds, webhook messages, outbox and the rollup triggers, ` +
      `${fmt(folded)} pending rollup rows folded); ` +
      `ANALYZE ${analyzeSeconds.toFixed(1)} s`,
  );
  console.log(
    `rows: ${Object.entries(counts)
      .map(([k, v]) => `${k} ${fmt(v)}`)
      .join(', ')} (${(counts.attempts / counts.transactions).toFixed(2)} attempts per transaction); ` +
      `${fmt(S)} subscriptions, ${fmt(A)} accounts; sizes: transactions ${sizes[0].transactions}, attempts ${sizes[0].attempts}, database ${sizes[0].db}`,
  );
  console.log(
    `\nsizing at ${fmt(N)} transactions (retention at its defaults: completed outbox rows 7 days, delivered pushes 30 days):`,
  );
  table(sizing);
  console.log(`status mix: ${statusMix.map((r) => `${r.status} ${fmt(r.n)}`).join(', ')}\n`);
  console.log(
    `GET over HTTP (intake-api), ${CALLS} calls per variant and concurrency (5 warm-up calls dropped), limit ${L}:`,
  );
  table(strip(readRows));
  console.log(
    `\nstale statistics: +${fmt(STALE)} 'Failed' transactions at the newest end in ${staleSeconds.toFixed(0)} s, no ANALYZE ` +
      `(autovacuum off on transactions; last_analyze ${lastAnalyze?.toISOString?.() ?? lastAnalyze}, last_autoanalyze ${lastAutoanalyze?.toISOString?.() ?? lastAutoanalyze}):`,
  );
  table(strip(staleRows));
  console.log(`\nEXPLAIN ANALYZE of the status=Captured page under the stale statistics:\n${staleCapturedPlan}`);
  for (const p of missedPlans) console.log(`\nEXPLAIN ANALYZE, ${p.label}:\n${p.plan}`);

  console.log(
    `\nPOST /v1/retain/transactions, 100 new transactions per call (half of existing finished subscriptions), ${CALLS} calls:`,
  );
  const postRows = [1, 8].map((c) => ({
    clients: c,
    [`at ${fmt(N)}: p50 ms`]: postFull[c].p50.toFixed(1),
    'p99 ms': postFull[c].p99.toFixed(1),
    'empty db (second private database): p50 ms': postEmpty[c].p50.toFixed(1),
    'empty p99 ms': postEmpty[c].p99.toFixed(1),
    'ratio p50': (postFull[c].p50 / postEmpty[c].p50).toFixed(2),
    'pages read / row (1M, empty)': `${postFull[c].readPerRow.toFixed(2)}, ${postEmpty[c].readPerRow.toFixed(2)}`,
    'WAL full-page images / row': `${postFull[c].fpiPerRow.toFixed(2)}, ${postEmpty[c].fpiPerRow.toFixed(2)}`,
    'WAL kB / row': `${postFull[c].walKbPerRow.toFixed(1)}, ${postEmpty[c].walKbPerRow.toFixed(1)}`,
  }));
  table(postRows);
  console.log(
    `\nretry tick with ${fmt(dueSet)} transactions due (dueForLookup + countUnknownOlderThan + one batch: claimDue(500) + addToOutbox, ` +
      `rolled back; + AnalyticsRepository.fold + PolicyStatsRepository.fold; ${claimed} claimed per batch): p50 ${tickP50.toFixed(1)} ms, p99 ${tickP99.toFixed(1)} ms ` +
      `(claimDue + outbox alone: p50 ${percentile(claimTimes, 50).toFixed(1)} ms, p99 ${percentile(claimTimes, 99).toFixed(1)} ms)`,
  );
  console.log(`EXPLAIN ANALYZE of the tick's claim:\n${tickPlan}`);
  console.log(
    `\ndrain of ${fmt(DRAIN)} due transactions${BACKLOG_MIN ? `, planned ${BACKLOG_MIN} min ago (a backlog met late)` : ''} by one retry-worker (sandbox processor, SCHEDULER_TICK 200ms):`,
  );
  table(
    [
      [`at ${fmt(N)} (+${fmt(STALE)} stale)`, drainFull],
      ['empty database', drainEmpty],
    ].map(([what, d]) => ({
      database: what,
      seconds: d.seconds.toFixed(1),
      attempts: d.attempts,
      'attempts/s': fmt(d.attempts / d.seconds),
      captured: d.captured,
      'captured/s': fmt(d.captured / d.seconds),
      states:
        Object.entries(d.by)
          .map(([k, v]) => `${k} ${v}`)
          .join(' ') + (d.stalled ? ` (${d.stalled})` : ''),
    })),
  );

  const allGets = [...readRows, ...staleRows];
  const worst = (rows, clients) => rows.filter((r) => r.clients === clients).sort((a, b) => b._p99 - a._p99)[0];
  const summary = [];
  for (const [label, rows] of [
    ['fresh stats', readRows],
    ['stale stats', staleRows],
  ]) {
    for (const [clients, goal] of [
      [1, 50],
      [8, 150],
    ]) {
      const w = worst(rows, clients);
      const missed = rows.filter((r) => r.clients === clients && r._p99 >= goal).map((r) => r.variant);
      summary.push({
        figure: `GET p99, ${clients} client${clients > 1 ? 's' : ''}, ${label} (worst: ${w.variant})`,
        value: `${w._p99.toFixed(1)} ms`,
        goal: `< ${goal} ms`,
        result: missed.length ? `MISSED (${missed.length}/${rows.length / 2}: ${missed.join('; ')})` : 'met',
      });
    }
  }
  summary.push({
    figure: `retry tick p99, ${fmt(dueSet)} due`,
    value: `${tickP99.toFixed(1)} ms`,
    goal: '< 100 ms',
    result: tickP99 < 100 ? 'met' : 'MISSED',
  });
  for (const c of [1, 8]) {
    const ratio = postFull[c].p50 / postEmpty[c].p50;
    summary.push({
      figure: `POST p50 at ${fmt(N)} / empty db, ${c} client${c > 1 ? 's' : ''}`,
      value: `${ratio.toFixed(2)}x (${postFull[c].p50.toFixed(1)} / ${postEmpty[c].p50.toFixed(1)} ms)`,
      goal: '<= 1.1x',
      result: ratio <= 1.1 ? 'met' : 'MISSED',
    });
  }
  summary.push({
    figure: `drain rate at ${fmt(N)} / empty db`,
    value: `${fmt(drainFull.attempts / drainFull.seconds)} / ${fmt(drainEmpty.attempts / drainEmpty.seconds)} attempts/s (${(
      drainFull.attempts /
      drainFull.seconds /
      (drainEmpty.attempts / drainEmpty.seconds)
    ).toFixed(2)}x)`,
    goal: '(no goal)',
    result: '-',
  });
  console.log('\nsummary against the goals:');
  table(summary);
  void allGets;
  console.log(
    `\nload average (1/5/15 min) at the start ${loadStart}, at the end ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} on ${os.cpus().length} CPUs`,
  );
}
