// bench/webhooks: deliveries per second from a real webhook-dispatcher process to a local receiver
// answering 202, and in the same run the floor: the same number of plain axios POSTs of the same
// bodies from one process, at the dispatcher's concurrency (64). Prints the ratio (target >= 0.8).
// Run: node bench/webhooks/webhooks.bench.mjs [count]
import http from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import axios from 'axios';
import { root } from '../../tools/infra.mjs';
import { benchEnv, cpuSeconds, table } from '../lib.mjs';

const require = createRequire(import.meta.url);
const N = Number(process.argv[2] ?? 2000);
const CONCURRENCY = 64;

let received = 0;
const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    received++;
    res.statusCode = 202;
    res.end();
  });
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const url = `http://127.0.0.1:${server.address().port}/hooks`;

const env = await benchEnv('webhooks');
const merchant = await env.createMerchant(url);
const { announce, QueueRegistry, OutboxRelay, createRedis } = require(path.join(root, 'dist/libs/queues/src/index.js'));
const [{ id: merchantId }] = await env.db.query(`SELECT id FROM merchants WHERE login = $1`, [merchant.login]);
const content = { id: 'inv-1', status: 'Captured', amount: 19.99, currency: 'USD', metadata: { plan: 'gold' } };

// Announce N pushes (rows + outbox); the dispatcher starts, then they are published at once.
const outbox = await env.db.transaction((m) =>
  announce(
    m,
    Array.from({ length: N }, (_, i) => ({
      merchantId,
      eventName: 'retry succeeded',
      payloadId: String(i).padStart(40, '0'),
      merchantTransactionId: `inv-${i}`,
      content,
    })),
  ),
);
const redis = createRedis(env.env.REDIS_URL);
const queues = new QueueRegistry(redis, env.env.QUEUE_PREFIX);
const bodies = (await env.db.query(`SELECT body FROM webhook_messages`)).map((r) => JSON.stringify(r.body));
const { child } = await env.startApp('webhook-dispatcher');
// Timed from the publish of the jobs to the last delivery recorded in Postgres.
const t0 = performance.now();
const cpu0 = cpuSeconds([child.pid]);
await new OutboxRelay(env.db, queues).publish(outbox);
// Until the receiver has every push (an in-process counter, so no polling query competes with the
// dispatcher for Postgres), then until Postgres records every message delivered.
while (received < N) await new Promise((r) => setTimeout(r, 5));
while (true) {
  const [{ n }] = await env.db.query(`SELECT count(*)::int AS n FROM webhook_messages WHERE status = 'delivered'`);
  if (n >= N) break;
  await new Promise((r) => setTimeout(r, 5));
}
const dispatcherSeconds = (performance.now() - t0) / 1000;
const cpu1 = cpuSeconds([child.pid]);
// CPU per push (the dispatcher's, and all of Postgres'): steadier than rates on this shared machine.
const perPush = (k) => (cpu0 && cpu1 ? ((1e3 * (cpu1[k] - cpu0[k])) / N).toFixed(3) : '-');

// Floor: plain axios POSTs of the same bodies, same concurrency, one process.
const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
const t1 = performance.now();
let next = 0;
await Promise.all(
  Array.from({ length: CONCURRENCY }, async () => {
    while (next < bodies.length) {
      const body = bodies[next++];
      await axios.post(url, body, { httpAgent: agent, headers: { 'content-type': 'application/json' } });
    }
  }),
);
const floorSeconds = (performance.now() - t1) / 1000;

console.log(`\nbench/webhooks: ${N} pushes to a local receiver answering 202\n`);
table([
  {
    what: 'webhook-dispatcher',
    seconds: dispatcherSeconds.toFixed(2),
    per_s: Math.round(N / dispatcherSeconds),
    dispatcher_cpu_ms_per_push: perPush('apps'),
    postgres_cpu_ms_per_push: perPush('postgres'),
  },
  {
    what: 'floor: plain axios POSTs',
    seconds: floorSeconds.toFixed(2),
    per_s: Math.round(N / floorSeconds),
    dispatcher_cpu_ms_per_push: '-',
    postgres_cpu_ms_per_push: '-',
  },
]);
console.log(`\nratio dispatcher/floor throughput: ${(floorSeconds / dispatcherSeconds).toFixed(2)} (target >= 0.80)`);
await queues.close();
redis.disconnect();
server.close();
await env.close();
process.exit(0);
