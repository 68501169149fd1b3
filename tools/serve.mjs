// `npx nx serve <app>` / `node tools/serve.mjs <app>`: one app alone, against the Postgres and
// Redis named by DATABASE_URL and REDIS_URL (run `npm run db:migrate` once first).
import { spawn } from 'node:child_process';
import { APPS, appEntry, ensureBuilt } from './infra.mjs';

const app = process.argv[2];
if (!APPS.includes(app)) {
  process.stderr.write(`usage: node tools/serve.mjs <${APPS.join('|')}>\n`);
  process.exit(2);
}
ensureBuilt();
const child = spawn(process.execPath, ['--enable-source-maps', appEntry(app)], { stdio: 'inherit' });
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
child.on('exit', (code) => process.exit(code ?? 0));
