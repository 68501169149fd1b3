import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort, waitFor } from '@retain/testing';

const root = path.resolve(__dirname, '..', '..');
const APPS = ['intake-api', 'submission-validator', 'retry-worker', 'refund-batcher', 'webhook-dispatcher'];

const portFree = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });

/** PORT for `npm start`: it and the next four are free (the workers' health ports). */
async function fivePorts(): Promise<number> {
  for (;;) {
    const base = await freePort();
    if (base > 65_530) continue;
    const rest = await Promise.all([1, 2, 3, 4].map((i) => portFree(base + i)));
    if (rest.every(Boolean)) return base;
  }
}

// `npm start` (tools/start.mjs) under Ctrl-C: the terminal sends SIGINT to the whole process group
// (the supervisor and all five apps), and the supervisor forwards one more to each app.
describe('npm start', () => {
  it('Ctrl-C (SIGINT to the process group) stops all five apps cleanly: each exits 0, and so does npm start', async () => {
    const base = await fivePorts();
    const child = spawn(process.execPath, [path.join(root, 'tools', 'start.mjs')], {
      cwd: root,
      env: { ...process.env, PORT: String(base), HOST: '127.0.0.1', LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group, like a terminal's foreground job.
      detached: true,
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await waitFor(
        async () => {
          const answers = await Promise.all(
            APPS.map((_, i) => fetch(`http://127.0.0.1:${base + i}/readyz`).then((r) => r.ok)),
          );
          return answers.every(Boolean);
        },
        { timeoutMs: 60_000, what: `all five apps ready:\n${out}` },
      );
      process.kill(-child.pid!, 'SIGINT');
      const code = await exited;
      for (const app of APPS) expect(out, out).toContain(`${app} exited (0)`);
      expect(code).toBe(0);
    } finally {
      if (child.exitCode === null) process.kill(-child.pid!, 'SIGKILL');
    }
  });
});
