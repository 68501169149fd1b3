// Compiles apps/ and libs/ (TypeScript) to CommonJS under dist/ with swc: decorator metadata
// for Nest/TypeORM, and the @retain/* path aliases rewritten to relative requires.
// Type checking is a separate step (`npm run typecheck`), so builds stay fast.
import { transformFile } from '@swc/core';
import { mkdir, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { APPS } from './infra.mjs';

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

// No `rm` of the whole output first: apps may be starting from it while it is rebuilt (`npm start`
// beside running tests, a developer rebuilding under a running app). Each file is replaced
// atomically (written beside, then renamed), and files no source produces any more are removed last.
const written = new Set();
/** Writes a file so that a reader sees the old or the new content, never a missing or partial one. */
async function replaceFile(target, content) {
  const tmp = `${target}.${process.pid}.tmp`;
  await writeFile(tmp, content);
  await rename(tmp, target);
  written.add(target);
}
let count = 0;
const jobs = [];
for (const top of ['apps', 'libs']) {
  for await (const file of walk(path.join(root, top))) {
    jobs.push(
      (async () => {
        const res = await transformFile(file, swcOptions(file));
        const target = path.join(out, path.relative(root, file)).replace(/\.ts$/, '.js');
        await mkdir(path.dirname(target), { recursive: true });
        await replaceFile(target, res.code + `\n//# sourceMappingURL=${path.basename(target)}.map\n`);
        if (res.map) await replaceFile(target + '.map', res.map);
        count++;
      })(),
    );
  }
}
await Promise.all(jobs);
const portal = path.join(out, 'portal');
async function removeStale(dir) {
  for (const entry of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (p !== portal && !path.basename(p).startsWith('.portal-')) await removeStale(p);
    } else if ((p.endsWith('.js') || p.endsWith('.js.map') || p.endsWith('.tmp')) && !written.has(p)) {
      await rm(p, { force: true });
    }
  }
}
await removeStale(out);
// Each app's entry (and the CLI's) is then bundled in place with rolldown: dist/apps/<app>/src/main.js
// becomes one file holding the app and the packages it loads. Node otherwise resolves, reads and
// compiles ~1,400-1,800 files per start (Nest, TypeORM, BullMQ, rxjs, class-validator): a start cost
// 1.8 s of CPU unbundled against 1.1 s bundled (retry-worker), and the test run starts ~200 apps and
// runs the CLI ~100 times on two cores. Every path that runs an app (npm start, the images, the tests)
// runs the bundle. The processors' SDKs stay outside (loaded on first use, from node_modules), as do
// pg and native addons. The compiled files stay beside it, for tools that import a module of dist/.
const { rolldown } = await import('rolldown');
const { decode, encode } = await import('@jridgewell/sourcemap-codec');
const { default: remapping } = await import('@jridgewell/remapping');
/**
 * The bundle's source map cut down to our own code (apps/, libs/), without sources' contents: the
 * images run with --enable-source-maps, and Node parses a whole map when it loads the file. The full
 * map (every package's mappings and sources, ~17 MB) took a retry-worker's start from 1.2 s of CPU
 * and 162 MB to 2.7 s and 368 MB. Stack frames in packages then name the bundle's own lines.
 */
function ownSourceMap(text, dir) {
  const map = JSON.parse(text);
  // Our sources' new indexes (a package's: undefined); a segment naming a package's source is dropped.
  const sources = [];
  const newIndex = map.sources.map((source) =>
    source.includes('node_modules/') ? undefined : sources.push(source) - 1,
  );
  const mappings = decode(map.mappings).map((line) =>
    line
      .filter((seg) => seg.length === 1 || newIndex[seg[1]] !== undefined)
      .map((seg) => (seg.length === 1 ? seg : [seg[0], newIndex[seg[1]], ...seg.slice(2)])),
  );
  const own = { version: 3, file: map.file, names: map.names, sources, mappings: encode(mappings) };
  // Each compiled file's own map (swc's) carries the positions on to the TypeScript sources.
  return remapping(
    own,
    (source, ctx) => (ctx.importer === '' ? readFileSync(path.resolve(dir, `${source}.map`), 'utf8') : null),
    { excludeContent: true },
  ).toString();
}
const ENTRIES = [...APPS, 'cli'];
await Promise.all(
  ENTRIES.map(async (app) => {
    const entry = path.join(out, 'apps', app, 'src', 'main.js');
    const bundle = await rolldown({
      input: entry,
      platform: 'node',
      // Packages come from the project's node_modules, wherever `--out` puts the output.
      resolve: { modules: [path.join(root, 'node_modules'), 'node_modules'] },
      // pg stays outside too: TypeORM loads its driver with a require the bundler cannot see
      // (PlatformTools.load('pg')), and the one copy must be the one whose JSON parsers
      // libs/db/src/json-columns.ts replaces (a bundled copy beside it left TypeORM on V8's JSON.parse).
      external: [/^stripe(\/|$)/, /^@adyen\//, /^pg(-[a-z-]+)?(\/|$)/, /\.node$/],
      logLevel: 'silent',
    });
    const tmp = path.join(out, 'apps', app, 'src', `.bundle-${process.pid}`);
    await bundle.write({ dir: tmp, entryFileNames: 'main.js', format: 'cjs', codeSplitting: false, sourcemap: true });
    await bundle.close();
    await writeFile(
      path.join(tmp, 'main.js.map'),
      ownSourceMap(await readFile(path.join(tmp, 'main.js.map'), 'utf8'), tmp),
    );
    await rename(path.join(tmp, 'main.js'), entry);
    await rename(path.join(tmp, 'main.js.map'), `${entry}.map`);
    await rm(tmp, { recursive: true, force: true });
  }),
);
// The merchant portal (apps/portal): Preact + chart.js bundled by Vite, hashed asset names. Built
// beside and swapped in, for the same reason.
const { build: viteBuild } = await import('vite');
const nextPortal = path.join(out, `.portal-${process.pid}`);
await viteBuild({
  configFile: path.join(root, 'apps', 'portal', 'vite.config.mjs'),
  build: { outDir: nextPortal, emptyOutDir: true },
});
const oldPortal = path.join(out, `.portal-old-${process.pid}`);
await rename(portal, oldPortal).catch(() => {});
await rename(nextPortal, portal);
await rm(oldPortal, { recursive: true, force: true });
// Progress goes to stderr: stdout belongs to the programs built here (the CLI prints JSON).
process.stderr.write(
  `build: ${count} files compiled to dist/, ${ENTRIES.length} entries bundled, the portal bundled to dist/portal/\n`,
);
