import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
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
