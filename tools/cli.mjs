// `npm run retain -- <command>`: the operator CLI (built on demand).
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { ensureBuilt, root } from './infra.mjs';

ensureBuilt();
const r = spawnSync(
  process.execPath,
  [path.join(root, 'dist', 'apps', 'cli', 'src', 'main.js'), ...process.argv.slice(2)],
  {
    stdio: 'inherit',
  },
);
process.exit(r.status ?? 1);
