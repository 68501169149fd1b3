import { scrubSecrets } from '@retain/domain';
import type { DataSource, EntityManager } from 'typeorm';
import { QUEUES, isQueueName, type QueueName } from './contracts';
import type { OutboxRelay, QueueRegistry } from './outbox';

/** What is kept of a job that failed for good. The payload holds ids and a version only (contracts). */
export interface FailedJobRecord {
  queue: QueueName;
  jobId: string;
  jobName: string;
  payload: unknown;
  /** Attempts made, the last one included. */
  attempts: number;
  error: string;
  /** The outbox row the job was published from, marked so the sweeper leaves it alone. */
  outboxId: string | null;
}

/** One line of `retain jobs failed` (decisions §16). */
export interface FailedJobView {
  queue: QueueName;
  id: string;
  failed_at: string;
  attempts: number;
  last_error: string;
}

const MAX_ERROR_LENGTH = 2000;

/** An error message fit to be stored and shown: card numbers and keys masked, length bounded. */
export function sanitizeJobError(message: string): string {
  const text = scrubSecrets(message.replace(/\s+/g, ' ').trim()) || 'failed (no message)';
  return text.length > MAX_ERROR_LENGTH ? `${text.slice(0, MAX_ERROR_LENGTH)}…` : text;
}

/**
 * Records a job that failed for good: a failed_jobs row, and its outbox row marked failed so the
 * sweeper no longer re-adds it. Idempotent: the worker's failed handler and the sweeper's safety
 * net may both record one failure; a failure that is already open is kept as first recorded.
 * Returns true when this call recorded a new failure.
 */
export async function recordFailure(db: DataSource | EntityManager, rec: FailedJobRecord): Promise<boolean> {
  const rows: { recorded: boolean }[] = await db.query(
    `WITH recorded AS (
       INSERT INTO failed_jobs (queue, job_id, job_name, payload, outbox_id, attempts, last_error)
       VALUES ($1, $2, $3, $4::jsonb, $5::uuid, $6, $7)
       ON CONFLICT (queue, job_id) DO UPDATE
         SET job_name = EXCLUDED.job_name, payload = EXCLUDED.payload, outbox_id = EXCLUDED.outbox_id,
             attempts = EXCLUDED.attempts, last_error = EXCLUDED.last_error, failed_at = now(),
             failure_count = failed_jobs.failure_count + 1, redriven_at = NULL
         WHERE failed_jobs.redriven_at IS NOT NULL
       RETURNING 1
     ), marked AS (
       UPDATE outbox SET failed_at = COALESCE(failed_at, now())
        WHERE id = $5::uuid AND completed_at IS NULL
     )
     SELECT EXISTS (SELECT 1 FROM recorded) AS recorded`,
    [
      rec.queue,
      rec.jobId,
      rec.jobName,
      JSON.stringify(rec.payload ?? null),
      rec.outboxId,
      rec.attempts,
      sanitizeJobError(rec.error),
    ],
  );
  return rows[0]?.recorded === true;
}

interface OpenFailure {
  queue: string;
  job_id: string;
  job_name: string;
  payload: unknown;
  outbox_id: string | null;
}

/**
 * Jobs that failed for good, as an operator sees them (`npm run retain -- jobs failed|redrive`).
 * A redrive removes the failed job from Redis and enqueues it again with a fresh attempt budget:
 * outbox jobs through the relay (so the sweeper covers them again), other jobs (webhook delivery
 * attempts, refund batches) from their recorded name and payload.
 */
export class FailedJobs {
  /** `redrive` needs Redis (`queues`, `relay`); listing and counting need Postgres only. */
  constructor(
    private readonly db: DataSource,
    private readonly redis?: { queues: QueueRegistry; relay: OutboxRelay },
  ) {}

  /** Open failures (not redriven), oldest first. */
  async list(queue?: QueueName): Promise<FailedJobView[]> {
    const rows: { queue: QueueName; id: string; failed_at: Date; attempts: number; last_error: string }[] =
      await this.db.query(
        `SELECT queue, job_id AS id, failed_at, attempts, last_error FROM failed_jobs
          WHERE redriven_at IS NULL AND ($1::text IS NULL OR queue = $1) ORDER BY failed_at, job_id`,
        [queue ?? null],
      );
    return rows.map((r) => ({ ...r, failed_at: r.failed_at.toISOString() }));
  }

  /** Open failures per queue (the `retain_failed_jobs` gauge). */
  async openCounts(): Promise<Map<QueueName, number>> {
    const rows: { queue: string; n: number }[] = await this.db.query(
      `SELECT queue, count(*)::int AS n FROM failed_jobs WHERE redriven_at IS NULL GROUP BY queue`,
    );
    return new Map(rows.filter((r) => isQueueName(r.queue)).map((r) => [r.queue as QueueName, r.n]));
  }

  /**
   * Puts failed jobs back: the given job ids, or every open failure (`'all'`), optionally of one
   * queue. An id that is not an open failure is an error (nothing is redriven then).
   */
  async redrive(target: readonly string[] | 'all', queue?: QueueName): Promise<{ queue: QueueName; id: string }[]> {
    const rows: OpenFailure[] = await this.db.query(
      `SELECT queue, job_id, job_name, payload, outbox_id FROM failed_jobs
        WHERE redriven_at IS NULL AND ($1::text IS NULL OR queue = $1)
          AND ($2::text[] IS NULL OR job_id = ANY($2::text[]))
        ORDER BY failed_at, job_id`,
      [queue ?? null, target === 'all' ? null : [...target]],
    );
    if (target !== 'all') {
      const missing = target.filter((id) => !rows.some((r) => r.job_id === id));
      if (missing.length > 0) throw new Error(`no failed job ${missing.join(', ')} (see jobs failed)`);
      const ambiguous = rows.filter((r, i) => rows.findIndex((o) => o.job_id === r.job_id) !== i);
      if (ambiguous.length > 0) throw new Error(`job ${ambiguous[0]!.job_id} failed in several queues: add --queue`);
    }
    const done: { queue: QueueName; id: string }[] = [];
    for (const row of rows) {
      if (!isQueueName(row.queue)) continue;
      await this.redriveOne(row.queue, row);
      done.push({ queue: row.queue, id: row.job_id });
    }
    return done;
  }

  private async redriveOne(queue: QueueName, row: OpenFailure): Promise<void> {
    if (!this.redis) throw new Error('FailedJobs: redrive needs the queues and the outbox relay');
    const { queues, relay } = this.redis;
    // The failed job first: while it exists, an add with its id is a no-op. The rows are still
    // marked failed meanwhile, so a sweep in between cannot record the old failure again.
    const q = queues.get(queue);
    const old = await q.getJob(row.job_id);
    if (old) await old.remove();
    await this.db.transaction(async (m) => {
      await m.query(
        `UPDATE failed_jobs SET redriven_at = now(), redrive_count = redrive_count + 1
          WHERE queue = $1 AND job_id = $2`,
        [queue, row.job_id],
      );
      // A fresh budget of put-backs after stalls (MAX_PUBLISHES_AFTER_STALLS), as a new job has: the
      // operator redrives once the cause is fixed, and its first stall since is not its last.
      if (row.outbox_id) {
        await m.query(`UPDATE outbox SET failed_at = NULL, published_at = NULL, publish_count = 0 WHERE id = $1`, [
          row.outbox_id,
        ]);
      }
    });
    if (row.outbox_id) {
      await relay.publish([row.outbox_id]);
    } else {
      // Recorded as written by its producer; the record's job options give a fresh attempt budget.
      const untyped: { add(name: string, data: unknown, opts: object): Promise<unknown> } = q;
      await untyped.add(row.job_name, row.payload, { ...QUEUES[queue].jobOptions, jobId: row.job_id });
    }
  }
}
