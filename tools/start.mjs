// `npm start`: the whole service on one machine. Builds, makes sure Postgres and Redis answer
// (embedded/child fallbacks, see infra.mjs), applies migrations once, then runs all five apps
// with prefixed output until Ctrl-C / SIGTERM, which it forwards so each app shuts down cleanly.
import { spawn } from 'node:child_process';
import {
  APPS,
  appEntry,
  ensureBuilt,
  ensureDevJweKey,
  ensurePostgres,
  ensureRedis,
  runMigrations,
  say,
} from './infra.mjs';

ensureBuilt({ force: true });
const pg = await ensurePostgres(process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/retain');
const redis = await ensureRedis(process.env.REDIS_URL || 'redis://127.0.0.1:6379');
const env = { ...process.env, DATABASE_URL: pg.databaseUrl, REDIS_URL: redis.redisUrl };
if (!env.CARD_JWE_PRIVATE_KEY && !env.CARD_JWE_PRIVATE_KEY_FILE && !env.CARD_JWE_PRIVATE_KEYS) {
  env.CARD_JWE_PRIVATE_KEY_FILE = ensureDevJweKey();
}
runMigrations(env);

const children = APPS.map((app) => {
  const child = spawn(process.execPath, ['--enable-source-maps', appEntry(app)], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const prefix = (stream, out) => {
    let buf = '';
    stream.on('data', (chunk) => {
      buf += chunk;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        out.write(`${app.padEnd(20)} | ${buf.slice(0, i)}\n`);
        buf = buf.slice(i + 1);
      }
    });
  };
  prefix(child.stdout, process.stdout);
  prefix(child.stderr, process.stderr);
  child.on('exit', (code, signal) => {
    say(`${app} exited (${signal ?? code})`);
    if (!stopping) void shutdown(code === 0 ? 1 : (code ?? 1));
  });
  return child;
});
say(`all apps starting; API on http://127.0.0.1:${env.PORT || 3000}/v1/retain (Ctrl-C stops)`);

let stopping = false;
async function shutdown(exitCode = 0) {
  if (stopping) return;
  stopping = true;
  say('stopping apps...');
  await Promise.all(
    children.map(
      (c) =>
        new Promise((resolve) => {
          if (c.exitCode !== null || c.signalCode !== null) return resolve();
          c.once('exit', resolve);
          c.kill('SIGTERM');
          setTimeout(() => c.kill('SIGKILL'), 30_000).unref();
        }),
    ),
  );
  await redis.stop();
  await pg.stop();
  process.exit(exitCode);
}
process.on('SIGINT', () => void shutdown(0));
process.on('SIGTERM', () => void shutdown(0));
