// bench/intake: POSTs of 1000-transaction batches against a running intake-api (1 client and
// 4 concurrent clients): p50/p99 latency and transactions per second. In the same run, the
// floor: JSON.parse of the same body plus one raw multi-row INSERT of the same rows with pg, round
// by round between the 1-client POSTs. Prints service/floor; the target is at most 1.25 at 1 client.
// Run: node bench/intake/intake.bench.mjs [rounds]
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { benchEnv, cpuSeconds, median, percentile, table } from '../lib.mjs';

const BATCH = 1000;
const ROUNDS = Number(process.argv[2] ?? 20);
const CARDS = ['4111111111111111', '5555555555554444', '4000000000000077', '4000000000000002'];

function transaction(i) {
  const id = `b_${randomBytes(8).toString('hex')}_${i}`;
  return {
    id,
    timestamp: '2026-11-20T10:15:00Z',
    amount: 19.99,
    currency: 'USD',
    status: 'Failed',
    division_number: 'div-1',
    auth_code: '51',
    avs_code: 'Y',
    cvn_code: 'M',
    account: { id: `acct_${id}`, email: 'jane@example.com' },
    subscription: { id: `sub_${id}` },
    payment_method: {
      id: `pm_${id}`,
      is_tokenized: false,
      account_holder: 'Jane Doe',
      billing_address: { line1: '1 Main St', city: 'Springfield', country: 'US', postal_code: '12345' },
      credit_card: { account: CARDS[i % CARDS.length], expiration_date: '202912' },
    },
    metadata: { plan: 'gold', cohort: String(i % 7) },
  };
}
const batchBody = () => JSON.stringify({ transactions: Array.from({ length: BATCH }, (_, i) => transaction(i)) });

const env = await benchEnv('intake');
const merchant = await env.createMerchant();
const { base, child } = await env.startApp('intake-api');
const auth = { authorization: `Bearer ${merchant.api_key}`, 'content-type': 'application/json' };

async function post(body) {
  const t0 = performance.now();
  const res = await fetch(`${base}/v1/retain/transactions`, { method: 'POST', headers: auth, body });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`unexpected ${res.status}`);
  return performance.now() - t0;
}

// Warm-up (JIT, connection pools).
for (let i = 0; i < 3; i++) await post(batchBody());

async function runClients(clients) {
  const bodies = Array.from({ length: ROUNDS }, () => batchBody());
  const latencies = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < bodies.length) {
        const body = bodies[next++];
        latencies.push(await post(body));
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  return { latencies, tps: (bodies.length * BATCH) / seconds };
}

// The floor: parse the same body and insert the same rows with one raw multi-row INSERT.
const client = new pg.Client({ connectionString: env.databaseUrl });
await client.connect();
await client.query(`CREATE TABLE floor_transactions (LIKE transactions INCLUDING ALL)`);
const [{ mid }] = (await client.query(`SELECT id AS mid FROM merchants LIMIT 1`)).rows;
const [{ sid }] = (await client.query(`SELECT id AS sid FROM submissions LIMIT 1`)).rows;
async function floorOnce(body) {
  const t0 = performance.now();
  const parsed = JSON.parse(body).transactions;
  const cols = 18;
  const values = [];
  const params = [];
  parsed.forEach((t, i) => {
    const b = i * cols;
    values.push(`(${Array.from({ length: cols }, (_, k) => `$${b + k + 1}`).join(',')})`);
    params.push(
      randomBytes(20).toString('hex'),
      mid,
      sid,
      t.id,
      'Failed',
      Math.round(t.amount * 100),
      t.currency,
      t.timestamp,
      new Date(),
      new Date(),
      t.division_number,
      t.auth_code,
      t.subscription.id,
      t.account.id,
      JSON.stringify(t.account),
      JSON.stringify(t.subscription),
      JSON.stringify(t.payment_method),
      'clear',
    );
  });
  await client.query(
    `INSERT INTO floor_transactions (vid, merchant_id, submission_id, merchant_txn_id, status, amount_minor, currency,
       failed_at, submitted_ts, status_changed_at, division_number, auth_code, subscription_id, account_id, account,
       subscription, payment_method, card_kind) VALUES ${values.join(',')}`,
    params,
  );
  return performance.now() - t0;
}
for (let i = 0; i < 3; i++) await floorOnce(batchBody());

// 1 client against the floor, interleaved round by round: whatever the machine does meanwhile (a
// checkpoint, autovacuum, a noisy neighbour) lands on both sides of the ratio alike.
const floor = [];
const oneLatencies = [];
let oneBusy = 0;
// CPU of the POSTs alone (intake-api, and all of Postgres), summed round by round around each POST.
const postCpu = { apps: 0, postgres: 0 };
for (let i = 0; i < ROUNDS; i++) {
  const body = batchBody();
  floor.push(await floorOnce(batchBody()));
  const before = cpuSeconds([child.pid]);
  const ms = await post(body);
  const after = cpuSeconds([child.pid]);
  if (before && after) {
    postCpu.apps += after.apps - before.apps;
    postCpu.postgres += after.postgres - before.postgres;
  }
  oneLatencies.push(ms);
  oneBusy += ms;
}
const one = { latencies: oneLatencies, tps: (ROUNDS * BATCH * 1000) / oneBusy };
const four = await runClients(4);
const floorP50 = median(floor);

console.log(`\nbench/intake: ${ROUNDS} batches of ${BATCH} transactions per run\n`);
table([
  {
    what: 'service, 1 client',
    p50_ms: median(one.latencies).toFixed(1),
    p99_ms: percentile(one.latencies, 99).toFixed(1),
    tx_per_s: Math.round(one.tps),
  },
  {
    what: 'service, 4 clients',
    p50_ms: median(four.latencies).toFixed(1),
    p99_ms: percentile(four.latencies, 99).toFixed(1),
    tx_per_s: Math.round(four.tps),
  },
  {
    what: 'floor (JSON.parse + raw INSERT)',
    p50_ms: floorP50.toFixed(1),
    p99_ms: percentile(floor, 99).toFixed(1),
    tx_per_s: Math.round((BATCH * 1000) / floorP50),
  },
]);
console.log(
  `\nCPU per 1000 transactions at 1 client: intake-api ${((1e3 * postCpu.apps) / ROUNDS).toFixed(1)} ms, ` +
    `Postgres ${((1e3 * postCpu.postgres) / ROUNDS).toFixed(1)} ms (from /proc, 10 ms ticks)`,
);
console.log(
  `\nratio service/floor at 1 client (p50): ${(median(one.latencies) / floorP50).toFixed(2)} (target <= 1.25)`,
);
await client.end();
await env.close();
process.exit(0);
