import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';

const root = path.resolve(__dirname, '..', '..', '..');

export type AppName = 'intake-api' | 'submission-validator' | 'retry-worker' | 'refund-batcher' | 'webhook-dispatcher';

/** True when nothing listens on the port now. */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

const PORTS_PER_WORKER = 2000;
let nextPort = (process.pid * 7) % PORTS_PER_WORKER;

/**
 * A port for an app this test starts. Test files run in parallel workers, and an app binds its port
 * a moment after it was chosen: two workers drawing from the OS's ephemeral ports could both get
 * one, and a test would then talk to the other worker's app. Each worker draws from its own range
 * below the ephemeral range (20000 + 2000 x VITEST_POOL_ID), in turn, skipping ports in use.
 */
export async function freePort(): Promise<number> {
  const base = 20_000 + (Number(process.env['VITEST_POOL_ID'] ?? 0) % 6) * PORTS_PER_WORKER;
  for (let i = 0; i < PORTS_PER_WORKER; i++) {
    const port = base + (nextPort++ % PORTS_PER_WORKER);
    if (await canListen(port)) return port;
  }
  throw new Error("no free port in this test worker's range");
}

export async function waitFor<T>(
  fn: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  { timeoutMs = 30_000, intervalMs = 100, what = 'condition' } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastErr: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      lastErr = e;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`timed out waiting for ${what}${lastErr ? `: ${(lastErr as Error).message}` : ''}`);
}

/** A real app process (the build output), as `npm start` runs it. */
export class RunningApp {
  private output = '';
  readonly exited: Promise<number | null>;

  constructor(
    readonly app: AppName,
    readonly child: ChildProcess,
    readonly port: number,
  ) {
    child.stdout?.on('data', (c: Buffer) => (this.output += c.toString()));
    child.stderr?.on('data', (c: Buffer) => (this.output += c.toString()));
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Everything the process wrote (JSON log lines). */
  logs(): string {
    return this.output;
  }

  /** Graceful stop: SIGTERM, then wait for the exit. */
  async stop(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 40_000): Promise<number | null> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return this.child.exitCode;
    this.child.kill(signal);
    const timer = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    const code = await this.exited;
    clearTimeout(timer);
    return code;
  }

  /** Abrupt death (a crashed pod). */
  async kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    this.child.kill('SIGKILL');
    await this.exited;
  }
}

export interface StartOptions {
  env?: Record<string, string>;
  /** Wait for /readyz, not only /healthz. */
  ready?: boolean;
}

/** Every app process this test file started and that has not exited yet. */
const running = new Set<RunningApp>();

/**
 * Kills what a test file left running (a test that failed before its own stop calls): registered
 * after every test file by vitest.setup.ts, so one failure cannot leak processes into the next.
 */
export async function killLeftoverApps(): Promise<void> {
  await Promise.all([...running].map((app) => app.kill()));
}

/** Starts an app from dist/ with the test run's database and Redis prefix. */
export async function startApp(app: AppName, opts: StartOptions = {}): Promise<RunningApp> {
  const port = await freePort();
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>),
    LOG_LEVEL: 'info',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    SCHEDULER_TICK: '250ms',
    HOST: '127.0.0.1',
    ...(app === 'intake-api' ? { PORT: String(port) } : { HEALTH_PORT: String(port) }),
    ...opts.env,
  };
  const child = spawn(
    process.execPath,
    // No --enable-source-maps: it cost ~0.45 s of CPU per start (of ~2.3 s), and a test run starts
    // hundreds of apps on two cores; app logs then name dist/ lines.
    [path.join(root, 'dist', 'apps', app, 'src', 'main.js')],
    {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const proc = new RunningApp(app, child, port);
  running.add(proc);
  void proc.exited.then(() => running.delete(proc));
  const started = await Promise.race([
    waitFor(
      async () => {
        const res = await fetch(`${proc.url}/${opts.ready === false ? 'healthz' : 'readyz'}`);
        return res.ok;
      },
      // Generous: two test files start their apps at once on a loaded two-core machine.
      { timeoutMs: 60_000, intervalMs: 100, what: `${app} to start` },
    ).then(
      () => true,
      (err: Error) => {
        throw new Error(`${err.message}\n${proc.logs().slice(-4000)}`);
      },
    ),
    proc.exited.then(() => false),
  ]);
  if (!started) throw new Error(`${app} exited at start:\n${proc.logs()}`);
  return proc;
}
