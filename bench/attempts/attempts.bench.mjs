// bench/attempts: attempts per second through one retry-worker with the sandbox processor (due
// transactions on distinct cards, so no network limit interferes), against a BullMQ no-op worker
// at concurrency 16 (the retry worker's before its attempts were grouped; it now runs 256)
// draining the same number of jobs in the same run. Prints the ratio.
// With `--processor stripe` the merchant has a Stripe account pointed at the local Stripe wire fake
// (libs/processor/test), so every attempt goes through the real Stripe SDK and HTTP.
// With `--latency <ms>` (Stripe only) the fake answers each request after that many milliseconds, as a
// real processor does (an authorization takes hundreds of milliseconds): the drain is then bound by
// the attempts in flight, not by this machine's CPU.
// With `--workers 1,2` it drains N due attempts with one retry-worker, then N more (a new merchant)
// with two, and prints the scaling ratio (target >= 1.7). `after_start_per_s` times the same drain from its first
// recorded attempt on, without the workers' start-up (a Nest app takes 1-3 s to start on this machine),
// and `machine_busy` is the share of all cores busy meanwhile: 1/busy of one worker bounds what more
// replicas can reach on this machine.
// Run: node bench/attempts/attempts.bench.mjs [count] [--processor sandbox|stripe] [--latency ms] [--workers 1,2]
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { Queue, Worker } from 'bullmq';
import { root } from '../../tools/infra.mjs';
import { benchEnv, cpuSeconds, table, visa } from '../lib.mjs';

const require = createRequire(import.meta.url);
const args = process.argv.slice(2);
const at = args.indexOf('--processor');
const PROCESSOR = at >= 0 ? args.splice(at, 2)[1] : 'sandbox';
if (!['sandbox', 'stripe'].includes(PROCESSOR)) throw new Error(`--processor sandbox|stripe, not ${PROCESSOR}`);
const wi = args.indexOf('--workers');
const WORKERS = (wi >= 0 ? args.splice(wi, 2)[1] : '1')
  .split(',')
  .map(Number)
  .filter((n) => n > 0);
const li = args.indexOf('--latency');
const LATENCY_MS = li >= 0 ? Number(args.splice(li, 2)[1]) : 0;
if (LATENCY_MS && PROCESSOR !== 'stripe') throw new Error('--latency is for --processor stripe (the wire fake)');
const N = Number(args[0] ?? 3000);
const env = await benchEnv('attempts');
let merchant = await env.createMerchant();
const { createRedis } = require(path.join(root, 'dist/libs/queues/src/index.js'));

let stripeFake = null;
/** Gives the merchant a Stripe account, as `processor set` stores it, pointed at the fake. */
let stripeAccountFor = async () => {};
if (PROCESSOR === 'stripe') {
  // The wire fake is test support, never built into dist/: loaded from its TypeScript source.
  await import('../ts-hook.mjs');
  const { StripeFake } = require(path.join(root, 'libs/processor/test/stripe-fake.ts'));
  const { ProcessorAccountsRepository } = require(path.join(root, 'dist/libs/db/src/index.js'));
  const { loadConfig } = require(path.join(root, 'dist/libs/config/src/index.js'));
  stripeFake = new StripeFake('sk_test_benchRetainFake01');
  stripeFake.latencyMs = LATENCY_MS;
  const apiBase = await stripeFake.start();
  const accounts = new ProcessorAccountsRepository(env.db, loadConfig('cli', env.env).cardKeys);
  stripeAccountFor = async (m) => {
    const [{ id }] = await env.db.query(`SELECT id FROM merchants WHERE login = $1`, [m.login]);
    await accounts.set(id, '', 'stripe', { secret_key: stripeFake.secretKey, api_base: apiBase });
  };
  await stripeAccountFor(merchant);
}

const { base } = await env.startApp('intake-api');
/** Submits N due transactions of a new merchant, drains them with `workers` retry-workers: seconds. */
async function drain(workers, round) {
  if (round > 0) {
    merchant = await env.createMerchant();
    await stripeAccountFor(merchant);
  }
  for (let off = 0; off < N; off += 1000) {
    const transactions = Array.from({ length: Math.min(1000, N - off) }, (_, k) => {
      const i = off + k;
      return {
        id: `a_${i}`,
        timestamp: new Date(Date.now() - 3_600_000).toISOString(), // inside the 30-day window, whatever the date
        amount: 10,
        currency: 'USD',
        status: 'Failed',
        division_number: 'd',
        auth_code: '05',
        account: { id: `c${i}` },
        subscription: { id: `s${i}` },
        // Stripe: a saved PaymentMethod (Stripe's approved test one); sandbox: a card of its own.
        payment_method:
          PROCESSOR === 'stripe'
            ? { id: 'pm_card_visa', is_tokenized: true }
            : {
                id: `p${i}`,
                is_tokenized: false,
                credit_card: { account: visa(round * N + i), expiration_date: '202912' },
              },
      };
    });
    const res = await fetch(`${base}/v1/retain/transactions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${merchant.api_key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ transactions }),
    });
    if (res.status !== 200) throw new Error(`submit ${res.status}`);
  }
  // Skip the review: every transaction of this merchant is due now.
  const [{ id: merchantId }] = await env.db.query(`SELECT id FROM merchants WHERE login = $1`, [merchant.login]);
  await env.db.query(
    `UPDATE transactions SET review_status = 'passed', next_attempt_at = now() WHERE merchant_id = $1`,
    [merchantId],
  );
  const t0 = performance.now();
  const started = await Promise.all(
    Array.from({ length: workers }, () => env.startApp('retry-worker', { SCHEDULER_TICK: '200ms' })),
  );
  // Also timed from the first recorded attempt: the drain itself, without the workers' start-up.
  let first = null;
  let firstN = 0;
  let cpuFirst = null;
  const pids = started.map(({ child }) => child.pid);
  for (;;) {
    const [{ n }] = await env.db.query(
      `SELECT count(*)::int AS n FROM attempts WHERE merchant_id = $1 AND state <> 'pending'`,
      [merchantId],
    );
    if (first === null && n > 0) [first, firstN, cpuFirst] = [performance.now(), n, cpuSeconds(pids)];
    if (n >= N) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const end = performance.now();
  const cpuEnd = cpuSeconds(pids);
  // CPU per attempt from the first recorded one on (the workers' start-up excluded).
  // And the machine's busy share over that time (every process, all cores).
  const cpu =
    cpuFirst && cpuEnd && N > firstN
      ? {
          worker: (1e3 * (cpuEnd.apps - cpuFirst.apps)) / (N - firstN),
          postgres: (1e3 * (cpuEnd.postgres - cpuFirst.postgres)) / (N - firstN),
          busy: (cpuEnd.machine - cpuFirst.machine) / ((end - first) / 1000) / os.cpus().length,
        }
      : null;
  const seconds = (end - t0) / 1000;
  const drainPerS = first !== null && end > first ? (N - firstN) / ((end - first) / 1000) : null;
  for (const { child } of started) child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 1000));
  return { seconds, drainPerS, cpu };
}
const runs = [];
for (const [round, workers] of WORKERS.entries()) runs.push({ workers, ...(await drain(workers, round)) });
const workerSeconds = runs[0].seconds;

// Floor: a BullMQ worker that does nothing, same concurrency, same number of jobs.
const redis = createRedis(env.env.REDIS_URL);
const prefix = `${env.env.QUEUE_PREFIX}floor`;
const q = new Queue('noop', { connection: redis, prefix });
await q.addBulk(Array.from({ length: N }, (_, i) => ({ name: 'noop', data: { i }, opts: { removeOnComplete: true } })));
let done = 0;
const t1 = performance.now();
const w = new Worker('noop', async () => {}, { connection: redis.duplicate(), prefix, concurrency: 16 });
await new Promise((resolve) => w.on('completed', () => ++done === N && resolve()));
const floorSeconds = (performance.now() - t1) / 1000;
await w.close();
await q.obliterate({ force: true });
await q.close();
redis.disconnect();

// Updates written in place (HOT: no index entry) per table; the apps' backends have exited, so their counts are in.
const hot = await env.db.query(
  `SELECT relname, n_tup_upd::int AS updates, n_tup_hot_upd::int AS hot FROM pg_stat_user_tables
    WHERE relname IN ('attempts', 'transactions') ORDER BY relname`,
);
const captured = (await env.db.query(`SELECT count(*)::int AS n FROM attempts WHERE state = 'captured'`))[0].n;
const total = (await env.db.query(`SELECT count(*)::int AS n FROM attempts`))[0].n;
const processorNote =
  PROCESSOR === 'stripe'
    ? `Stripe account -> Stripe SDK -> HTTP -> local Stripe fake answering after ${LATENCY_MS} ms; ${stripeFake.succeeded().length} PaymentIntents succeeded`
    : 'sandbox processor';
console.log(
  `\nbench/attempts: ${N} due attempts per run, ${runs.map((r) => r.workers).join(' then ')} retry-worker(s) (${processorNote}); ${captured} of ${total} captured\n`,
);
table([
  ...runs.map((r) => ({
    what: `retry-worker x${r.workers} (tick + attempt + record)`,
    seconds: r.seconds.toFixed(2),
    per_s: Math.round(N / r.seconds),
    after_start_per_s: r.drainPerS === null ? '-' : Math.round(r.drainPerS),
    worker_cpu_ms_per_attempt: r.cpu ? r.cpu.worker.toFixed(3) : '-',
    postgres_cpu_ms_per_attempt: r.cpu ? r.cpu.postgres.toFixed(3) : '-',
    machine_busy: r.cpu ? `${Math.round(100 * r.cpu.busy)}%` : '-',
  })),
  {
    what: 'BullMQ no-op worker, concurrency 16',
    seconds: floorSeconds.toFixed(2),
    per_s: Math.round(N / floorSeconds),
    after_start_per_s: '-',
    worker_cpu_ms_per_attempt: '-',
    postgres_cpu_ms_per_attempt: '-',
    machine_busy: '-',
  },
]);
console.log(`\nHOT updates: ${hot.map((h) => `${h.relname} ${h.hot} of ${h.updates}`).join(', ')}`);
for (const r of runs.slice(1)) {
  const after =
    r.drainPerS && runs[0].drainPerS ? ` (after start-up: ${(r.drainPerS / runs[0].drainPerS).toFixed(2)}x)` : '';
  // One worker already kept this share of every core busy (Postgres, Redis and the worker): more
  // replicas on this machine can reach at most 1/busy of its rate, whatever they do.
  const bound = runs[0].cpu ? ` (this machine: at most ${Math.min(r.workers, 1 / runs[0].cpu.busy).toFixed(2)}x)` : '';
  console.log(
    `\n${r.workers} workers / 1 worker: ${(workerSeconds / r.seconds).toFixed(2)}x${after} (target >= 1.7 for 2)${bound}`,
  );
}
const afterStart = runs[0].drainPerS ? ` (after start-up: ${(runs[0].drainPerS / (N / floorSeconds)).toFixed(2)})` : '';
// With --latency the drain waits on the processor's answers, not on CPU: its no-op ratio is not the target's.
const waits = LATENCY_MS ? ` (not comparable: the fake answers after ${LATENCY_MS} ms; run without --latency)` : '';
console.log(
  `\nratio retry-worker (x${runs[0].workers})/no-op throughput: ${(floorSeconds / workerSeconds).toFixed(2)}${afterStart} (target >= 0.3)${waits}`,
);
await stripeFake?.close();
await env.close();
process.exit(0);
