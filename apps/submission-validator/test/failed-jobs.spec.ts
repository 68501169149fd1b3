import { randomUUID } from 'node:crypto';
import { OutboxRelay, QueueName, QueueRegistry, createRedis } from '@retain/queues';
import { closeTestDb, startApp, testDb, usePrivateDatabase, waitFor, type RunningApp } from '@retain/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// issue 9 item 4 through a real worker process: a payload no consumer knows fails for good at once
// (UnrecoverableError, not ten attempts), is recorded by the app's shared failed handler, and its
// outbox row is no longer swept.
describe('a review job that can never succeed', () => {
  // Its own database and queues: its job is not behind review jobs other files left in the shared queue.
  usePrivateDatabase('fj');
  let validator: RunningApp;
  const redis = createRedis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
  let queues: QueueRegistry;

  beforeAll(async () => {
    queues = new QueueRegistry(redis, process.env['QUEUE_PREFIX']!);
    validator = await startApp('submission-validator');
  });
  afterAll(async () => {
    await validator?.stop();
    await queues.close();
    redis.disconnect();
    await closeTestDb();
  });

  it('is recorded in failed_jobs after one attempt and left alone by the sweeper', async () => {
    const db = await testDb();
    const [{ id }] = await db.query(
      `INSERT INTO outbox (queue, job_name, payload) VALUES ($1, 'review', $2) RETURNING id`,
      [QueueName.SubmissionReview, { v: 2, submissionId: randomUUID() }],
    );
    await new OutboxRelay(db, queues).publish([id]);
    const row = await waitFor(async () => (await db.query(`SELECT * FROM failed_jobs WHERE job_id = $1`, [id]))[0], {
      what: 'the failed job row',
    });
    expect(row).toMatchObject({ queue: QueueName.SubmissionReview, attempts: 1, outbox_id: id, redriven_at: null });
    expect(row.last_error).toMatch(/unknown payload version 2/);
    const [outbox] = await db.query(`SELECT failed_at, completed_at FROM outbox WHERE id = $1`, [id]);
    expect(outbox.failed_at).not.toBeNull();
    expect(outbox.completed_at).toBeNull();
    const job = await queues.get(QueueName.SubmissionReview).getJob(id);
    expect(await job?.isFailed()).toBe(true);
    expect(job?.attemptsMade).toBe(1);
    // The metric the alert watches, as this worker's /metrics shows it.
    const metrics = await (await fetch(`${validator.url}/metrics`)).text();
    expect(metrics).toMatch(/retain_failed_jobs\{queue="submission\.review",app="submission-validator"\} [1-9]/);
    expect(metrics).toMatch(/retain_jobs_failed_total\{queue="submission\.review",app="submission-validator"\} 1/);
  });
});
