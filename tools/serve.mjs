// `npx nx serve <app>` / `node tools/serve.mjs <app>`: one app alone, against the Postgres and
// Redis named by DATABASE_URL and REDIS_URL (run `npm run db:migrate` once first). Like `npm start`,
// it uses the development JWE key under .data/ when no card JWE key is configured, so
// GET /v1/retain/keys answers and JWE card numbers can be decrypted in a single-app run.
import { spawn } from 'node:child_process';
import { APPS, appEntry, ensureBuilt, ensureDevJweKey } from './infra.mjs';

const app = process.argv[2];
if (!APPS.includes(app)) {
  process.stderr.write(`usage: node tools/serve.mjs <${APPS.join('|')}>\n`);
  process.exit(2);
}
ensureBuilt();
const env = { ...process.env };
const jweConfigured = ['CARD_JWE_PRIVATE_KEY', 'CARD_JWE_PRIVATE_KEY_FILE', 'CARD_JWE_PRIVATE_KEYS'].some(
  (name) => env[name],
);
if (!jweConfigured && env.NODE_ENV !== 'production') env.CARD_JWE_PRIVATE_KEY_FILE = ensureDevJweKey();
const child = spawn(process.execPath, ['--enable-source-maps', appEntry(app)], { stdio: 'inherit', env });
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig));
child.on('exit', (code) => process.exit(code ?? 0));
