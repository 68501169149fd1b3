import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * What a wire fake can be told to do to the next request(s):
 * - `timeout`: never answer (the request is not processed);
 * - `reset`: close the connection without an answer (not processed);
 * - `5xx` / `429` (with Retry-After) / `garbage` (200 with a body that is not JSON): not processed;
 * - `charge-then-timeout` / `charge-then-reset`: processed (the charge goes through, its idempotency
 *   result is stored) but the answer never arrives.
 */
export type WireFault = 'timeout' | 'reset' | '5xx' | '429' | 'garbage' | 'charge-then-timeout' | 'charge-then-reset';

export interface RecordedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  headers: http.IncomingHttpHeaders;
  rawBody: string;
  /** Parsed body: Stripe's nested form or Adyen's JSON. */
  body: Record<string, unknown>;
}

export interface FakeResponse {
  status: number;
  body: unknown;
  headers?: Record<string, string>;
}

/** The shared machinery of the processors' wire fakes: a local server, recording, injected faults. */
export abstract class WireFake {
  readonly requests: RecordedRequest[] = [];
  /** Seconds the injected 429 asks to wait. */
  retryAfterSeconds = 2;
  /**
   * Milliseconds every processed request waits before it is handled: a real processor's response
   * time (a card authorization takes hundreds of milliseconds), for benches whose throughput is
   * bound by it rather than by CPU (bench/attempts --latency). 0: answer at once.
   */
  latencyMs = 0;
  private readonly faults: { fault: WireFault; method?: string; path?: string | RegExp }[] = [];
  private server: http.Server | null = null;
  private readonly sockets = new Set<Socket>();
  private tlsDir: string | null = null;
  /** PEM of the self-signed certificate when the fake speaks HTTPS. */
  ca: string | null = null;

  constructor(private readonly tls: boolean) {}

  /** The next `count` requests (of `only` that method and path, when given) meet `fault`. */
  failNext(fault: WireFault, count = 1, only: { method?: string; path?: string | RegExp } = {}): void {
    for (let i = 0; i < count; i++) this.faults.push({ fault, ...only });
  }

  /** Faults not met yet are dropped: the next requests are answered normally. */
  clearFaults(): void {
    this.faults.length = 0;
  }

  /** Requests received on a path (a string prefix or a pattern). */
  received(method: string, pathMatch: string | RegExp): RecordedRequest[] {
    return this.requests.filter(
      (r) => r.method === method && (typeof pathMatch === 'string' ? r.path === pathMatch : pathMatch.test(r.path)),
    );
  }

  async start(): Promise<string> {
    const handler = (req: http.IncomingMessage, res: http.ServerResponse): void => void this.onRequest(req, res);
    if (this.tls) {
      this.tlsDir = mkdtempSync(path.join(tmpdir(), 'retain-fake-tls-'));
      const key = path.join(this.tlsDir, 'key.pem');
      const cert = path.join(this.tlsDir, 'cert.pem');
      execFileSync(
        'openssl',
        ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1']
          .concat(['-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost'])
          .concat(['-keyout', key, '-out', cert]),
        { stdio: 'ignore' },
      );
      this.ca = readFileSync(cert, 'utf8');
      this.server = https.createServer({ key: readFileSync(key), cert: this.ca }, handler);
    } else {
      this.server = http.createServer(handler);
    }
    this.server.on('connection', (s: Socket) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    const { port } = this.server.address() as AddressInfo;
    return `${this.tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    if (this.server) await new Promise<void>((resolve) => this.server!.close(() => resolve()));
    this.server = null;
    if (this.tlsDir) rmSync(this.tlsDir, { recursive: true, force: true });
  }

  /** The processor's answer to a recorded request (its documented wire behaviour). */
  protected abstract handle(req: RecordedRequest): FakeResponse | Promise<FakeResponse>;
  protected abstract parseBody(raw: string, contentType: string): Record<string, unknown>;
  /** The processor's error body for an injected 5xx / 429. */
  protected abstract errorBody(status: number): unknown;

  private async onRequest(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const rawBody = Buffer.concat(chunks).toString('utf8');
    const url = new URL(req.url ?? '/', 'http://fake');
    let body: Record<string, unknown> = {};
    try {
      body = rawBody ? this.parseBody(rawBody, String(req.headers['content-type'] ?? '')) : {};
    } catch {
      body = {};
    }
    const recorded: RecordedRequest = {
      method: req.method ?? 'GET',
      path: url.pathname,
      query: url.searchParams,
      headers: req.headers,
      rawBody,
      body,
    };
    this.requests.push(recorded);
    const at = this.faults.findIndex(
      (f) =>
        (f.method === undefined || f.method === recorded.method) &&
        (f.path === undefined || (typeof f.path === 'string' ? f.path === recorded.path : f.path.test(recorded.path))),
    );
    const fault = at < 0 ? undefined : this.faults.splice(at, 1)[0]!.fault;
    switch (fault) {
      case 'timeout':
        return; // never answered; closed with the server
      case 'reset':
        req.socket.destroy();
        return;
      case '5xx':
        return send(res, { status: 500, body: this.errorBody(500) });
      case '429':
        return send(res, {
          status: 429,
          body: this.errorBody(429),
          headers: { 'Retry-After': String(this.retryAfterSeconds) },
        });
      case 'garbage':
        res.writeHead(200, { 'Content-Type': 'text/html' });
        res.end('<html><body>502 Bad Gateway (upstream proxy)</body></html>');
        return;
      case 'charge-then-timeout':
      case 'charge-then-reset':
      case undefined:
        break; // processed below
    }
    if (this.latencyMs > 0) await new Promise((resolve) => setTimeout(resolve, this.latencyMs));
    const answer = await this.handle(recorded);
    if (fault === 'charge-then-timeout') return;
    if (fault === 'charge-then-reset') {
      req.socket.destroy();
      return;
    }
    send(res, answer);
  }
}

function send(res: http.ServerResponse, r: FakeResponse): void {
  const body = JSON.stringify(r.body);
  res.writeHead(r.status, { 'Content-Type': 'application/json', ...(r.headers ?? {}) });
  res.end(body);
}

/** Random id characters, as processors' ids have. */
export function randomId(n = 24): string {
  const chars = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  let s = '';
  for (let i = 0; i < n; i++) s += chars[Math.floor(Math.random() * chars.length)];
  return s;
}
