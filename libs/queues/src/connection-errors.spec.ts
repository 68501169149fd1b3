import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { ConnectionErrorLog } from './connection-errors';

describe('connection error log', () => {
  it('writes one line per connection per interval, with the count of the errors held back', () => {
    let now = 0;
    const lines: Record<string, unknown>[] = [];
    const log = new ConnectionErrorLog(
      (fields) => lines.push(fields),
      10_000,
      () => now,
    );
    const worker = log.watch('worker a', new EventEmitter());
    const redis = log.watch('redis', new EventEmitter());
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' });
    for (let i = 0; i < 50; i++) {
      now += 100;
      worker.emit('error', refused);
      redis.emit('error', refused);
    }
    expect(lines).toEqual([
      { connection: 'worker a', err: refused.message, code: 'ECONNREFUSED', suppressed: 0 },
      { connection: 'redis', err: refused.message, code: 'ECONNREFUSED', suppressed: 0 },
    ]);
    now += 10_000;
    worker.emit('error', new Error('Connection is closed.'));
    expect(lines[2]).toEqual({ connection: 'worker a', err: 'Connection is closed.', suppressed: 49 });
  });
});
