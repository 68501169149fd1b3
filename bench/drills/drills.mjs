// bench/drills: fault drills under load. Starts its OWN PostgreSQL cluster (initdb into a temp dir) and
// its own redis-server on free ports (never the machine's shared ones), the five apps as processes, a
// webhook receiver, and a steady load of submissions (sandbox cards that recover, decline forever, time
// out) plus refunds and stops. Then, in turn: PostgreSQL down, Redis down (killed: its queues are lost),
// SIGKILL + restart of each app. At the end it waits for the system to settle and prints accepted, lost,
// duplicated and 5xx figures, overall and per drill. Everything is observed from outside: HTTP answers,
// rows, pushes received, process signals.
//
// Run: node bench/drills/drills.mjs [--outage 20s] [--gap 15s] [--warmup 10s] [--settle 300s]
//        [--rate 10] [--scale 30000] [--merchants 20] [--drills pg,redis,kill] [--keep]
// Every flag also reads an env variable: DRILL_OUTAGE, DRILL_GAP, DRILL_WARMUP, DRILL_SETTLE, DRILL_RATE,
// DRILL_SCALE, DRILL_MERCHANTS, DRILL_DRILLS. Quick run: node bench/drills/drills.mjs --outage 5s --gap 5s --warmup 5s
// Exit code: 0 when 0 lost, 0 double charges and 0 `500`; 1 otherwise.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { chownSync, createWriteStream, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { APPS, appEntry, ensureBuilt, ensureDevJweKey, freePort, root, tcpReachable } from '../../tools/infra.mjs';

const require = createRequire(import.meta.url);
const pg = require('pg');

// ---------------------------------------------------------------- options

function parseDuration(text) {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(String(text).trim());
  if (!m) throw new Error(`bad duration: ${text}`);
  const n = Number(m[1]);
  return m[2] === 'ms' ? n : m[2] === 'm' ? n * 60_000 : n * 1000;
}

function option(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  if (i > 0 && process.argv[i + 1] !== undefined) return process.argv[i + 1];
  const eq = process.argv.find((a) => a.startsWith(`--${name}=`));
  if (eq) return eq.slice(name.length + 3);
  return process.env[`DRILL_${name.toUpperCase()}`] ?? fallback;
}

const OPTS = {
  outageMs: parseDuration(option('outage', '20s')),
  gapMs: parseDuration(option('gap', '15s')),
  warmupMs: parseDuration(option('warmup', '10s')),
  settleMs: parseDuration(option('settle', '300s')),
  rate: Number(option('rate', '10')), // submitted transactions per second
  scale: option('scale', '30000'), // RETRY_TIME_SCALE: a 30-day schedule in ~86 s
  drills: option('drills', 'pg,redis,kill').split(','),
  merchants: Number(option('merchants', '20')), // the load is spread over this many merchants
  keep: process.argv.includes('--keep'),
};
const BATCH = Math.max(1, Math.round(OPTS.rate / 2)); // two batches per second
const say = (msg) => process.stderr.write(`[drill ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------- private PostgreSQL and Redis

function pgBin(name) {
  const dirs = spawnSync('sh', ['-c', 'ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1'], {
    encoding: 'utf8',
  }).stdout.trim();
  if (dirs) return path.join(dirs, name);
  const which = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).stdout.trim();
  if (!which) throw new Error(`no ${name} found (install PostgreSQL server binaries)`);
  return which;
}

/** initdb refuses root: as root, run the PostgreSQL binaries as the postgres user. */
function asPgUser(cmd, args) {
  if (process.getuid?.() !== 0) return [cmd, args];
  return ['runuser', ['-u', 'postgres', '--', cmd, ...args]];
}

function run(cmd, args) {
  const [c, a] = asPgUser(cmd, args);
  const r = spawnSync(c, a, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed:\n${r.stdout}\n${r.stderr}`);
}

async function privatePostgres(dir) {
  const data = path.join(dir, 'pgdata');
  if (process.getuid?.() === 0) {
    const uid = Number(spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).stdout);
    const gid = Number(spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).stdout);
    chownSync(dir, uid, gid);
  }
  run(pgBin('initdb'), ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  const port = await freePort();
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`;
  const ctl = (...args) => run(pgBin('pg_ctl'), ['-D', data, ...args]);
  const start = () => ctl('-o', opts, '-l', path.join(dir, 'postgres.log'), '-w', '-t', '60', 'start');
  start();
  return {
    url: `postgres://postgres@127.0.0.1:${port}/retain`,
    port,
    start,
    // immediate: the server dies without a checkpoint, like a crashed database host
    stop: () => ctl('-m', 'immediate', '-w', 'stop'),
    destroy: () => {
      try {
        ctl('-m', 'immediate', '-w', 'stop');
      } catch {}
    },
  };
}

async function privateRedis() {
  const port = await freePort();
  let child = null;
  const start = async () => {
    child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
      stdio: 'ignore',
    });
    for (let i = 0; i < 100 && !(await tcpReachable('127.0.0.1', port)); i++) await sleep(50);
  };
  const stop = async () => {
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL'); // no persistence: every queue and job is gone
    await exited;
  };
  await start();
  return { url: `redis://127.0.0.1:${port}`, port, start, stop };
}

// ---------------------------------------------------------------- the apps

class App {
  constructor(name, env, logDir) {
    this.name = name;
    this.env = env;
    this.log = createWriteStream(path.join(logDir, `${name}.log`), { flags: 'a' });
    this.child = null;
    this.port = 0;
  }

  get base() {
    return `http://127.0.0.1:${this.port}`;
  }

  async start() {
    if (!this.port) this.port = await freePort();
    const child = spawn(process.execPath, [appEntry(this.name)], {
      env: {
        ...this.env,
        ...(this.name === 'intake-api' ? { PORT: String(this.port) } : { HEALTH_PORT: String(this.port) }),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.pipe(this.log, { end: false });
    child.stderr.pipe(this.log, { end: false });
    this.child = child;
    const t0 = Date.now();
    while (Date.now() - t0 < 60_000) {
      if (child.exitCode !== null) throw new Error(`${this.name} exited at start (see its log)`);
      try {
        if ((await fetch(`${this.base}/readyz`, { signal: AbortSignal.timeout(2000) })).ok) return Date.now() - t0;
      } catch {}
      await sleep(100);
    }
    throw new Error(`${this.name} not ready after 60 s`);
  }

  async kill(signal = 'SIGKILL') {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill(signal);
    await exited;
  }
}

// ---------------------------------------------------------------- webhook receiver

function startReceiver() {
  const pushes = []; // { messageId, event, txnId, at }
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      try {
        const { header } = JSON.parse(raw);
        pushes.push({
          messageId: header.message_id,
          event: header.event_name,
          txnId: header.transaction_id ?? null,
          at: Date.now(),
        });
      } catch {
        pushes.push({ messageId: null, event: 'unparsable', txnId: null, at: Date.now() });
      }
      res.statusCode = 202;
      res.end();
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ pushes, server, url: `http://127.0.0.1:${server.address().port}/hooks` }),
    ),
  );
}

// ---------------------------------------------------------------- load

// Sandbox cards (decisions §12): approved at once, declined twice then approved, declined on every
// attempt, a processor timeout then approved; plus random valid cards (the seeded recovery model).
const CARDS = [
  ['4111111111111111', 20],
  ['4000000000000077', 25],
  ['4000000000000002', 10],
  ['4000000000000119', 20],
  ['random', 25],
];

function luhnComplete(body) {
  let sum = 0;
  for (let i = 0; i < body.length; i++) {
    let d = Number(body[body.length - 1 - i]);
    if (i % 2 === 0) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
  }
  return body + String((10 - (sum % 10)) % 10);
}

function pickCard() {
  let r = randomInt(100);
  for (const [card, w] of CARDS) {
    if (r < w) return card === 'random' ? luhnComplete(`4${String(randomInt(1e14)).padStart(14, '0')}`) : card;
    r -= w;
  }
  return CARDS[0][0];
}

function newTxn() {
  const id = `drill_${randomBytes(8).toString('hex')}`;
  const cents = randomInt(500, 20_000);
  return {
    id,
    timestamp: new Date().toISOString(),
    // never ending in .13: the sandbox rejects those refunds
    amount: (cents % 100 === 13 ? cents + 1 : cents) / 100,
    currency: 'USD',
    status: 'Failed',
    division_number: 'div-1',
    auth_code: '51',
    account: { id: `acct_${id}` },
    subscription: { id: `sub_${id}` },
    payment_method: {
      id: `pm_${id}`,
      is_tokenized: false,
      credit_card: { account: pickCard(), expiration_date: '203012' },
    },
  };
}

/** Every HTTP answer and connection error, with the drill phase it happened in. */
const calls = [];
let phase = 'warmup';
const accepted = new Map(); // merchant txn id -> phase it was accepted in
const stopsAsked = new Set();
const refundsAsked = new Set();

async function call(api, method, urlPath, body) {
  const at = Date.now();
  try {
    const res = await fetch(`${api.base}${urlPath}`, {
      method,
      headers: { authorization: `Bearer ${api.key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(15_000),
    });
    const text = await res.text();
    const entry = { phase, at, method, status: res.status, retryAfter: res.headers.get('retry-after'), text };
    calls.push(entry);
    return entry;
  } catch (err) {
    const entry = { phase, at, method, status: 0, error: err?.cause?.code ?? err?.name ?? 'error' };
    calls.push(entry);
    return entry;
  }
}

/** Retries a call like a careful merchant: on 5xx or a connection error, after Retry-After (or 1 s). */
async function callUntilAnswered(api, method, urlPath, body, running) {
  for (let tries = 0; ; tries++) {
    const r = await call(api, method, urlPath, body);
    if (r.status > 0 && r.status < 500) return { ...r, tries };
    if (!running() || tries >= 600) return { ...r, tries }; // give up after ~10 min (or when the load stops)
    const wait = r.retryAfter ? Math.min(5, Number(r.retryAfter) || 1) * 1000 : 1000;
    await sleep(wait);
  }
}

/** One of the merchants, at random: card histories (network limits) are per card per merchant. */
const as = (api) => ({ base: api.base, key: api.keys[randomInt(api.keys.length)] });

async function submitLoop(api, running) {
  while (running()) {
    const started = Date.now();
    const batch = Array.from({ length: BATCH }, newTxn);
    // Never abandons a batch while the load stops: its fate must be known to count it.
    const r = await callUntilAnswered(as(api), 'POST', '/v1/retain/transactions', { transactions: batch }, () => true);
    if (r.status === 200 || r.status === 207) {
      const rejected = new Map(
        (r.status === 207 ? JSON.parse(r.text).rejected : []).map((x) => [x.id, x.errors.map((e) => e.code)]),
      );
      for (const t of batch) {
        const codes = rejected.get(t.id);
        // A retried call may find its own earlier, cut-off attempt committed: RETDUP2 / RET004 say so.
        if (!codes || (r.tries > 0 && codes.every((c) => c === 'RETDUP2' || c === 'RET004'))) accepted.set(t.id, phase);
        else say(`rejected ${t.id}: ${codes.join(',')}`);
      }
    } else {
      say(`submission answered ${r.status}: ${r.text?.slice(0, 200)}`);
    }
    await sleep(Math.max(0, 1000 / 2 - (Date.now() - started)));
  }
}

/** Refunds some captured transactions and stops some still in retry, through the API only. */
async function refundLoop(everyone, running) {
  while (running()) {
    await sleep(2000);
    const api = as(everyone);
    const list = await call(api, 'GET', '/v1/retain/transactions?status=Captured&limit=20');
    const targets = [];
    if (list.status === 200) {
      const fresh = JSON.parse(list.text).data.filter((t) => accepted.has(t.id) && !refundsAsked.has(t.id));
      for (const t of fresh.slice(0, 2)) {
        refundsAsked.add(t.id);
        targets.push({ id: t.id });
      }
    }
    const inRetry = await call(api, 'GET', '/v1/retain/transactions?status=In%20Retry&limit=20');
    if (inRetry.status === 200) {
      const fresh = JSON.parse(inRetry.text).data.filter((t) => accepted.has(t.id) && !stopsAsked.has(t.id));
      for (const t of fresh.slice(0, 1)) {
        stopsAsked.add(t.id);
        targets.push({ id: t.id });
      }
    }
    if (targets.length === 0) continue;
    const r = await callUntilAnswered(api, 'POST', '/v1/retain/refunds', { refunds: targets }, running);
    if (r.status !== 200 && r.status !== 207) say(`refunds answered ${r.status}: ${r.text?.slice(0, 200)}`);
  }
}

// ---------------------------------------------------------------- checks

const FINAL = ['Captured', 'Cancelled', 'Stopped', 'Refunded', 'Partially Refunded'];

async function snapshot(db, logins, pushes) {
  const ids = [...accepted.keys()];
  const rows = (
    await db.query(
      `SELECT t.merchant_txn_id AS id, t.status, t.review_status,
              (SELECT count(*) FROM attempts a WHERE a.transaction_id = t.id AND a.state = 'captured')::int AS captures,
              (SELECT count(*) FROM attempts a JOIN sandbox_operations s ON s.idempotency_key = a.vid
                 WHERE a.transaction_id = t.id AND s.kind = 'charge' AND s.result->>'outcome' = 'approved')::int AS charges,
              (SELECT count(*) FROM refunds r WHERE r.transaction_id = t.id AND r.status IN ('Completed', 'Failed'))::int
                AS refunds_done,
              (SELECT count(*) FROM refunds r WHERE r.transaction_id = t.id AND r.status = 'Processing')::int AS refunds_open,
              (SELECT coalesce(sum(r.amount_minor), 0) FROM refunds r JOIN sandbox_operations s
                 ON s.idempotency_key = r.vid AND s.kind = 'refund' AND s.result->>'outcome' = 'completed'
                WHERE r.transaction_id = t.id)::bigint AS refunded_minor,
              coalesce(t.captured_amount_minor, 0)::bigint AS captured_minor,
              extract(epoch FROM now() - t.next_attempt_at)::float AS overdue_s,
              (SELECT extract(epoch FROM now() - min(a.created_at)) FROM attempts a
                WHERE a.transaction_id = t.id AND a.state = 'pending')::float AS pending_attempt_s
         FROM transactions t JOIN merchants m ON m.id = t.merchant_id
        WHERE m.login = ANY($1::text[]) AND t.merchant_txn_id = ANY($2::text[])`,
      [logins, ids],
    )
  ).rows;
  const messages = (
    await db.query(
      `SELECT w.message_id, w.status, w.replay_count FROM webhook_messages w JOIN merchants m ON m.id = w.merchant_id
        WHERE m.login = ANY($1::text[])`,
      [logins],
    )
  ).rows;
  // Approved charges whose idempotency key names no attempt row: money taken that no row records.
  const [{ n: orphanCharges }] = (
    await db.query(
      `SELECT count(*)::int AS n FROM sandbox_operations s
        WHERE s.kind = 'charge' AND s.result->>'outcome' = 'approved'
          AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.vid = s.idempotency_key)`,
    )
  ).rows;
  const [{ n: openOutbox }] = (await db.query(`SELECT count(*)::int AS n FROM outbox WHERE completed_at IS NULL`)).rows;
  return { rows, messages, orphanCharges, openOutbox, pushes: [...pushes] };
}

function settled(s) {
  return (
    s.rows.length === accepted.size &&
    s.rows.every((r) => FINAL.includes(r.status) && r.refunds_open === 0 && r.review_status !== 'pending') &&
    s.messages.every((m) => m.status !== 'pending') &&
    s.openOutbox === 0
  );
}

/**
 * Why a transaction that is not final makes no progress, or null while something will still move it:
 * a next attempt due in the future (e.g. waiting out a network-limit window) or only just due.
 */
function stuckReason(r) {
  if (r.review_status === 'pending') return 'never reviewed';
  if (r.refunds_open > 0) return `${r.refunds_open} refund(s) still Processing`;
  if (r.pending_attempt_s !== null) return r.pending_attempt_s > 60 ? 'an attempt in flight for over 60 s' : null;
  if (r.overdue_s === null) return 'nothing scheduled';
  return r.overdue_s > 60 ? `next attempt overdue by ${Math.round(r.overdue_s)} s` : null;
}

function judge(s) {
  const byId = new Map(s.rows.map((r) => [r.id, r]));
  const delivered = new Map(); // message id -> deliveries received
  const distinct = new Map(); // `${txn}|${event}` -> Set of message ids
  for (const p of s.pushes) {
    delivered.set(p.messageId, (delivered.get(p.messageId) ?? 0) + 1);
    const k = `${p.txnId}|${p.event}`;
    if (!distinct.has(k)) distinct.set(k, new Set());
    distinct.get(k).add(p.messageId);
  }
  const replays = new Map(s.messages.map((m) => [m.message_id, m.replay_count ?? 0]));
  const per = new Map(); // phase -> figures
  const fig = (ph) => {
    if (!per.has(ph))
      per.set(ph, {
        accepted: 0,
        noRow: 0,
        stuck: 0,
        inProgress: 0,
        noPush: 0,
        doubleCapture: 0,
        doubleCharge: 0,
        overRefund: 0,
      });
    return per.get(ph);
  };
  const examples = [];
  for (const [id, ph] of accepted) {
    const f = fig(ph);
    f.accepted++;
    const r = byId.get(id);
    if (!r) {
      f.noRow++;
      examples.push(`${id}: accepted, no row`);
      continue;
    }
    if (!FINAL.includes(r.status) || r.refunds_open > 0) {
      const why = stuckReason(r);
      if (why) {
        f.stuck++;
        examples.push(`${id}: stuck ${r.status}: ${why}`);
      } else f.inProgress++;
    }
    const got = (event) => distinct.get(`${id}|${event}`)?.size ?? 0;
    const missing = [];
    if (r.captures > 0 && got('retry succeeded') === 0) missing.push('retry succeeded');
    if (r.status === 'Cancelled' && got('retry failed') === 0) missing.push('retry failed');
    if (got('refund completed') + got('refund failed') < r.refunds_done) missing.push('refund completed/failed');
    if (missing.length) {
      f.noPush++;
      examples.push(`${id}: ${r.status}, no ${missing.join(', ')} push`);
    }
    if (r.captures > 1) f.doubleCapture++;
    if (r.charges > 1) {
      f.doubleCharge++;
      examples.push(`${id}: ${r.charges} approved charges in the sandbox ledger`);
    }
    if (Number(r.refunded_minor) > Number(r.captured_minor)) f.overRefund++;
  }
  let dupDeliveries = 0;
  for (const [mid, n] of delivered) {
    const extra = Math.max(0, n - 1 - (replays.get(mid) ?? 0));
    dupDeliveries += extra;
    if (extra > 0) {
      // When each copy arrived, to place it among the drills' phases (printed with their times).
      const times = s.pushes.filter((p) => p.messageId === mid).map((p) => new Date(p.at).toISOString().slice(11, 23));
      examples.push(`${mid}: received ${n} times, at ${times.join(', ')}`);
    }
  }
  let dupAnnouncements = 0;
  for (const [k, set] of distinct) if (!k.startsWith('null|') && set.size > 1) dupAnnouncements += set.size - 1;
  const undelivered = s.messages.filter((m) => m.status !== 'delivered').length;
  return { per, dupDeliveries, dupAnnouncements, undelivered, examples };
}

function http5xx(list) {
  const f = { requests: list.length, c500: 0, c503ra: 0, c503: 0, other5xx: 0, connErrors: 0 };
  for (const c of list) {
    if (c.status === 0) f.connErrors++;
    else if (c.status === 500) f.c500++;
    else if (c.status === 503 && c.retryAfter) f.c503ra++;
    else if (c.status === 503) f.c503++;
    else if (c.status > 500) f.other5xx++;
  }
  f.total5xx = f.c500 + f.c503ra + f.c503 + f.other5xx;
  return f;
}

// ---------------------------------------------------------------- main

async function main() {
  ensureBuilt();
  const dir = mkdtempSync(path.join(tmpdir(), 'retain-drill-'));
  say(`work dir ${dir} (app logs: ${dir}/<app>.log)`);
  const cleanups = [];
  const cleanup = async () => {
    for (const f of cleanups.reverse()) await Promise.resolve(f()).catch(() => {});
    if (!OPTS.keep) rmSync(dir, { recursive: true, force: true });
  };
  process.once('SIGINT', () => void cleanup().then(() => process.exit(130)));
  try {
    const pgs = await privatePostgres(dir);
    cleanups.push(() => pgs.destroy());
    const redis = await privateRedis();
    cleanups.push(() => redis.stop());
    say(`private PostgreSQL on ${pgs.port}, Redis on ${redis.port}`);
    const admin = new pg.Client({ connectionString: pgs.url.replace(/\/retain$/, '/postgres') });
    await admin.connect();
    await admin.query('CREATE DATABASE retain');
    await admin.end();
    const { migrate, createDataSource, MerchantsRepository } = require(path.join(root, 'dist/libs/db/src/index.js'));
    const { loadConfig } = require(path.join(root, 'dist/libs/config/src/index.js'));
    await migrate(pgs.url);
    const receiver = await startReceiver();
    cleanups.push(() => new Promise((r) => receiver.server.close(r)));
    const env = {
      ...process.env,
      NODE_ENV: 'development',
      DATABASE_URL: pgs.url,
      REDIS_URL: redis.url,
      QUEUE_PREFIX: '{drill}',
      CARD_JWE_PRIVATE_KEY_FILE: process.env.CARD_JWE_PRIVATE_KEY_FILE || ensureDevJweKey(),
      LOG_LEVEL: process.env.LOG_LEVEL || 'warn',
      WEBHOOK_ALLOW_PRIVATE: 'true',
      WEBHOOK_RETRY_SCHEDULE: '1s,2s,5s,10s,20s,30s,60s',
      RETRY_TIME_SCALE: String(OPTS.scale),
      REFUND_BATCH_CRON: '*/5 * * * * *',
      SCHEDULER_TICK: '1s',
      JOB_LOCK_MS: '5000',
      HOST: '127.0.0.1',
    };
    const ds = createDataSource(pgs.url, 2);
    await ds.initialize();
    const repo = new MerchantsRepository(ds, loadConfig('cli', env).cardKeys);
    const merchants = [];
    for (let i = 0; i < OPTS.merchants; i++)
      merchants.push(await repo.create(`drill_${randomBytes(4).toString('hex')}`, receiver.url));
    const logins = merchants.map((m) => m.login);
    await ds.destroy();
    const apps = new Map(APPS.map((a) => [a, new App(a, env, dir)]));
    for (const a of apps.values()) cleanups.push(() => a.kill('SIGKILL'));
    await Promise.all([...apps.values()].map((a) => a.start()));
    const intake = apps.get('intake-api');
    const api = {
      get base() {
        return intake.base;
      },
      keys: merchants.map((m) => m.api_key),
    };
    say(`apps up; load: ${BATCH * 2} transactions/s in batches of ${BATCH}, RETRY_TIME_SCALE=${OPTS.scale}`);

    let loadOn = true;
    const loops = [submitLoop(api, () => loadOn), refundLoop(api, () => loadOn)];
    await sleep(OPTS.warmupMs);

    /** A drill: fault, then until the API accepts again, then the gap for the system to recover. */
    const results = [];
    const drill = async (name, fault, restore) => {
      phase = name;
      const t0 = Date.now();
      say(`${name}: start`);
      await fault();
      const restoreAt = Date.now();
      const restartMs = await restore();
      const back = Date.now();
      // First 2xx of a submission after the restore: when merchants are served again.
      let firstOk = null;
      while (Date.now() - back < 60_000) {
        firstOk = calls.find((c) => c.at >= restoreAt && c.method === 'POST' && c.status >= 200 && c.status < 300);
        if (firstOk) break;
        await sleep(100);
      }
      say(`${name}: restored; waiting ${OPTS.gapMs / 1000}s`);
      await sleep(OPTS.gapMs);
      results.push({ name, t0, restartMs, servedAfterMs: firstOk ? Math.max(0, firstOk.at - restoreAt) : null });
    };

    for (const d of OPTS.drills) {
      if (d === 'pg') {
        await drill(
          `postgres down ${OPTS.outageMs / 1000}s`,
          async () => {
            pgs.stop();
            await sleep(OPTS.outageMs);
          },
          async () => {
            pgs.start();
            return null;
          },
        );
      } else if (d === 'redis') {
        await drill(
          `redis down ${OPTS.outageMs / 1000}s`,
          async () => {
            await redis.stop();
            await sleep(OPTS.outageMs);
          },
          async () => {
            await redis.start();
            return null;
          },
        );
      } else if (d === 'kill') {
        for (const name of [
          'submission-validator',
          'retry-worker',
          'refund-batcher',
          'webhook-dispatcher',
          'intake-api',
        ]) {
          await drill(
            `SIGKILL ${name}`,
            () => apps.get(name).kill('SIGKILL'),
            () => apps.get(name).start(),
          );
        }
      } else {
        throw new Error(`unknown drill ${d} (pg, redis, kill)`);
      }
    }

    phase = 'after';
    loadOn = false;
    await Promise.all(loops);
    say(`load stopped: ${accepted.size} accepted; settling (at most ${OPTS.settleMs / 1000}s)`);
    const db = new pg.Pool({ connectionString: pgs.url, max: 2 });
    cleanups.push(() => db.end());
    const settleStart = Date.now();
    let snap = await snapshot(db, logins, receiver.pushes);
    while (!settled(snap) && Date.now() - settleStart < OPTS.settleMs) {
      await sleep(2000);
      snap = await snapshot(db, logins, receiver.pushes);
    }
    const settleSeconds = ((Date.now() - settleStart) / 1000).toFixed(0);
    // A short quiet time after settling, so a late duplicate push is still counted.
    await sleep(3000);
    snap = await snapshot(db, logins, receiver.pushes);
    const j = judge(snap);

    // ------------------------------------------------------------ report
    const sum = (k) => [...j.per.values()].reduce((a, f) => a + f[k], 0);
    const lost = sum('noRow') + sum('stuck') + sum('noPush');
    const doubleCharges = sum('doubleCharge');
    const h = http5xx(calls);
    const statusCounts = {};
    for (const r of snap.rows) statusCounts[r.status] = (statusCounts[r.status] ?? 0) + 1;
    const rawStderr = {};
    for (const a of APPS) {
      const text = readFileSync(path.join(dir, `${a}.log`), 'utf8');
      rawStderr[a] = text.split('\n').filter((l) => l.trim() && !l.startsWith('{')).length;
    }
    console.log(
      `\nbench/drills: ${OPTS.drills.join(', ')}; outage ${OPTS.outageMs / 1000}s, gap ${OPTS.gapMs / 1000}s, ` +
        `${BATCH * 2} tx/s, RETRY_TIME_SCALE=${OPTS.scale}; settled ${settled(snap) ? 'in' : 'NOT within'} ${settleSeconds}s`,
    );
    console.log(`accepted transactions  ${accepted.size}   (${JSON.stringify(statusCounts)})`);
    console.log(`refunds asked          ${refundsAsked.size}, stops asked ${stopsAsked.size}`);
    console.log(`still in progress      ${sum('inProgress')} (not final at the end, next attempt scheduled: not lost)`);
    console.log(
      `lost                   ${lost}   (accepted, no row ${sum('noRow')}; stuck without progress ${sum('stuck')}; ` +
        `final without its push ${sum('noPush')}; pushes not delivered ${j.undelivered}; ` +
        `approved charges with no attempt row ${snap.orphanCharges})`,
    );
    console.log(
      `duplicated             two captures ${sum('doubleCapture')}; double charges ${doubleCharges}; ` +
        `refunded above captured ${sum('overRefund')}; same message_id pushed twice ${j.dupDeliveries} (replays excluded); ` +
        `same event announced twice ${j.dupAnnouncements}`,
    );
    console.log(
      `5xx                    ${h.total5xx} of ${h.requests} calls: 500 ${h.c500}; 503 with Retry-After ${h.c503ra}; ` +
        `503 without ${h.c503}; other 5xx ${h.other5xx}; connection errors ${h.connErrors}`,
    );
    console.log(
      `pushes received        ${snap.pushes.length} (${new Set(snap.pushes.map((p) => p.messageId)).size} message ids)`,
    );
    console.log(`raw (non-JSON) log lines per app  ${JSON.stringify(rawStderr)}`);
    console.log('\nper drill (transactions by the phase they were accepted in; calls by the phase they were made in):');
    const phases = ['warmup', ...results.map((r) => r.name)];
    for (const ph of phases) {
      const f = j.per.get(ph) ?? { accepted: 0, noRow: 0, stuck: 0, noPush: 0, doubleCapture: 0, doubleCharge: 0 };
      // restarted: how long the killed app took to be ready again; served again: first 2xx submission
      // after the fault ended (the database or Redis back, or the app restarted).
      const c = http5xx(calls.filter((x) => x.phase === ph));
      const r = results.find((x) => x.name === ph);
      const timing = r
        ? `; restarted ${r.restartMs === null ? '-' : `${(r.restartMs / 1000).toFixed(1)}s`}, ` +
          `served again ${r.servedAfterMs === null ? 'never' : `${(r.servedAfterMs / 1000).toFixed(1)}s`} after`
        : '';
      console.log(
        `  ${ph.padEnd(30)} accepted ${String(f.accepted).padStart(4)}, lost ${f.noRow + f.stuck + f.noPush}, ` +
          `double charges ${f.doubleCharge}, two captures ${f.doubleCapture}; ` +
          `calls ${c.requests}: 5xx ${c.total5xx} (500 ${c.c500}, 503+RA ${c.c503ra}, 503 ${c.c503}), ` +
          `conn errors ${c.connErrors}${timing}`,
      );
    }
    if (j.examples.length) {
      console.log('\nexamples:');
      for (const e of j.examples.slice(0, 15)) console.log(`  ${e}`);
    }
    const ok = lost === 0 && doubleCharges === 0 && snap.orphanCharges === 0 && h.c500 === 0;
    console.log(`\n${ok ? 'PASS' : 'FAIL'}: goal 0 lost, 0 double charges, 0 500`);
    process.exitCode = ok ? 0 : 1;
  } finally {
    await cleanup();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(2);
});
