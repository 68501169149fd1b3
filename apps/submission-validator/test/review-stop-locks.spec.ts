import { Test } from '@nestjs/testing';
import { loadConfig } from '@retain/config';
import { createDataSource } from '@retain/db';
import { DbRepositoryProviders, PaymentProcessorProvider, RETAIN_CONFIG } from '@retain/platform';
import { OutboxRelay, QueueRegistry, createRedis } from '@retain/queues';
import { ApiClient, closeTestDb, createMerchant, startApp, testDb, txn, type RunningApp } from '@retain/testing';
import type { LoggerService } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReviewService } from '../src/review/review.service';

/** Keeps what the review logs, to see that no transaction of it met a deadlock. */
class CapturingLogger implements LoggerService {
  readonly lines: string[] = [];
  private add(level: string, message: unknown, rest: unknown[]): void {
    this.lines.push(`${level} ${JSON.stringify([message, ...rest])}`);
  }
  log(message: unknown, ...rest: unknown[]): void {
    this.add('log', message, rest);
  }
  error(message: unknown, ...rest: unknown[]): void {
    this.add('error', message, rest);
  }
  warn(message: unknown, ...rest: unknown[]): void {
    this.add('warn', message, rest);
  }
}

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

// Issue 9 item 6: the review (submission row, then its transactions) and a stop request (its
// transactions, then the submission through a foreign-key check) used to lock in opposite orders.
// Here reviews (this app's service, on the real Postgres) and stops (the real intake API) run
// together on the same submissions at jittered instants; no stop may answer 500 and no review or
// stop may meet a deadlock.
describe('reviews and stop requests at the same time', () => {
  let api: RunningApp;
  let ds: DataSource;
  const redis = createRedis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
  const logger = new CapturingLogger();
  let review: ReviewService;

  beforeAll(async () => {
    // No validator process: the reviews below are the only ones.
    api = await startApp('intake-api');
    const config = loadConfig('submission-validator');
    // A connection for every review at once: none waits for the pool (a slow machine timed them out).
    ds = createDataSource(config.databaseUrl, 40);
    await ds.initialize();
    const moduleRef = await Test.createTestingModule({
      providers: [
        ReviewService,
        PaymentProcessorProvider,
        ...DbRepositoryProviders,
        { provide: DataSource, useValue: ds },
        { provide: RETAIN_CONFIG, useValue: config },
        { provide: OutboxRelay, useValue: new OutboxRelay(ds, new QueueRegistry(redis, config.queuePrefix)) },
      ],
    })
      .setLogger(logger)
      .compile();
    review = moduleRef.get(ReviewService);
  });
  afterAll(async () => {
    await api.stop();
    await ds.destroy();
    redis.disconnect();
    await closeTestDb();
  });

  it('no 500, no deadlock: every transaction ends Stopped and every submission reviewed', async () => {
    const client = new ApiClient(api.url, (await createMerchant()).api_key);
    const db = await testDb();
    const submissions: { id: string; txnIds: string[] }[] = [];
    for (let i = 0; i < 30; i++) {
      const batch = Array.from({ length: 4 }, () => txn());
      const r = await client.submit(batch);
      expect(r.status).toBe(200);
      const [row] = await db.query(`SELECT id FROM submissions WHERE request_id = $1`, [r.headers.get('x-request-id')]);
      submissions.push({ id: row.id, txnIds: batch.map((t) => t['id'] as string) });
    }

    const statuses: number[] = [];
    const reviewErrors: string[] = [];
    await Promise.all(
      submissions.flatMap((s) => [
        pause(Math.random() * 40).then(async () => {
          // Stops name the ids in another order than the review reads them.
          const body = { refunds: [...s.txnIds].reverse().map((id) => ({ id })) };
          let r = await client.request('POST', '/v1/retain/refunds', body);
          // A loaded machine can keep a stop waiting for a pooled connection past its 5 s: 503 RET900
          // with Retry-After, which a client retries (decisions §16). A deadlock would show in the logs.
          for (let i = 0; i < 4 && r.status === 503; i++) {
            await pause(Number(r.headers.get('retry-after') ?? '1') * 1000);
            r = await client.request('POST', '/v1/retain/refunds', body);
          }
          statuses.push(r.status);
        }),
        pause(Math.random() * 40).then(async () => {
          await review.review(s.id).catch((err: unknown) => {
            reviewErrors.push((err as Error).message);
          });
        }),
      ]),
    );

    expect({ reviewErrors, stopStatuses: statuses.filter((s) => s !== 200) }).toEqual({
      reviewErrors: [],
      stopStatuses: [],
    });
    const ids = submissions.flatMap((s) => s.txnIds);
    const states: { status: string; n: number }[] = await db.query(
      `SELECT status, count(*)::int AS n FROM transactions WHERE merchant_txn_id = ANY($1::text[]) GROUP BY status`,
      [ids],
    );
    expect(states).toEqual([{ status: 'Stopped', n: ids.length }]);
    const [{ unreviewed }] = await db.query(
      `SELECT count(*)::int AS unreviewed FROM submissions WHERE id = ANY($1::uuid[]) AND reviewed_at IS NULL`,
      [submissions.map((s) => s.id)],
    );
    expect(unreviewed).toBe(0);
    // Not even one retried: the lock order itself is right (the retries are only a safety net).
    expect(logger.lines.filter((l) => /deadlock|40P01|40001/i.test(l))).toEqual([]);
    expect(api.logs()).not.toMatch(/deadlock|40P01|40001/i);
  });
});
