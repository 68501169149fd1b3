import { groupCommit } from '@retain/domain';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { DataSource, EntityManager } from 'typeorm';
import type { ConnectionErrorLog } from './connection-errors';
import {
  JOB_NAMES,
  QUEUE_OPTIONS,
  QUEUES,
  type JobData,
  type JobName,
  type QueueJob,
  type QueueName,
} from './contracts';
import { recordFailure } from './failed-jobs';

/** An outbox row to write: a queue and its payload, bound to each other (see QueueJob). */
export type OutboxRow = QueueJob;

/** A queue whose add/addBulk only accept its own job name and payload. */
export type TypedQueue<Q extends QueueName> = Queue<JobData<Q>, unknown, JobName<Q>>;

/**
 * Writes outbox rows inside the caller's database transaction: the job exists if and only if
 * the state change that announces it committed. Returns the row ids (the future job ids).
 */
export async function addToOutbox(manager: EntityManager, rows: readonly QueueJob[]): Promise<string[]> {
  if (rows.length === 0) return [];
  const result: { id: string }[] = await manager.query(
    `INSERT INTO outbox (queue, job_name, payload)
     SELECT x.queue, x.job_name, x.payload FROM jsonb_to_recordset($1::jsonb)
       AS x(queue varchar, job_name varchar, payload jsonb)
     RETURNING id`,
    [JSON.stringify(rows.map((r) => ({ queue: r.queue, job_name: JOB_NAMES[r.queue], payload: r.data })))],
  );
  return result.map((r) => r.id);
}

/** Typed queues, created once per process and shared. */
export class QueueRegistry {
  private readonly queues = new Map<QueueName, Queue<any, unknown, string>>();

  constructor(
    private readonly connection: Redis,
    private readonly prefix: string,
    /** Where the queues' connection errors go (rate-limited log lines). */
    private readonly errors?: ConnectionErrorLog,
  ) {}

  get<Q extends QueueName>(name: Q): TypedQueue<Q> {
    let q = this.queues.get(name);
    if (!q) {
      q = new Queue(name, { connection: this.connection, prefix: this.prefix, defaultJobOptions: QUEUE_OPTIONS[name] });
      this.errors?.watch(`queue ${name}`, q);
      this.queues.set(name, q);
    }
    return q as TypedQueue<Q>;
  }

  /** The one typed enqueue. jobId makes a second add of the same job a no-op while it exists. */
  async enqueue(job: QueueJob, jobId: string, delayMs = 0): Promise<void> {
    const queue: Queue<unknown, unknown, string> = this.get(job.queue);
    await queue.add(JOB_NAMES[job.queue], job.data, { jobId, delay: delayMs > 0 ? delayMs : undefined });
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close()));
    this.queues.clear();
  }
}

interface OpenRow {
  id: string;
  queue: QueueName;
  payload: Record<string, unknown>;
  published_at: Date | null;
  publish_count: number;
}

/** An open row as a sweep reads it: created_at as text (a Date would drop its microseconds). */
interface SweptRow extends OpenRow {
  created_at: string;
}

/** BullMQ's reason for a job whose workers died under it more often than maxStalledCount allows. */
const STALLED_OUT = 'job stalled more than allowable limit';
/**
 * A job whose workers kept dying (SIGKILL, OOM, a lost node) did not fail itself: the sweeper puts
 * it back with a fresh budget, up to this many publishes of its row; beyond that it is taken for a
 * job that kills its worker and recorded as failed for good like any other.
 */
export const MAX_PUBLISHES_AFTER_STALLS = 5;

/**
 * Moves outbox rows into Redis. `publish` runs right after a commit (fast path); `sweep` runs on
 * a timer in every worker and re-enqueues rows never published, or published but gone from Redis
 * and not completed (a Redis flush or failover). Consumers are idempotent, so a duplicate run of
 * a job is harmless; `complete` marks a row done once its handler succeeded. A row whose job failed
 * for good is marked `failed_at` and left alone until an operator redrives it (FailedJobs).
 */
export class OutboxRelay {
  /** Completions outside a caller's transaction are grouped: one UPDATE for many finished jobs. */
  private readonly completeGrouped = groupCommit<string, void>(async (ids) => {
    await this.db.query(`UPDATE outbox SET completed_at = now() WHERE id = ANY($1::uuid[]) AND completed_at IS NULL`, [
      ids,
    ]);
    return ids.map(() => undefined);
  });

  /**
   * Where the next sweep goes on: the last row the previous one looked at (created_at, id), or null
   * to start from the oldest. A page of rows whose jobs are still queued (a backlog of any queue)
   * would otherwise fill every sweep, and a row behind it that Redis lost would wait for the whole
   * backlog to drain.
   */
  private sweepAfter: { createdAt: string; id: string } | null = null;

  constructor(
    private readonly db: DataSource,
    private readonly queues: QueueRegistry,
  ) {}

  async publish(ids: string[]): Promise<void> {
    if (ids.length === 0) return;
    const rows: OpenRow[] = await this.db.query(
      `SELECT id, queue, payload, published_at, publish_count FROM outbox
        WHERE id = ANY($1::uuid[]) AND completed_at IS NULL AND failed_at IS NULL`,
      [ids],
    );
    await this.enqueueRows(rows);
  }

  /**
   * Re-enqueues what was lost; returns how many rows it (re)published. No row lock is held while
   * Redis is asked (a long sweep must never block consumers completing their rows); two sweepers
   * racing may both re-add a job, which BullMQ's job id deduplicates, and handlers are idempotent.
   */
  async sweep(olderThanMs = 5000, limit = 500): Promise<number> {
    const after = this.sweepAfter;
    // One page per sweep, in (created_at, id) order from where the last one stopped; a short page
    // ends the round, and the next sweep starts again from the oldest open row.
    const rows: SweptRow[] = await this.db.query(
      `SELECT id, queue, payload, published_at, publish_count, created_at::text AS created_at FROM outbox
        WHERE completed_at IS NULL AND failed_at IS NULL
          AND created_at < now() - ($1::int * interval '1 millisecond')
          AND (published_at IS NULL OR published_at < now() - ($1::int * interval '1 millisecond'))
          AND ($3::timestamptz IS NULL OR (created_at >= $3::timestamptz AND (created_at, id) > ($3::timestamptz, $4::uuid)))
        ORDER BY created_at, id LIMIT $2`,
      [olderThanMs, limit, after?.createdAt ?? null, after?.id ?? null],
    );
    const last = rows[rows.length - 1];
    this.sweepAfter = rows.length < limit || !last ? null : { createdAt: last.created_at, id: last.id };
    const lost = (
      await Promise.all(
        rows.map(async (row) => {
          if (row.published_at === null) return row;
          const job = await this.queues.get(row.queue).getJob(row.id);
          if (!job) return row;
          if (await job.isFailed()) {
            const stalledOut = job.failedReason === STALLED_OUT && row.publish_count < MAX_PUBLISHES_AFTER_STALLS;
            if (!QUEUES[row.queue].recordFailures || stalledOut) {
              await job.remove();
              return row;
            }
            // Failed for good (out of attempts, or unrecoverable) and not recorded: its worker died
            // before its failed handler ran, or its workers kept dying under it. Record it now;
            // re-adding it forever would hide the failure and burn the work again and again.
            await recordFailure(this.db, {
              queue: row.queue,
              jobId: row.id,
              jobName: JOB_NAMES[row.queue],
              payload: row.payload,
              attempts: job.attemptsMade,
              error: job.failedReason || 'failed (no reason recorded)',
              outboxId: row.id,
            });
          }
          return null;
        }),
      )
    ).filter((r): r is SweptRow => r !== null);
    await this.enqueueRows(lost);
    return lost.length;
  }

  async complete(id: string, manager?: EntityManager): Promise<void> {
    if (!manager) return this.completeGrouped(id);
    await manager.query(`UPDATE outbox SET completed_at = now() WHERE id = $1 AND completed_at IS NULL`, [id]);
  }

  private async enqueueRows(rows: OpenRow[]): Promise<void> {
    if (rows.length === 0) return;
    const byQueue = new Map<QueueName, OpenRow[]>();
    for (const r of rows) byQueue.set(r.queue, [...(byQueue.get(r.queue) ?? []), r]);
    for (const [queue, list] of byQueue) {
      // Payloads come back from Postgres as written by addToOutbox (typed there).
      const q: Queue<unknown, unknown, string> = this.queues.get(queue);
      await q.addBulk(
        list.map((r) => ({
          name: JOB_NAMES[queue],
          data: r.payload,
          opts: { ...QUEUE_OPTIONS[queue], jobId: r.id },
        })),
      );
    }
    await this.db.query(
      `UPDATE outbox SET published_at = now(), publish_count = publish_count + 1 WHERE id = ANY($1::uuid[])`,
      [rows.map((r) => r.id)],
    );
  }
}
