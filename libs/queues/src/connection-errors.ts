/** Something that emits 'error': an ioredis client, a BullMQ Queue, Worker or QueueEvents. */
export interface ErrorEmitter {
  on(event: 'error', listener: (err: Error) => void): unknown;
}

export type ConnectionErrorSink = (fields: Record<string, unknown>, msg: string) => void;

/** Default interval between two lines about the same connection. */
export const CONNECTION_ERROR_LOG_INTERVAL_MS = 10_000;

/**
 * Connection errors of Redis clients and BullMQ objects, logged one line per connection per
 * interval with the count of the ones held back. Without an 'error' listener ioredis and BullMQ
 * print each reconnect failure as a raw multi-line stack trace (hundreds in a short outage);
 * attaching this listener also stops an unhandled 'error' event from crashing the process.
 * Only the message and code are logged: never the stack or the connection options.
 */
export class ConnectionErrorLog {
  private readonly state = new Map<string, { lastAt: number; suppressed: number }>();

  constructor(
    private readonly sink: ConnectionErrorSink,
    private readonly intervalMs = CONNECTION_ERROR_LOG_INTERVAL_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /** Attaches the listener; returns the emitter for chaining. */
  watch<T extends ErrorEmitter>(connection: string, emitter: T): T {
    emitter.on('error', (err) => this.report(connection, err));
    return emitter;
  }

  report(connection: string, err: unknown): void {
    const now = this.now();
    const s = this.state.get(connection);
    if (s && now - s.lastAt < this.intervalMs) {
      s.suppressed += 1;
      return;
    }
    const e = err instanceof Error ? (err as Error & { code?: unknown }) : undefined;
    this.sink(
      {
        connection,
        err: e ? e.message : String(err),
        ...(e?.code !== undefined ? { code: e.code } : {}),
        suppressed: s?.suppressed ?? 0,
      },
      'redis connection error',
    );
    this.state.set(connection, { lastAt: now, suppressed: 0 });
  }
}
