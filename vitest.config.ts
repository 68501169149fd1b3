import swc from 'unplugin-swc';
import path from 'node:path';
import { defineConfig } from 'vitest/config';

// Vitest + swc: swc emits the decorator metadata that Nest and TypeORM need (esbuild does not).
const alias = Object.fromEntries(
  ['domain', 'config', 'db', 'api-contract', 'queues', 'processor', 'recovery', 'platform', 'testing'].map((n) => [
    `@retain/${n}`,
    path.resolve(__dirname, `libs/${n}/src/index.ts`),
  ]),
);

export default defineConfig({
  plugins: [
    swc.vite({
      jsc: {
        target: 'es2022',
        parser: { syntax: 'typescript', decorators: true },
        transform: { legacyDecorator: true, decoratorMetadata: true, useDefineForClassFields: false },
        keepClassNames: true,
      },
    }),
  ],
  resolve: { alias },
  test: {
    include: ['apps/**/*.spec.ts', 'libs/**/*.spec.ts', 'test/**/*.spec.ts'],
    globalSetup: ['libs/testing/src/global-setup.ts'],
    setupFiles: ['libs/testing/src/vitest.setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Files run RETAIN_TEST_WORKERS at a time (default 2), each worker on its own database copy and
    // queue prefix (libs/testing/src/global-setup.ts); most of a file's time is spent waiting on apps.
    fileParallelism: true,
    maxWorkers: Number(process.env['RETAIN_TEST_WORKERS'] ?? 2),
    pool: 'forks',
    // Each worker process runs its files one after another with one module registry: a file does not
    // pay a new process and the import of Nest, TypeORM and BullMQ again (about 1.3 s each, 156 files).
    // Test files share no state but the per-file setup (vitest.setup.ts runs for each file).
    isolate: false,
  },
});
