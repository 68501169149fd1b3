// Lets CommonJS `require` load TypeScript without a build: for bench/run-ts.mjs, and for benches that need
// test support that is never built into dist/ (libs/processor/test's wire fakes). Each .ts file is
// compiled with swc when first required (CommonJS, decorator metadata, the @retain/* aliases rewritten
// to relative paths), the same options as tools/build.mjs.
import { transformSync } from '@swc/core';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const tsconfig = JSON.parse(readFileSync(path.join(root, 'tsconfig.base.json'), 'utf8'));
const require = createRequire(import.meta.url);

const swcOptions = (filename) => ({
  filename,
  sourceMaps: 'inline',
  module: { type: 'commonjs' },
  jsc: {
    target: 'es2022',
    parser: { syntax: 'typescript', decorators: true },
    transform: { legacyDecorator: true, decoratorMetadata: true, useDefineForClassFields: false },
    keepClassNames: true,
    baseUrl: root,
    paths: tsconfig.compilerOptions.paths,
  },
});

// require.extensions is deprecated but is still the one synchronous hook for CommonJS loading.
require.extensions['.ts'] = (module, filename) => {
  const { code } = transformSync(readFileSync(filename, 'utf8'), swcOptions(filename));
  module._compile(code, filename);
};
