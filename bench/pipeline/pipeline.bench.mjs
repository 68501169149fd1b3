// bench/pipeline: the whole service, end to end. N transactions (default 100,000) are submitted
// through intake-api in batches of 1,000 and driven through review, attempts against the built-in
// sandbox processor and pushes to a local receiver, until every transaction's final push
// (`retry succeeded`, `retry failed` or `validation failed`) has arrived. Time-scaled
// (RETRY_TIME_SCALE, default 43200: the 30-day recovery window is one minute, so the final pushes measure the service more than the schedule). Prints throughput
// (final pushes per second, first submit to last final push) and p50/p99 of submit -> final push,
// with every app at 1 replica, then (a new merchant, a new private database) at 2 replicas of
// every app (`--replicas 1,2`, the default). Cards are distinct and sandbox-approved or
// sandbox-declined in a fixed mix, so the network limits do not interfere.
// Run: node bench/pipeline/pipeline.bench.mjs [transactions] [--replicas 1,2] [--scale 43200]
import http from 'node:http';
import { APPS } from '../../tools/infra.mjs';
import { benchEnv, percentile, table, visa } from '../lib.mjs';

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args.splice(i, 2)[1] : fallback;
};
const REPLICAS = opt('--replicas', '1,2').split(',').map(Number);
const SCALE = opt('--scale', '43200');
const N = Number(args[0] ?? 100_000);
const FINAL = new Set(['retry succeeded', 'retry failed', 'validation failed']);

async function run(replicas, round) {
  const submittedAt = new Map();
  const finalAt = new Map();
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      res.statusCode = 204;
      res.end();
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        const id = body.header?.transaction_id;
        if (FINAL.has(body.header?.event_name) && id && !finalAt.has(id)) finalAt.set(id, performance.now());
        if (body.header?.event_name === 'validation failed') {
          for (const r of body.content?.rejected ?? []) if (!finalAt.has(r.id)) finalAt.set(r.id, performance.now());
        }
      } catch {
        // not a push of ours
      }
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const env = await benchEnv(`pipeline${round}`);
  const merchant = await env.createMerchant(`http://127.0.0.1:${server.address().port}/hooks`);
  const extra = { RETRY_TIME_SCALE: SCALE, SCHEDULER_TICK: '250ms', REFUND_BATCH_CRON: '0 2 * * *' };
  const started = [];
  for (let r = 0; r < replicas; r++) for (const app of APPS) started.push(await env.startApp(app, extra));
  const intakes = started.filter((s, i) => APPS[i % APPS.length] === 'intake-api').map((s) => s.base);

  const t0 = performance.now();
  let nextBatch = 0;
  const batches = Math.ceil(N / 1000);
  // One client per intake-api replica, each sending its share of the batches.
  await Promise.all(
    intakes.map(async (base) => {
      for (;;) {
        const b = nextBatch++;
        if (b >= batches) return;
        const transactions = Array.from({ length: Math.min(1000, N - b * 1000) }, (_, k) => {
          const i = b * 1000 + k;
          return {
            id: `p${round}_${i}`,
            timestamp: new Date().toISOString(),
            amount: 10 + (i % 50),
            currency: 'USD',
            status: 'Failed',
            division_number: 'd',
            auth_code: i % 10 === 9 ? '14' : '51',
            account: { id: `c${i}` },
            subscription: { id: `s${i}` },
            payment_method: {
              id: `pm${i}`,
              is_tokenized: false,
              credit_card: { account: visa(round * 10_000_000 + i), expiration_date: '203012' },
            },
          };
        });
        const at = performance.now();
        const res = await fetch(`${base}/v1/retain/transactions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${merchant.api_key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ transactions }),
        });
        if (res.status !== 200) throw new Error(`submit ${res.status}: ${await res.text()}`);
        for (const t of transactions) submittedAt.set(t.id, at);
      }
    }),
  );
  const submitSeconds = (performance.now() - t0) / 1000;
  let last = 0;
  let lastChange = performance.now();
  while (finalAt.size < N) {
    await new Promise((r) => setTimeout(r, 500));
    if (finalAt.size !== last) {
      last = finalAt.size;
      lastChange = performance.now();
      process.stderr.write(`x${replicas}: ${finalAt.size} / ${N} final pushes\n`);
    } else if (performance.now() - lastChange > 120_000) {
      process.stderr.write(`x${replicas}: no final push for 2 minutes; stopping at ${finalAt.size}\n`);
      break;
    }
  }
  const lastPush = Math.max(...finalAt.values());
  const latencies = [...finalAt].map(([id, at]) => (at - (submittedAt.get(id) ?? t0)) / 1000);
  const [{ attempts }] = await env.db.query(`SELECT count(*)::int AS attempts FROM attempts`);
  const states = await env.db.query(`SELECT status, count(*)::int AS n FROM transactions GROUP BY 1 ORDER BY 2 DESC`);
  for (const s of started) s.child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 1500));
  server.close();
  await env.close();
  return {
    replicas,
    transactions: N,
    final_pushes: finalAt.size,
    attempts,
    submit_s: submitSeconds.toFixed(1),
    total_s: ((lastPush - t0) / 1000).toFixed(1),
    final_per_s: Math.round(finalAt.size / ((lastPush - t0) / 1000)),
    p50_s: percentile(latencies, 50).toFixed(1),
    p99_s: percentile(latencies, 99).toFixed(1),
    statuses: states.map((s) => `${s.status} ${s.n}`).join(', '),
  };
}

const results = [];
for (const [round, replicas] of REPLICAS.entries()) results.push(await run(replicas, round));
console.log(
  `\nbench/pipeline: ${N} transactions submitted and driven to their final pushes (RETRY_TIME_SCALE ${SCALE}), ` +
    `every app at ${REPLICAS.join(' then ')} replica(s)\n`,
);
table(results);
if (results.length > 1) {
  console.log(
    `\nthroughput x${results[1].replicas} / x${results[0].replicas}: ${(results[1].final_per_s / results[0].final_per_s).toFixed(2)}`,
  );
}
process.exit(0);
