// `npm start`: the whole service on one machine. Builds, makes sure Postgres and Redis answer
// (embedded/child fallbacks, see infra.mjs), applies migrations once, then runs all five apps
// with prefixed output until Ctrl-C / SIGTERM, which it forwards so each app shuts down cleanly.
// The API listens on PORT (3000) and the four workers serve health and metrics on the next four.
// Ctrl-C reaches the apps twice (the terminal signals the whole process group, and this script
// forwards one): the apps ignore the repeat and finish their in-flight jobs. Exits 0 when every
// app did; a third Ctrl-C kills the apps that are still finishing.
import { spawn } from 'node:child_process';
import {
  APPS,
  DEFAULT_DATABASE_URL,
  appEntry,
  ensureBuilt,
  ensureDevJweKey,
  ensurePostgres,
  ensureRedis,
  runMigrations,
  say,
} from './infra.mjs';

ensureBuilt({ force: true });
const pg = await ensurePostgres(process.env.DATABASE_URL || DEFAULT_DATABASE_URL);
const redis = await ensureRedis(process.env.REDIS_URL || 'redis://127.0.0.1:6379');
const env = { ...process.env, DATABASE_URL: pg.databaseUrl, REDIS_URL: redis.redisUrl };
if (!env.CARD_JWE_PRIVATE_KEY && !env.CARD_JWE_PRIVATE_KEY_FILE && !env.CARD_JWE_PRIVATE_KEYS) {
  env.CARD_JWE_PRIVATE_KEY_FILE = ensureDevJweKey();
}
runMigrations(env);

const basePort = Number(env.PORT || 3000);
const children = APPS.map((app, i) => {
  const ports = app === 'intake-api' ? { PORT: String(basePort) } : { HEALTH_PORT: String(basePort + i) };
  const child = spawn(process.execPath, ['--enable-source-maps', appEntry(app)], {
    env: { ...env, ...ports },
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
    // An app exits 0 only after a signal: under Ctrl-C its exit may be seen before this script's
    // own SIGINT, so it is a stop, not a failure. Any other exit stops the rest with its code.
    if (!stopping) void shutdown(code ?? 1);
  });
  return child;
});
say(`all apps starting; API on http://127.0.0.1:${basePort}/v1/retain (Ctrl-C stops)`);

/** Above the apps' own shutdown limit (60 s, libs/platform bootstrap.ts), so they report first. */
const KILL_AFTER_MS = 65_000;
let stopping = false;
let signals = 0;
async function shutdown(exitCode = 0) {
  if (stopping) return;
  stopping = true;
  say('stopping apps (each finishes its in-flight work)...');
  const codes = await Promise.all(
    children.map(
      (c) =>
        new Promise((resolve) => {
          if (c.exitCode !== null || c.signalCode !== null) return resolve(c.exitCode ?? 1);
          c.once('exit', (code) => resolve(code ?? 1));
          c.kill('SIGTERM');
          setTimeout(() => c.kill('SIGKILL'), KILL_AFTER_MS).unref();
        }),
    ),
  );
  await redis.stop();
  await pg.stop();
  process.exit(exitCode !== 0 ? exitCode : codes.every((code) => code === 0) ? 0 : 1);
}
function onSignal(signal) {
  signals += 1;
  if (signals === 1) return void shutdown(0);
  if (signals === 2) return say(`${signal}: still stopping; apps finish their in-flight work (once more kills them)`);
  say(`${signal}: killing the apps still running`);
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
}
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);
