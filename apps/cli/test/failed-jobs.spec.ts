import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { BullModule, Processor, WorkerHost } from '@nestjs/bullmq';
import { Module, type INestApplicationContext } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { loadConfig } from '@retain/config';
import { JobRunner, PlatformModule, RetainMetrics } from '@retain/platform';
import { OutboxRelay, QueueName, QueueRegistry, addToOutbox, type JobData } from '@retain/queues';
import { closeTestDb, testDb, waitFor } from '@retain/testing';
import type { Job } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const cli = (...args: string[]): any => {
  const r = spawnSync(process.execPath, [path.resolve(__dirname, '../../../dist/apps/cli/src/main.js'), ...args], {
    env: process.env,
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(r.stderr || `exit ${r.status}`);
  return JSON.parse(r.stdout);
};

/** What the consumer below does with each job, by submission id: throw until told otherwise. */
const behaviour = new Map<string, 'throw' | 'succeed'>();
const runs: string[] = [];

/** A review consumer that fails on demand, run through the shared JobRunner and worker hooks. */
@Processor(QueueName.SubmissionReview, { concurrency: 2 })
class FlakyReviewProcessor extends WorkerHost {
  constructor(private readonly runner: JobRunner) {
    super();
  }

  async process(job: Job<JobData<'submission.review'>>): Promise<unknown> {
    return this.runner.run(QueueName.SubmissionReview, job, async () => {
      runs.push(job.data.submissionId);
      if (behaviour.get(job.data.submissionId) !== 'succeed') {
        // A card number and an API key in an error must never reach the failed_jobs row or the CLI.
        throw new Error('processor said no to 4111 1111 1111 1111 with rk_live_abcdefgh12345678');
      }
      return 'ok';
    });
  }
}

@Module({
  imports: [
    PlatformModule.forApp('submission-validator', loadConfig('submission-validator')),
    BullModule.registerQueue({ name: QueueName.SubmissionReview }),
  ],
  providers: [FlakyReviewProcessor],
})
class FlakyWorkerModule {}

// issue 9 item 4, decisions §16: a job out of attempts is a row, the sweeper leaves it, an operator
// lists it and redrives it.
describe('retain jobs failed / jobs redrive', () => {
  let app: INestApplicationContext;

  beforeAll(async () => {
    app = await NestFactory.createApplicationContext(FlakyWorkerModule, { logger: false });
    await app.init();
  });
  afterAll(async () => {
    await app?.close();
    await closeTestDb();
  });

  const outboxRow = async (id: string) =>
    (await (await testDb()).query(`SELECT completed_at, failed_at, publish_count FROM outbox WHERE id = $1`, [id]))[0];
  const failedRow = async (id: string) =>
    (await (await testDb()).query(`SELECT * FROM failed_jobs WHERE job_id = $1`, [id]))[0];

  it('records a job out of attempts, never re-adds it, lists it, and redrives it to completion', async () => {
    const db = await testDb();
    const queue = app.get(QueueRegistry).get(QueueName.SubmissionReview);
    const relay = app.get(OutboxRelay);

    // Job A: the consumer always throws; a budget of 2 attempts (the relay's 10 would take minutes).
    const a = randomUUID();
    const [idA] = await db.transaction((m) =>
      addToOutbox(m, [{ queue: QueueName.SubmissionReview, data: { v: 1, submissionId: a } }]),
    );
    await db.query(`UPDATE outbox SET published_at = now(), publish_count = 1 WHERE id = $1`, [idA]);
    await queue.add('review', { v: 1, submissionId: a }, { jobId: idA, attempts: 2, backoff: 0 });
    // Job B: a payload version no consumer knows, published the normal way (10 attempts): it fails for
    // good at once (UnrecoverableError), not after ten tries.
    const b = randomUUID();
    const [{ id: idB }] = await db.query(
      `INSERT INTO outbox (queue, job_name, payload) VALUES ($1, 'review', $2) RETURNING id`,
      [QueueName.SubmissionReview, { v: 99, submissionId: b }],
    );
    await relay.publish([idB]);

    const recordedA = await waitFor(() => failedRow(idA!), { what: 'job A recorded as failed' });
    expect(recordedA).toMatchObject({ queue: QueueName.SubmissionReview, attempts: 2, redriven_at: null });
    expect(recordedA.payload).toEqual({ v: 1, submissionId: a });
    expect(recordedA.last_error).toContain('processor said no');
    expect(recordedA.last_error).not.toMatch(/4111 1111 1111 1111|abcdefgh12345678/);
    // BullMQ keeps its own record of the failure in Redis for 7 days (failedReason, stacktrace): masked too.
    const inRedis = (await queue.getJob(idA!))!;
    expect(inRedis.failedReason).toContain('processor said no');
    expect(JSON.stringify([inRedis.failedReason, inRedis.stacktrace])).not.toMatch(
      /4111 1111 1111 1111|abcdefgh12345678/,
    );
    const recordedB = await waitFor(() => failedRow(idB), { what: 'job B recorded as failed' });
    expect(recordedB.attempts).toBe(1);
    expect(recordedB.last_error).toMatch(/version/);
    expect(runs.filter((s) => s === a)).toHaveLength(2);
    expect(runs).not.toContain(b);
    expect((await outboxRow(idA!)).failed_at).not.toBeNull();

    // Several sweeps (and the app's own sweeper timer) leave both alone: still failed, not re-added.
    // (The sweeper sweeps the whole outbox of the run's shared database, so other files' rows may
    // become jobs of this queue: only these two jobs are looked at.)
    for (let i = 0; i < 3; i++) await relay.sweep(0);
    expect(await queue.getJobState(idA!)).toBe('failed');
    expect(await queue.getJobState(idB)).toBe('failed');
    expect((await outboxRow(idA!)).publish_count).toBe(1);
    expect(runs.filter((s) => s === a)).toHaveLength(2);

    // The metric an alert watches, read from Postgres at scrape time.
    const metrics = await app.get(RetainMetrics).registry.metrics();
    // The gauge counts every not-redriven failure in the run's database (other test files record some too).
    const [{ n }] = await db.query(
      `SELECT count(*)::int AS n FROM failed_jobs WHERE queue = $1 AND redriven_at IS NULL`,
      [QueueName.SubmissionReview],
    );
    expect(n).toBeGreaterThanOrEqual(2);
    expect(metrics).toContain(`retain_failed_jobs{queue="submission.review",app="submission-validator"} ${n}\n`);
    expect(metrics).toMatch(/retain_jobs_failed_total\{queue="submission\.review",app="submission-validator"\} 2/);

    const listed = cli('jobs', 'failed');
    const mine = listed.filter((j: any) => j.id === idA || j.id === idB);
    expect(mine).toHaveLength(2);
    for (const j of mine) expect(Object.keys(j).sort()).toEqual(['attempts', 'failed_at', 'id', 'last_error', 'queue']);
    expect(mine.find((j: any) => j.id === idA)).toMatchObject({ queue: 'submission.review', attempts: 2 });
    expect(new Date(mine[0].failed_at).getTime()).not.toBeNaN();
    expect(cli('jobs', 'failed', '--queue', QueueName.WebhookDeliver).map((j: any) => j.id)).not.toContain(idA);
    expect(cli('jobs', 'failed', '--queue', QueueName.SubmissionReview).map((j: any) => j.id)).toContain(idA);

    // Redrive A once its cause is fixed: a fresh attempt budget, run to completion.
    behaviour.set(a, 'succeed');
    expect(cli('jobs', 'redrive', idA!)).toEqual({ redriven: [{ queue: QueueName.SubmissionReview, id: idA }] });
    await waitFor(async () => (await outboxRow(idA!)).completed_at, { what: 'job A completed after redrive' });
    expect(runs.filter((s) => s === a)).toHaveLength(3);
    expect((await outboxRow(idA!)).failed_at).toBeNull();
    expect((await failedRow(idA!)).redriven_at).not.toBeNull();
    expect(cli('jobs', 'failed').map((j: any) => j.id)).not.toContain(idA);

    // --all puts B back too; its payload still cannot be handled, so it is recorded again at once.
    const before = new Date(recordedB.failed_at).getTime();
    const all = cli('jobs', 'redrive', '--all');
    expect(all.redriven).toContainEqual({ queue: QueueName.SubmissionReview, id: idB });
    const again = await waitFor(
      async () => {
        const r = await failedRow(idB);
        return r.redriven_at === null && new Date(r.failed_at).getTime() > before ? r : null;
      },
      { what: 'job B failed again after redrive' },
    );
    expect(again.attempts).toBe(1);
    expect(cli('jobs', 'failed').map((j: any) => j.id)).toContain(idB);
  });

  it('refuses an unknown job id and a missing argument', () => {
    const run = (...args: string[]) =>
      spawnSync(process.execPath, [path.resolve(__dirname, '../../../dist/apps/cli/src/main.js'), ...args], {
        env: process.env,
        encoding: 'utf8',
      });
    const unknown = run('jobs', 'redrive', 'no-such-job');
    expect(unknown.status).toBe(1);
    expect(JSON.parse(unknown.stderr.trim().split('\n').pop()!).error).toMatch(/no failed job/);
    expect(run('jobs', 'redrive').status).not.toBe(0);
  });
});
