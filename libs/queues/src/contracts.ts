import type { DefaultJobOptions } from 'bullmq';

/** Frozen queue names: the one source of truth for every producer and consumer. */
export const QueueName = {
  SubmissionReview: 'submission.review',
  RetryAttempt: 'retry.attempt',
  RetryTick: 'retry.tick',
  WebhookDeliver: 'webhook.deliver',
  WebhookTick: 'webhook.tick',
  RefundBatch: 'refund.batch',
} as const;
export type QueueName = (typeof QueueName)[keyof typeof QueueName];

/**
 * Each queue's job name and payload. Payloads carry ids and a version, never card data or secrets.
 * Adding a queue without an entry here (and in QUEUE_OPTIONS) does not compile.
 */
export interface JobContracts {
  'submission.review': { name: 'review'; data: { v: 1; submissionId: string } };
  'retry.attempt': { name: 'attempt'; data: { v: 1; attemptId: string } };
  'retry.tick': { name: 'tick'; data: { v: 1 } };
  'webhook.deliver': { name: 'deliver'; data: { v: 1; messageId: string } };
  'webhook.tick': { name: 'tick'; data: { v: 1 } };
  'refund.batch': { name: 'batch'; data: { v: 1; trigger: 'schedule' | 'operator' } };
}
export type JobName<Q extends QueueName> = JobContracts[Q]['name'];
export type JobData<Q extends QueueName> = JobContracts[Q]['data'];

/** The job names, by queue, as runtime values. */
export const JOB_NAMES: { [Q in QueueName]: JobName<Q> } = {
  'submission.review': 'review',
  'retry.attempt': 'attempt',
  'retry.tick': 'tick',
  'webhook.deliver': 'deliver',
  'webhook.tick': 'tick',
  'refund.batch': 'batch',
};

const keepSome = { removeOnComplete: { age: 3600, count: 1000 }, removeOnFail: { age: 7 * 86400 } };

/**
 * Per-queue job options. Retries here cover crashes and transient errors; business retries
 * (the recovery schedule, webhook backoff) live in Postgres rows, not in Redis.
 */
export const QUEUE_OPTIONS: Record<QueueName, DefaultJobOptions> = {
  'submission.review': { ...keepSome, attempts: 10, backoff: { type: 'exponential', delay: 1000 } },
  'retry.attempt': { ...keepSome, attempts: 10, backoff: { type: 'exponential', delay: 2000 } },
  'retry.tick': { removeOnComplete: true, removeOnFail: true, attempts: 1 },
  'webhook.deliver': { ...keepSome, attempts: 5, backoff: { type: 'exponential', delay: 1000 } },
  'webhook.tick': { removeOnComplete: true, removeOnFail: true, attempts: 1 },
  'refund.batch': { ...keepSome, attempts: 5, backoff: { type: 'exponential', delay: 5000 } },
};
