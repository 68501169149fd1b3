// The merchant portal (issue 13): Preact + chart.js, built by Vite into dist/portal with hashed
// asset names; intake-api serves it at /portal/ (index.html no-cache, assets immutable).
import preact from '@preact/preset-vite';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const here = path.dirname(fileURLToPath(import.meta.url));

export default defineConfig({
  root: here,
  base: '/portal/',
  plugins: [preact()],
  logLevel: 'warn',
  build: {
    outDir: path.resolve(here, '../../dist/portal'),
    emptyOutDir: true,
    assetsDir: 'assets',
    sourcemap: false,
    // No inline script or style: the CSP allows only the service's own files.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
  },
});
