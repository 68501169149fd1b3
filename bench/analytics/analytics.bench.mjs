// bench/analytics: GET /v1/retain/analytics for a merchant with N transactions (default 1,000,000)
// seeded in the service's own schema with 1 to 3 attempts each (2 on average), through the rollup
// triggers the service runs (the seeding time includes keeping the rollup). Prints the seeding
// rate and p50/p99 of the analytics call over 30 days, 365 days and 731 days (the maximum range),
// by day and by week, at 1 and 8 clients, against the 200 ms goal. A private database, dropped at
// the end.
// Run: node bench/analytics/analytics.bench.mjs [transactions]
import { benchEnv, percentile, table } from '../lib.mjs';

const N = Number(process.argv[2] ?? 1_000_000);
const BATCH = 100_000;
const env = await benchEnv('analytics');
const merchant = await env.createMerchant();
const [{ id: merchantId }] = await env.db.query(`SELECT id FROM merchants WHERE login = $1`, [merchant.login]);
const [{ id: submissionId }] = await env.db.query(
  `INSERT INTO submissions (merchant_id, request_id, received_count, accepted_count, rejected_count)
   VALUES ($1, md5(random()::text), 0, 0, 0) RETURNING id`,
  [merchantId],
);

// Two years of failures, a realistic decline mix, four networks, 20 BINs, 8 countries; ~45%
// recovered, 2 attempts per transaction on average; the statuses the recovery leaves.
const t0 = performance.now();
for (let done = 0; done < N; done += BATCH) {
  const n = Math.min(BATCH, N - done);
  await env.db.query(
    `INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, review_status, amount_minor,
       currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code, auth_code_description,
       subscription_id, account_id, account, subscription, payment_method, card_kind, card_bin, card_last4,
       card_network, expiration_date, attempt_count)
     SELECT md5(g::text || 'v'), $1, $2, 'b' || g, CASE WHEN g % 20 < 9 THEN 'Captured' ELSE 'Cancelled' END, 'passed',
       500 + (g::bigint * 7919) % 19500, CASE WHEN g % 10 = 0 THEN 'EUR' ELSE 'USD' END,
       now() - ((g % 730) || ' days')::interval, now() - ((g % 730) || ' days')::interval, now(),
       'div-1', (ARRAY['51','51','51','05','05','54','91','14','62','13'])[1 + g % 10],
       CASE WHEN g % 10 IN (7, 8, 9) THEN 'Hard Failure' ELSE 'Soft Failure' END,
       's' || g, 'a' || g, '{}'::jsonb, '{}'::jsonb,
       jsonb_build_object('billing_address', jsonb_build_object('country',
         (ARRAY['US','US','US','GB','DE','BR','AU','IN'])[1 + g % 8])),
       'pan', (400000 + g % 20)::text || '12', '1111',
       (ARRAY['visa','visa','mastercard','amex'])[1 + g % 4], '202912', 1 + g % 3
     FROM generate_series($3::int, $4::int) AS g`,
    [merchantId, submissionId, done + 1, done + n],
  );
  await env.db.query(
    `INSERT INTO attempts (vid, retain_transaction_id, transaction_id, merchant_id, retry_number, state, status,
       scheduled_for, processed_at, amount_minor, currency)
     SELECT md5(t.id::text || r), 'rt_' || left(md5(t.id::text || r), 30), t.id, t.merchant_id, r,
       CASE WHEN t.status = 'Captured' AND r = t.attempt_count THEN 'captured' ELSE 'declined' END,
       CASE WHEN t.status = 'Captured' AND r = t.attempt_count THEN 'Captured' ELSE 'Failed' END,
       t.failed_at + (r || ' days')::interval, t.failed_at + (r || ' days')::interval, t.amount_minor, t.currency
     FROM transactions t CROSS JOIN LATERAL generate_series(1, t.attempt_count) AS r
     WHERE t.merchant_id = $1 AND t.merchant_txn_id IN (SELECT 'b' || g FROM generate_series($2::int, $3::int) AS g)`,
    [merchantId, done + 1, done + n],
  );
  // The triggers append to analytics_rollup_pending; the retry tick folds it, here the seeding does.
  while ((await env.db.query(`SELECT analytics_rollup_fold(200000) AS n`))[0].n > 0);
  process.stderr.write(`seeded ${done + n}\n`);
}
const seedSeconds = (performance.now() - t0) / 1000;
await env.db.query(`ANALYZE`);
const [{ attempts }] = await env.db.query(`SELECT count(*)::int AS attempts FROM attempts WHERE merchant_id = $1`, [
  merchantId,
]);
const [{ rollup }] = await env.db.query(`SELECT count(*)::int AS rollup FROM analytics_rollup WHERE merchant_id = $1`, [
  merchantId,
]);

const { base } = await env.startApp('intake-api');
const auth = { authorization: `Bearer ${merchant.api_key}` };
const today = new Date();
const dayAgo = (d) => new Date(today.getTime() - d * 86_400_000).toISOString().slice(0, 10);
const to = dayAgo(0);
const variants = [
  ['30 days by day', `from=${dayAgo(29)}&to=${to}&bucket=day`],
  ['365 days by day', `from=${dayAgo(364)}&to=${to}&bucket=day`],
  ['365 days by week', `from=${dayAgo(364)}&to=${to}&bucket=week`],
  ['731 days by week', `from=${dayAgo(730)}&to=${to}&bucket=week`],
];
const rows = [];
let check = null;
for (const [name, query] of variants) {
  for (const clients of [1, 8]) {
    const times = [];
    const calls = clients === 1 ? 60 : 200;
    let next = 0;
    await Promise.all(
      Array.from({ length: clients }, async () => {
        while (next++ < calls) {
          const s = performance.now();
          const r = await fetch(`${base}/v1/retain/analytics?${query}`, { headers: auth });
          const body = await r.json();
          times.push(performance.now() - s);
          if (r.status !== 200) throw new Error(`${r.status} ${JSON.stringify(body)}`);
          if (name === '731 days by week') check = body;
        }
      }),
    );
    times.splice(0, Math.min(5, times.length - 1)); // warm-up
    const p99 = percentile(times, 99);
    rows.push({
      range: name,
      clients,
      calls: times.length,
      'p50 ms': percentile(times, 50).toFixed(1),
      'p99 ms': p99.toFixed(1),
      'goal 200 ms': p99 < 200 ? 'met' : 'MISSED',
    });
  }
}
const usd = check.currencies.find((c) => c.currency === 'USD');
console.log(
  `\nbench/analytics: ${N.toLocaleString('en-US')} transactions and ${attempts.toLocaleString('en-US')} attempts of one merchant, ` +
    `seeded with the rollup triggers in ${seedSeconds.toFixed(0)} s (${Math.round(N / seedSeconds).toLocaleString('en-US')} transactions/s); ` +
    `${rollup.toLocaleString('en-US')} rollup rows\n`,
);
table(rows);
console.log(
  `\n731-day USD totals: ${usd.totals.failed_count.toLocaleString('en-US')} failed, ${usd.totals.recovered_count.toLocaleString('en-US')} recovered, ` +
    `${usd.totals.attempts.toLocaleString('en-US')} attempts (the rollup equals the rows: checked by apps/intake-api/test/analytics.spec.ts)`,
);
await env.close();
process.exit(0);
