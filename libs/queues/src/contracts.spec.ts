import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import type { EntityManager } from 'typeorm';
import { describe, expect, it } from 'vitest';
import {
  JOB_NAMES,
  MAX_IDS_PER_FIELD,
  QUEUES,
  QUEUE_NAMES,
  QueueName,
  assertJobData,
  jobLifetimeMs,
  queuesConsumedBy,
  workerOptions,
  type QueueJob,
} from './contracts';
import { addToOutbox, type QueueRegistry } from './outbox';

// Compile-time contract: `npm run typecheck` checks this file. Each @ts-expect-error line must be an
// error, or the typecheck fails ("unused directive"): a queue name binds its payload at the producer.
export function producerTypeChecks(manager: EntityManager, queues: QueueRegistry): void {
  void addToOutbox(manager, [
    { queue: QueueName.SubmissionReview, data: { v: 1, submissionId: 's' } },
    { queue: QueueName.RetryAttempt, data: { v: 2, attemptIds: ['a'] } },
    { queue: QueueName.RetryAttempt, data: { v: 1, attemptId: 'a' } },
  ]);
  // @ts-expect-error a retry.attempt job cannot carry a submission review's payload
  void addToOutbox(manager, [{ queue: QueueName.RetryAttempt, data: { v: 1, submissionId: 's' } }]);
  // @ts-expect-error each version has its own fields
  void addToOutbox(manager, [{ queue: QueueName.RetryAttempt, data: { v: 2, attemptId: 'a' } }]);
  // @ts-expect-error nor an unknown payload version
  void addToOutbox(manager, [{ queue: QueueName.WebhookDeliver, data: { v: 2, messageId: 'm' } }]);
  // @ts-expect-error nor a queue that does not exist
  void addToOutbox(manager, [{ queue: 'webhook.tick', data: { v: 1 } }]);
  void queues.enqueue({ queue: QueueName.RefundBatch, data: { v: 1, trigger: 'operator' } }, 'id');
  // @ts-expect-error enqueue binds the payload to the queue too
  void queues.enqueue({ queue: QueueName.RefundBatch, data: { v: 1, messageId: 'm' } }, 'id');
  void queues.get(QueueName.WebhookDeliver).add('deliver', { v: 1, messageId: 'm' });
  // @ts-expect-error a typed queue takes its own job name only
  void queues.get(QueueName.WebhookDeliver).add('attempt', { v: 1, messageId: 'm' });
  // @ts-expect-error and its own payload only
  void queues.get(QueueName.WebhookDeliver).add('deliver', { v: 1, attemptId: 'a' });
  const mixed: QueueJob[] = [{ queue: QueueName.RetryTick, data: { v: 1 } }];
  void mixed;
}

const root = path.resolve(__dirname, '../../..');
const sources = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : [],
  );

describe('the queue record', () => {
  it('has one entry per queue name, with its job name', () => {
    expect(Object.keys(QUEUES).sort()).toEqual([...QUEUE_NAMES].sort());
    for (const q of QUEUE_NAMES) expect(JOB_NAMES[q]).toBe(QUEUES[q].jobName);
  });

  it('derives worker options: the configured lock where the record says JOB_LOCK_MS', () => {
    expect(workerOptions(QueueName.WebhookDeliver, 5000)).toEqual({
      concurrency: 64,
      lockDuration: 5000,
      stalledInterval: 5000,
    });
    expect(workerOptions(QueueName.RetryTick, 5000)).toEqual({
      concurrency: 1,
      lockDuration: 30_000,
      stalledInterval: 30_000,
    });
    // The operator's RETRY_ATTEMPT_CONCURRENCY replaces the attempt jobs' 16, and only theirs.
    expect(workerOptions(QueueName.RetryAttempt, 5000).concurrency).toBe(16);
    expect(workerOptions(QueueName.RetryAttempt, 5000, { RETRY_ATTEMPT_CONCURRENCY: 48 }).concurrency).toBe(48);
    expect(workerOptions(QueueName.WebhookDeliver, 5000, { RETRY_ATTEMPT_CONCURRENCY: 48 }).concurrency).toBe(64);
    expect(queuesConsumedBy('retry-worker')).toEqual([
      QueueName.RetryAttempt,
      QueueName.RetryTick,
      QueueName.ProcessorNotification,
    ]);
    expect(queuesConsumedBy('intake-api')).toEqual([]);
  });

  it('has no dead queue: each is consumed by a processor of its app and produced somewhere', () => {
    const key = (q: QueueName) => Object.entries(QueueName).find(([, v]) => v === q)![0];
    const appFiles = sources(path.join(root, 'apps')).filter((f) => !f.includes(`${path.sep}test${path.sep}`));
    const text = (f: string) => readFileSync(f, 'utf8');
    for (const q of QUEUE_NAMES) {
      const consumer = path.join(root, 'apps', QUEUES[q].consumer, 'src');
      const processors = appFiles.filter((f) => text(f).includes(`@QueueProcessor(QueueName.${key(q)})`));
      expect(processors.length, `${q} consumer`).toBe(1);
      expect(processors[0]!.startsWith(consumer), `${q} is consumed in ${QUEUES[q].consumer}`).toBe(true);
      // Producers: outbox rows, typed adds, job schedulers (the processor upserting its own tick).
      const produced = [...appFiles, ...sources(path.join(root, 'libs'))].some((f) => {
        const t = text(f);
        return (
          !f.endsWith('.spec.ts') &&
          new RegExp(
            `queue: QueueName\\.${key(q)}\\b|get\\(QueueName\\.${key(q)}\\)|InjectQueue\\(QueueName\\.${key(q)}\\)`,
          ).test(t)
        );
      });
      expect(produced, `${q} producer`).toBe(true);
    }
  });
});

describe('jobLifetimeMs', () => {
  it('every try (its work and two job locks) and every backoff between tries', () => {
    // retry.attempt: 10 tries, exponential backoff from 2 s: 2 + 4 + ... + 512 s = 1022 s between them.
    expect(jobLifetimeMs(QueueName.RetryAttempt, 30_000, 150_000)).toBe(10 * (150_000 + 60_000) + 1_022_000);
    // retry.tick: one try, its own 30 s lock whatever JOB_LOCK_MS says, no backoff.
    expect(jobLifetimeMs(QueueName.RetryTick, 5_000, 1_000)).toBe(1_000 + 60_000);
  });
});

describe('assertJobData', () => {
  it('accepts the contract and refuses, as unrecoverable, another version or a missing id', () => {
    expect(() => assertJobData(QueueName.RetryAttempt, { v: 2, attemptIds: ['a', 'b'] })).not.toThrow();
    // A job queued before the slices (version 1, one attempt) is still consumed.
    expect(() => assertJobData(QueueName.RetryAttempt, { v: 1, attemptId: 'a' })).not.toThrow();
    for (const bad of [
      { v: 3, attemptIds: ['a'] },
      { v: 2, attemptId: 'a' },
      { v: 2, attemptIds: [] },
      { v: 2, attemptIds: ['a', ''] },
      { v: 2, attemptIds: ['a', 7] },
      { v: 2, attemptIds: Array.from({ length: MAX_IDS_PER_FIELD + 1 }, (_, i) => `a${i}`) },
      { v: 1, attemptIds: ['a'] },
      { v: 1 },
      { v: 1, attemptId: '' },
      null,
      'x',
    ]) {
      let err: unknown;
      try {
        assertJobData(QueueName.RetryAttempt, bad);
      } catch (e) {
        err = e;
      }
      expect((err as Error).name, JSON.stringify(bad)).toBe('UnrecoverableError');
    }
    expect(() => assertJobData(QueueName.RetryTick, { v: 1 })).not.toThrow();
  });
});
