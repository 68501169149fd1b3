// Runs one TypeScript entry without a build: `node bench/run-ts.mjs <entry.ts> [args]` (see ts-hook.mjs).
import { createRequire } from 'node:module';
import path from 'node:path';
import './ts-hook.mjs';

const require = createRequire(import.meta.url);
const entry = process.argv[2];
if (!entry) {
  console.error('usage: node bench/run-ts.mjs <entry.ts> [args]');
  process.exit(2);
}
process.argv.splice(1, 1); // the entry sees itself as argv[1], like `node entry.js`
require(path.resolve(entry));
