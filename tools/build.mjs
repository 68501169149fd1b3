// Compiles apps/ and libs/ (TypeScript) to CommonJS under dist/ with swc: decorator metadata
// for Nest/TypeORM, and the @retain/* path aliases rewritten to relative requires.
// Type checking is a separate step (`npm run typecheck`), so builds stay fast.
import { transformFile } from '@swc/core';
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// `--out <dir>` builds elsewhere than dist/ (used by the build's own test).
const outArg = process.argv.indexOf('--out');
const out = outArg > 0 && process.argv[outArg + 1] ? path.resolve(process.argv[outArg + 1]) : path.join(root, 'dist');
const tsconfig = JSON.parse(
  await (await import('node:fs/promises')).readFile(path.join(root, 'tsconfig.base.json'), 'utf8'),
);

async function* walk(dir) {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name === 'node_modules' || entry.name === 'test') continue;
      yield* walk(p);
    } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts') && !entry.name.endsWith('.d.ts')) {
      yield p;
    }
  }
}

const swcOptions = (filename) => ({
  filename,
  sourceMaps: true,
  module: { type: 'commonjs' },
  jsc: {
    target: 'es2022',
    parser: { syntax: 'typescript', decorators: true },
    transform: { legacyDecorator: true, decoratorMetadata: true, useDefineForClassFields: false },
    keepClassNames: true,
    baseUrl: root, // swc needs an absolute base for the aliases
    paths: tsconfig.compilerOptions.paths,
  },
});

await rm(out, { recursive: true, force: true });
let count = 0;
const jobs = [];
for (const top of ['apps', 'libs']) {
  for await (const file of walk(path.join(root, top))) {
    jobs.push(
      (async () => {
        const res = await transformFile(file, swcOptions(file));
        const target = path.join(out, path.relative(root, file)).replace(/\.ts$/, '.js');
        await mkdir(path.dirname(target), { recursive: true });
        await writeFile(target, res.code + `\n//# sourceMappingURL=${path.basename(target)}.map\n`);
        if (res.map) await writeFile(target + '.map', res.map);
        count++;
      })(),
    );
  }
}
await Promise.all(jobs);
// The merchant portal (apps/portal): Preact + chart.js bundled by Vite, hashed asset names.
const { build: viteBuild } = await import('vite');
await viteBuild({
  configFile: path.join(root, 'apps', 'portal', 'vite.config.mjs'),
  build: { outDir: path.join(out, 'portal') },
});
// Progress goes to stderr: stdout belongs to the programs built here (the CLI prints JSON).
process.stderr.write(`build: ${count} files compiled to dist/, the portal bundled to dist/portal/\n`);
