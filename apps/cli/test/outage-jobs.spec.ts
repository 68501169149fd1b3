import { randomUUID } from 'node:crypto';
import { BullModule, Processor, WorkerHost } from '@nestjs/bullmq';
import { Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { loadConfig } from '@retain/config';
import { JobRunner, PlatformModule } from '@retain/platform';
import { QueueName, QueueRegistry, type JobData } from '@retain/queues';
import { closeTestDb, testDb, waitFor } from '@retain/testing';
import type { Job } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/** Runs left to fail as while Postgres is down, by submission id; then the handler succeeds (-1: always a bug). */
const outage = new Map<string, number>();
const runs = new Map<string, number>();

/** A Postgres connection refused, as pg reports it. */
const refused = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });

/** A review consumer run through the shared JobRunner, whose back end is "down" for a while. */
@Processor(QueueName.SubmissionReview, { concurrency: 2 })
class OutageReviewProcessor extends WorkerHost {
  constructor(private readonly runner: JobRunner) {
    super();
  }

  async process(job: Job<JobData<'submission.review'>>, token?: string): Promise<unknown> {
    return this.runner.run(
      QueueName.SubmissionReview,
      job,
      async () => {
        const id = job.data.submissionId;
        runs.set(id, (runs.get(id) ?? 0) + 1);
        const left = outage.get(id) ?? 0;
        if (left < 0) throw new Error('a bug of ours: fails the same way every time');
        if (left > 0) {
          outage.set(id, left - 1);
          throw refused();
        }
        return 'ok';
      },
      { token },
    );
  }
}

@Module({
  imports: [
    PlatformModule.forApp('submission-validator', loadConfig('submission-validator')),
    BullModule.registerQueue({ name: QueueName.SubmissionReview }),
  ],
  providers: [OutageReviewProcessor],
})
class OutageWorkerModule {}

// Sixteenth session's audits: a job kept failing while Postgres was down used its 10 attempts in
// ~8.5 min (reviews; ~17 min for attempts) and was then failed for good: a submission never
// reviewed, an attempt left pending, until an operator redrove it. An outage never uses attempts up.
describe('jobs through a back-end outage', () => {
  let app: INestApplicationContext;

  beforeAll(async () => {
    app = await NestFactory.createApplicationContext(OutageWorkerModule, { logger: false });
    await app.init();
  });
  afterAll(async () => {
    await app?.close();
    await closeTestDb();
  });

  it('a job failing only because Postgres is unreachable is tried until it is back, its attempts never used up', async () => {
    const queue = app.get(QueueRegistry).get(QueueName.SubmissionReview);
    const id = randomUUID();
    outage.set(id, 6);
    // A budget of 2 attempts: the outage outlasts it three times over.
    const job = await queue.add(
      'review',
      { v: 1, submissionId: id },
      { jobId: `outage-${id}`, attempts: 2, backoff: { type: 'fixed', delay: 50 } },
    );
    await waitFor(async () => (await queue.getJob(job.id!))?.finishedOn, {
      what: 'the job finished',
      timeoutMs: 30_000,
    });
    const done = (await queue.getJob(job.id!))!;
    expect({ runs: runs.get(id), completed: await done.isCompleted(), attemptsMade: done.attemptsMade }).toMatchObject({
      runs: 7,
      completed: true,
    });
    const failed = await (await testDb()).query(`SELECT 1 FROM failed_jobs WHERE job_id = $1`, [job.id]);
    expect(failed).toHaveLength(0);
  });

  it('any other error still uses the attempts up: failed for good', async () => {
    const queue = app.get(QueueRegistry).get(QueueName.SubmissionReview);
    const id = randomUUID();
    outage.set(id, -1);
    const job = await queue.add(
      'review',
      { v: 1, submissionId: id },
      { jobId: `broken-${id}`, attempts: 2, backoff: { type: 'fixed', delay: 50 } },
    );
    await waitFor(async () => (await queue.getJob(job.id!))?.finishedOn, {
      what: 'the job finished',
      timeoutMs: 30_000,
    });
    const done = (await queue.getJob(job.id!))!;
    expect({ runs: runs.get(id), failed: await done.isFailed() }).toEqual({ runs: 2, failed: true });
  });
});
