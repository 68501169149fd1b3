import { randomBytes } from 'node:crypto';
import { UnrecoverableError, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QueueName } from './contracts';
import { FailedJobs } from './failed-jobs';
import { MAX_PUBLISHES_AFTER_STALLS, OutboxRelay, QueueRegistry, addToOutbox } from './outbox';
import { createRedis } from './redis';

// The outbox against the real Postgres and Redis: what Redis loses, the sweeper puts back.
describe('outbox relay and sweeper', () => {
  let db: DataSource;
  let redis: Redis;
  let queues: QueueRegistry;
  let relay: OutboxRelay;
  const prefix = `{ob${randomBytes(4).toString('hex')}}`;

  beforeAll(async () => {
    db = new DataSource({ type: 'postgres', url: process.env['DATABASE_URL']!, extra: { max: 2 } });
    await db.initialize();
    redis = createRedis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
    queues = new QueueRegistry(redis, prefix);
    relay = new OutboxRelay(db, queues);
  });
  afterAll(async () => {
    await queues.close();
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length) await redis.del(...keys);
    redis.disconnect();
    await db.destroy();
  });

  const flushOurKeys = async (): Promise<void> => {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length) await redis.del(...keys);
  };
  // The sweeper sweeps the whole outbox table, and the run's database is shared by every test file:
  // rows earlier files left open would be swept into this file's queue and skew its job counts.
  const closeOtherRows = async (): Promise<void> => {
    await db.query(`UPDATE outbox SET completed_at = now() WHERE completed_at IS NULL AND failed_at IS NULL`);
  };
  const submissionId = (): string => `00000000-0000-4000-8000-${randomBytes(6).toString('hex')}`;

  it('writes rows only when the surrounding transaction commits', async () => {
    const sid = submissionId();
    await expect(
      db.transaction(async (m) => {
        await addToOutbox(m, [{ queue: QueueName.SubmissionReview, data: { v: 1, submissionId: sid } }]);
        throw new Error('rollback');
      }),
    ).rejects.toThrow('rollback');
    const rows = await db.query(`SELECT * FROM outbox WHERE payload->>'submissionId' = $1`, [sid]);
    expect(rows).toHaveLength(0);
  });

  it('publishes with jobId = row id, and re-publishes a job lost from Redis until it is completed', async () => {
    await closeOtherRows(); // the sweep takes the oldest open rows: other files' must not crowd ours out
    const sid = submissionId();
    const [id] = await db.transaction((m) =>
      addToOutbox(m, [{ queue: QueueName.SubmissionReview, data: { v: 1, submissionId: sid } }]),
    );
    await relay.publish([id!]);
    const q = queues.get(QueueName.SubmissionReview);
    const job = await q.getJob(id!);
    expect(job?.data).toEqual({ v: 1, submissionId: sid });
    expect(job?.name).toBe('review');

    await flushOurKeys();
    expect(await q.getJob(id!)).toBeUndefined();
    // Not yet old enough: the sweeper leaves fresh rows to the fast path.
    await relay.sweep(60_000);
    expect(await q.getJob(id!)).toBeUndefined();
    expect(await relay.sweep(0)).toBeGreaterThanOrEqual(1);
    expect((await q.getJob(id!))?.data).toEqual({ v: 1, submissionId: sid });
    // Still in Redis: nothing to do.
    await relay.sweep(0);
    const [row] = await db.query(`SELECT publish_count FROM outbox WHERE id = $1`, [id]);
    expect(row.publish_count).toBe(2);

    await relay.complete(id!);
    await flushOurKeys();
    await relay.sweep(0);
    expect(await q.getJob(id!)).toBeUndefined();
  });

  it('publishes rows whose fast path never ran (a crash right after commit)', async () => {
    await closeOtherRows(); // the sweep takes the oldest open rows: other files' must not crowd ours out
    const sid = submissionId();
    const [id] = await db.transaction((m) =>
      addToOutbox(m, [{ queue: QueueName.SubmissionReview, data: { v: 1, submissionId: sid } }]),
    );
    await relay.sweep(0);
    expect((await queues.get(QueueName.SubmissionReview).getJob(id!))?.data.submissionId).toBe(sid);
    await relay.complete(id!);
  });

  it('leaves a job that failed for good to the operator: recorded, never re-added by the sweeper', async () => {
    await flushOurKeys(); // jobs of the tests above (their rows are completed) would be consumed too
    await closeOtherRows();
    const sid = submissionId();
    const [id] = await db.transaction((m) =>
      addToOutbox(m, [{ queue: QueueName.SubmissionReview, data: { v: 1, submissionId: sid } }]),
    );
    await relay.publish([id!]);
    const q = queues.get(QueueName.SubmissionReview);
    // A consumer for which this job can never succeed: BullMQ moves it to failed at once.
    const connection = redis.duplicate();
    const failed = new Promise<void>((resolve) => {
      const worker = new Worker(
        QueueName.SubmissionReview,
        async () => {
          throw new UnrecoverableError('payload can never be handled');
        },
        { connection, prefix, autorun: true },
      );
      worker.on('failed', () => void worker.close().then(resolve));
    });
    await failed;
    connection.disconnect();
    expect(await (await q.getJob(id!))?.isFailed()).toBe(true);

    // Today's sweeper removed the failed job and added it again, forever. Now it records the failure
    // (in case no worker could) and leaves the job alone, however often it runs.
    for (let i = 0; i < 3; i++) await relay.sweep(0);
    const counts = await q.getJobCounts('waiting', 'active', 'delayed', 'failed');
    expect(counts).toMatchObject({ waiting: 0, active: 0, delayed: 0, failed: 1 });
    const [row] = await db.query(`SELECT failed_at, publish_count FROM outbox WHERE id = $1`, [id]);
    expect(row.failed_at).not.toBeNull();
    expect(row.publish_count).toBe(1);
    const recorded = await db.query(`SELECT queue, attempts, last_error, payload FROM failed_jobs WHERE job_id = $1`, [
      id,
    ]);
    expect(recorded).toEqual([
      {
        queue: QueueName.SubmissionReview,
        attempts: 1,
        last_error: 'payload can never be handled',
        payload: { v: 1, submissionId: sid },
      },
    ]);
  });

  it('finds a lost review job behind a backlog of older rows whose jobs are still queued', async () => {
    await flushOurKeys();
    await closeOtherRows();
    // Another queue's backlog (no consumer here): jobs waiting in Redis, their rows open and older
    // than the review's. `limit` stands for the sweep's page (500 in production).
    const limit = 5;
    const backlog = await db.transaction((m) =>
      addToOutbox(
        m,
        Array.from({ length: limit * 2 }, () => ({
          queue: QueueName.RefundBatch,
          data: { v: 1 as const, trigger: 'operator' as const },
        })),
      ),
    );
    await relay.publish(backlog);
    await db.query(`UPDATE outbox SET created_at = now() - interval '2 minutes' WHERE id = ANY($1::uuid[])`, [backlog]);
    // A submission whose review job Redis lost (a failover after the publish).
    const sid = submissionId();
    const [id] = await db.transaction((m) =>
      addToOutbox(m, [{ queue: QueueName.SubmissionReview, data: { v: 1, submissionId: sid } }]),
    );
    await relay.publish([id!]);
    const q = queues.get(QueueName.SubmissionReview);
    await (await q.getJob(id!))!.remove();
    await db.query(`UPDATE outbox SET created_at = now() - interval '1 minute' WHERE id = $1`, [id]);

    const sweeper = new OutboxRelay(db, queues);
    for (let i = 0; i < 4; i++) await sweeper.sweep(0, limit);
    expect((await q.getJob(id!))?.data).toEqual({ v: 1, submissionId: sid });
    // The backlog's jobs were still queued: none was added twice.
    const [{ n }] = await db.query(`SELECT max(publish_count)::int AS n FROM outbox WHERE id = ANY($1::uuid[])`, [
      backlog,
    ]);
    expect(n).toBe(1);
    await closeOtherRows();
  });

  it('puts back a job whose workers kept dying, a bounded number of times, then records it', async () => {
    await flushOurKeys();
    await closeOtherRows();
    const sid = submissionId();
    const [id] = await db.transaction((m) =>
      addToOutbox(m, [{ queue: QueueName.SubmissionReview, data: { v: 1, submissionId: sid } }]),
    );
    await relay.publish([id!]);
    const q = queues.get(QueueName.SubmissionReview);
    // BullMQ fails a job with this reason when it stalled (its worker died) more than maxStalledCount.
    const failOnce = async (): Promise<void> => {
      const connection = redis.duplicate();
      await new Promise<void>((resolve) => {
        const worker = new Worker(
          QueueName.SubmissionReview,
          async () => {
            throw new UnrecoverableError('job stalled more than allowable limit');
          },
          { connection, prefix },
        );
        worker.on('failed', () => void worker.close().then(resolve));
      });
      connection.disconnect();
    };
    await failOnce();
    await relay.sweep(0);
    expect(await q.getJobCounts('waiting', 'failed')).toEqual({ waiting: 1, failed: 0 });
    expect(await db.query(`SELECT 1 FROM failed_jobs WHERE job_id = $1`, [id])).toHaveLength(0);

    await db.query(`UPDATE outbox SET publish_count = $2 WHERE id = $1`, [id, MAX_PUBLISHES_AFTER_STALLS]);
    await failOnce();
    await relay.sweep(0);
    await relay.sweep(0);
    expect(await q.getJobCounts('waiting', 'failed')).toEqual({ waiting: 0, failed: 1 });
    const [row] = await db.query(`SELECT last_error FROM failed_jobs WHERE job_id = $1`, [id]);
    expect(row.last_error).toBe('job stalled more than allowable limit');

    // Redriven (the operator fixed what killed its workers): it gets a fresh budget of put-backs, as
    // a fresh job does, instead of being recorded failed again at its first stall.
    await new FailedJobs(db, { queues, relay }).redrive([id!], QueueName.SubmissionReview);
    expect(await q.getJobCounts('waiting', 'failed')).toEqual({ waiting: 1, failed: 0 });
    await failOnce();
    await relay.sweep(0);
    expect(await q.getJobCounts('waiting', 'failed')).toEqual({ waiting: 1, failed: 0 });
    expect(await db.query(`SELECT 1 FROM failed_jobs WHERE job_id = $1 AND redriven_at IS NULL`, [id])).toHaveLength(0);
  });
});
