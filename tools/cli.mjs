// `npm run retain -- <command>`: the operator CLI (built on demand).
// Without DATABASE_URL it uses the database `npm start` uses: the default when it answers, else the
// embedded PostgreSQL `npm start` fell back to, when it is running (the CLI never starts one).
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { DEFAULT_DATABASE_URL, cliDatabaseUrl, ensureBuilt, redactUrl, root, say } from './infra.mjs';

ensureBuilt();
const env = { ...process.env };
if (!env.DATABASE_URL) {
  const db = await cliDatabaseUrl(DEFAULT_DATABASE_URL);
  if (db.embedded) {
    say(
      `no PostgreSQL answers at ${redactUrl(DEFAULT_DATABASE_URL)}: using the embedded PostgreSQL of npm start at ${redactUrl(db.databaseUrl)}`,
    );
    env.DATABASE_URL = db.databaseUrl;
  }
}
const r = spawnSync(
  process.execPath,
  [path.join(root, 'dist', 'apps', 'cli', 'src', 'main.js'), ...process.argv.slice(2)],
  {
    stdio: 'inherit',
    env,
  },
);
process.exit(r.status ?? 1);
