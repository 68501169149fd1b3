import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, waitFor } from '@retain/testing';

const root = path.resolve(__dirname, '..', '..');

// The developer scripts: `npm run build` keeps stdout clean (the CLI prints JSON there), and
// `npx nx serve <app>` runs one app with the development JWE key like `npm start`.
describe('developer tools', () => {
  const scratch = mkdtempSync(path.join(tmpdir(), 'retain-build-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('build writes its progress to stderr, nothing to stdout', () => {
    const r = spawnSync(process.execPath, [path.join(root, 'tools', 'build.mjs'), '--out', scratch], {
      cwd: root,
      encoding: 'utf8',
    });
    expect(r.status).toBe(0);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/build: \d+ files compiled/);
    // Each app's entry is one bundled file, whose source map names our own TypeScript only: the images
    // run with --enable-source-maps, which parses the whole map at start (17 MB with every package's).
    for (const app of ['intake-api', 'retry-worker', 'cli']) {
      const entry = path.join(scratch, 'apps', app, 'src', 'main.js');
      // TypeORM inside the file, pg left to node_modules (TypeORM requires it where no bundler sees).
      const code = readFileSync(entry, 'utf8');
      expect(code).not.toMatch(/require\(["']typeorm["']\)/);
      expect(code).toMatch(/require\(["']pg["']\)/);
      const map = JSON.parse(readFileSync(`${entry}.map`, 'utf8')) as { sources: string[]; sourcesContent?: unknown };
      expect(map.sources.length).toBeGreaterThan(50);
      expect(map.sources.filter((s) => !/\/(apps|libs)\/[^/]+\/src\/.+\.ts$/.test(s))).toEqual([]);
      expect(map.sourcesContent).toBeUndefined();
    }
  });

  it('serve runs one app with the development JWE key, so GET /v1/retain/keys answers', async () => {
    const port = await freePort();
    const env: Record<string, string> = { ...(process.env as Record<string, string>), PORT: String(port) };
    env['HOST'] = '127.0.0.1';
    delete env['CARD_JWE_PRIVATE_KEY'];
    delete env['CARD_JWE_PRIVATE_KEY_FILE'];
    delete env['CARD_JWE_PRIVATE_KEYS'];
    const child = spawn(process.execPath, [path.join(root, 'tools', 'serve.mjs'), 'intake-api'], {
      cwd: root,
      env,
      stdio: 'ignore',
    });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      const res = await waitFor(
        async () => {
          const r = await fetch(`http://127.0.0.1:${port}/v1/retain/keys`);
          return r.status === 404 ? null : r;
        },
        { what: 'serve to answer' },
      );
      expect(res.status).toBe(200);
      const body = (await res.json()) as { keys: { kty: string; kid: string; use: string }[] };
      expect(body.keys.length).toBeGreaterThanOrEqual(1);
      expect(body.keys[0]).toMatchObject({ kty: 'RSA', use: 'enc', alg: 'RSA-OAEP-256' });
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
  });
});
