import type { ArgumentsHost } from '@nestjs/common';
import type { HttpAdapterHost } from '@nestjs/core';
import { createDataSource } from '@retain/db';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DataSource } from 'typeorm';
import { ApiExceptionFilter } from './api-exception.filter';

/** What the filter sends: status, headers and body, as the client sees them. */
function respond(exception: unknown): { status: number; headers: Record<string, string>; body: any } {
  const sent = { status: 0, headers: {} as Record<string, string>, body: undefined as any };
  const reply = {
    header(name: string, value: string) {
      sent.headers[name.toLowerCase()] = value;
      return reply;
    },
    status(code: number) {
      sent.status = code;
      return reply;
    },
    send(body: unknown) {
      sent.body = body;
      return reply;
    },
  };
  const req = { url: '/retain/refunds', method: 'POST' };
  const host = {
    switchToHttp: () => ({ getResponse: () => reply, getRequest: () => req }),
  } as unknown as ArgumentsHost;
  new ApiExceptionFilter({} as HttpAdapterHost).catch(exception, host);
  return sent;
}

// Issue 9 item 6 and decisions §16: a deadlock or serialization failure that survived the service's
// retries is a temporary condition: 503 RET900 with Retry-After, never 500.
describe('a transaction Postgres aborted (40P01, 40001)', () => {
  let ds: DataSource;
  beforeAll(async () => {
    ds = createDataSource(process.env['DATABASE_URL']!, 1);
    await ds.initialize();
  });
  afterAll(async () => {
    await ds.destroy();
  });

  /** The error exactly as TypeORM throws it when Postgres aborts with that SQLSTATE. */
  const pgError = (sqlstate: string): Promise<unknown> =>
    ds.query(`DO $$ BEGIN RAISE EXCEPTION 'aborted' USING ERRCODE = '${sqlstate}'; END $$`).catch((e: unknown) => e);

  it.each(['40P01', '40001'])('%s answers 503 RET900 with Retry-After', async (sqlstate) => {
    const r = respond(await pgError(sqlstate));
    expect(r.status).toBe(503);
    expect(r.body).toEqual({ code: 'RET900', message: 'Unable to submit, please try again' });
    expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('other database errors stay 500', async () => {
    const r = respond(await pgError('23505'));
    expect(r.status).toBe(500);
    expect(r.headers['retry-after']).toBeUndefined();
  });
});
