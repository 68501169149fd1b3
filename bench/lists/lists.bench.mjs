// bench/lists: what one list call costs, through the real intake-api over HTTP on a small database
// (3,000 transactions of one merchant): p50/p99 of 300 sequential calls of 100 rows per variant, and
// CPU per call of the intake-api and of Postgres (from /proc). bench/scale measures the same lists at a
// million rows and under 8 clients; this one is quick, for comparing two trees on one machine.
// Run: node bench/lists/lists.bench.mjs [calls]
import { benchEnv, cpuSeconds, percentile, table, visa } from '../lib.mjs';

const CALLS = Number(process.argv[2] ?? 300);
const env = await benchEnv('lists');
const merchant = await env.createMerchant();
const { base, child } = await env.startApp('intake-api');
const auth = { authorization: `Bearer ${merchant.api_key}` };
for (let off = 0; off < 3000; off += 1000) {
  const transactions = Array.from({ length: 1000 }, (_, k) => {
    const i = off + k;
    return {
      id: `l_${i}`,
      timestamp: new Date(Date.now() - 3_600_000).toISOString(),
      amount: 10,
      currency: 'USD',
      status: 'Failed',
      division_number: 'd',
      auth_code: '05',
      account: { id: `c${i % 500}`, email: `c${i}@example.com` },
      subscription: { id: `s${i}` },
      metadata: { plan: 'gold', n: String(i) },
      payment_method: {
        id: `p${i}`,
        is_tokenized: false,
        credit_card: { account: visa(i), expiration_date: '202912' },
      },
    };
  });
  const res = await fetch(`${base}/v1/retain/transactions`, {
    method: 'POST',
    headers: { ...auth, 'content-type': 'application/json' },
    body: JSON.stringify({ transactions }),
  });
  if (res.status !== 200) throw new Error(`submit ${res.status}`);
}
const variants = {
  'list, default': '',
  'list, status=Failed': '&status=Failed',
  'list, status=Failed,Captured': '&status=Failed,Captured',
  'list, starting_after (middle)': '&starting_after=l_1500',
};
const rows = [];
for (const [name, q] of Object.entries(variants)) {
  const url = `${base}/v1/retain/transactions?limit=100${q}`;
  for (let i = 0; i < 30; i++) await (await fetch(url, { headers: auth })).text(); // warm-up
  const times = [];
  const c0 = cpuSeconds([child.pid]);
  for (let i = 0; i < CALLS; i++) {
    const t = performance.now();
    const body = await (await fetch(url, { headers: auth })).json();
    times.push(performance.now() - t);
    if (body.data.length !== 100) throw new Error(`${name}: ${body.data.length} rows`);
  }
  const c1 = cpuSeconds([child.pid]);
  rows.push({
    variant: name,
    calls: CALLS,
    p50_ms: percentile(times, 50).toFixed(2),
    p99_ms: percentile(times, 99).toFixed(2),
    intake_cpu_ms_per_call: c0 && c1 ? ((1000 * (c1.apps - c0.apps)) / CALLS).toFixed(2) : '-',
    postgres_cpu_ms_per_call: c0 && c1 ? ((1000 * (c1.postgres - c0.postgres)) / CALLS).toFixed(2) : '-',
  });
}
console.log(`\nbench/lists: 3,000 transactions of one merchant, pages of 100, one client\n`);
table(rows);
await env.close();
process.exit(0);
