import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedPush {
  headers: http.IncomingHttpHeaders;
  raw: string;
  body: { header: Record<string, unknown>; content: Record<string, unknown> };
  at: number;
  /** The HTTP status this receiver answered (2xx: the push was accepted). */
  answered: number;
}

/** A local merchant webhook endpoint that records every push; its answer can be changed. */
export class WebhookReceiver {
  readonly received: ReceivedPush[] = [];
  status = 202;
  /** Answers the n-th request (0-based) this many milliseconds after it arrived (a slow merchant endpoint). */
  delayMs: number | ((n: number) => number) = 0;
  private server: http.Server | undefined;
  port = 0;

  async start(port = 0): Promise<this> {
    this.server = http.createServer((req, res) => {
      let raw = '';
      req.on('data', (c: Buffer) => (raw += c.toString()));
      req.on('end', () => {
        const answered = this.status;
        try {
          this.received.push({ headers: req.headers, raw, body: JSON.parse(raw), at: Date.now(), answered });
        } catch {
          this.received.push({
            headers: req.headers,
            raw,
            body: { header: {}, content: {} },
            at: Date.now(),
            answered,
          });
        }
        res.statusCode = answered;
        const delay = typeof this.delayMs === 'number' ? this.delayMs : this.delayMs(this.received.length - 1);
        if (delay > 0) setTimeout(() => res.end(), delay);
        else res.end();
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(port, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/hooks`;
  }

  byEvent(eventName: string): ReceivedPush[] {
    return this.received.filter((p) => p.body.header['event_name'] === eventName);
  }

  async stop(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
    this.server = undefined;
  }
}
