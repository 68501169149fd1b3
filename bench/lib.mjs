// Shared helpers of the benchmarks: a fresh database, a merchant, app processes, percentiles.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { createRequire } from 'node:module';
import {
  APPS,
  appEntry,
  ensureBuilt,
  ensureDevJweKey,
  ensurePostgres,
  ensureRedis,
  freePort,
  root,
} from '../tools/infra.mjs';

const require = createRequire(import.meta.url);

export async function benchEnv(name) {
  ensureBuilt();
  const pg = await ensurePostgres(process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/retain');
  const redis = await ensureRedis(process.env.REDIS_URL || 'redis://127.0.0.1:6379');
  const url = new URL(pg.databaseUrl);
  url.pathname = `/retain_bench_${name}_${randomBytes(3).toString('hex')}`;
  const databaseUrl = url.toString();
  const { migrate, createDataSource, dropDatabase, MerchantsRepository } = require(
    path.join(root, 'dist/libs/db/src/index.js'),
  );
  const { loadConfig } = require(path.join(root, 'dist/libs/config/src/index.js'));
  await migrate(databaseUrl);
  const db = createDataSource(databaseUrl, 4);
  await db.initialize();
  const env = {
    ...process.env,
    DATABASE_URL: databaseUrl,
    REDIS_URL: redis.redisUrl,
    QUEUE_PREFIX: `{bench${randomBytes(3).toString('hex')}}`,
    CARD_JWE_PRIVATE_KEY_FILE: process.env.CARD_JWE_PRIVATE_KEY_FILE || ensureDevJweKey(),
    LOG_LEVEL: 'warn',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    HOST: '127.0.0.1',
    // No retention sweep at a retry worker's start: the benches measure their own load alone (the
    // scale bench's drain on two years of seeded rows, whose card data a first sweep would erase).
    RETENTION_FIRST_SWEEP_DELAY: '12d',
  };
  const merchants = new MerchantsRepository(db, loadConfig('cli', env).cardKeys);
  const children = [];
  return {
    databaseUrl,
    db,
    env,
    createMerchant: (webhookUrl = null) => merchants.create(`bench_${randomBytes(4).toString('hex')}`, webhookUrl),
    async startApp(app, extraEnv = {}) {
      if (!APPS.includes(app)) throw new Error(`unknown app ${app}`);
      const port = await freePort();
      // BENCH_NODE_ARGS passes node flags to the app processes (e.g. --cpu-prof for profiling).
      const nodeArgs = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
      const child = spawn(process.execPath, [...nodeArgs, appEntry(app)], {
        env: {
          ...env,
          ...(app === 'intake-api' ? { PORT: String(port) } : { HEALTH_PORT: String(port) }),
          ...extraEnv,
        },
        stdio: ['ignore', process.env.BENCH_LOGS ? 'inherit' : 'ignore', 'inherit'],
      });
      children.push(child);
      const base = `http://127.0.0.1:${port}`;
      for (let i = 0; i < 300; i++) {
        try {
          if ((await fetch(`${base}/readyz`)).ok) return { base, child };
        } catch {}
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error(`${app} did not start`);
    },
    async close() {
      for (const c of children) c.kill('SIGTERM');
      await new Promise((r) => setTimeout(r, 500));
      await db.query(`SELECT 1`);
      await db.destroy();
      // BENCH_KEEP_DB=1 keeps the bench's database for a look afterwards (its name is printed).
      if (process.env.BENCH_KEEP_DB) console.log(`kept database ${new URL(databaseUrl).pathname.slice(1)}`);
      else await dropDatabase(databaseUrl);
      await redis.stop();
      await pg.stop();
    },
  };
}

export function percentile(values, p) {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

export const median = (values) => percentile(values, 50);

export function table(rows) {
  const widths = Object.keys(rows[0]).map((k) => Math.max(k.length, ...rows.map((r) => String(r[k]).length)));
  const line = (cells) => cells.map((c, i) => String(c).padEnd(widths[i])).join('  ');
  console.log(line(Object.keys(rows[0])));
  for (const r of rows) console.log(line(Object.values(r)));
}

/** A valid Visa number per index (Luhn digit computed), so every transaction can have a card of its own. */
export function visa(i) {
  const body = `4${String(100000000000000 + i).slice(1)}`;
  let sum = 0;
  for (let k = 0; k < body.length; k++) {
    let d = Number(body[body.length - 1 - k]);
    if (k % 2 === 0) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return body + ((10 - (sum % 10)) % 10);
}

/**
 * CPU seconds (user + system, from /proc) used so far by the given processes and by every running
 * `postgres` process. Unlike wall-clock rates, CPU time per unit of work barely moves when this
 * shared machine's speed swings, so benches print it beside their ratios. Linux only; null elsewhere.
 */
export function cpuSeconds(pids) {
  const fs = require('node:fs');
  const tick = 100; // USER_HZ: 100 on Linux
  const of = (pid) => {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return { name: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')), s: (+fields[11] + +fields[12]) / tick };
    } catch {
      return null;
    }
  };
  if (!fs.existsSync('/proc/self/stat')) return null;
  const apps = pids.reduce((sum, pid) => sum + (of(pid)?.s ?? 0), 0);
  // The whole machine's busy time (every process, all cores): what a second replica could still use.
  const [, ...times] = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).map(Number);
  const machine = (times.reduce((a, b) => a + b, 0) - times[3] - times[4]) / tick;
  let postgres = 0;
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const p = of(entry);
    if (p && p.name.startsWith('postgres')) postgres += p.s;
  }
  return { apps, postgres, machine };
}
