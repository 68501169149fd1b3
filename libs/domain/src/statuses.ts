/** Transaction statuses exactly as the spec spells them. */
export const TransactionStatus = {
  Authorized: 'Authorized',
  Captured: 'Captured',
  Settled: 'Settled',
  Refunded: 'Refunded',
  Failed: 'Failed',
  Cancelled: 'Cancelled',
  Void: 'Void',
  InRetry: 'In Retry',
  PartiallyRefunded: 'Partially Refunded',
  Stopped: 'Stopped',
  RefundRequested: 'Refund Requested',
  StopRequested: 'Stop Requested',
} as const;
export type TransactionStatus = (typeof TransactionStatus)[keyof typeof TransactionStatus];
export const TRANSACTION_STATUSES: readonly TransactionStatus[] = Object.values(TransactionStatus);

/** Statuses in which a submitted transaction is still being recovered (RETDUP2 / RET003 apply). */
export const RECOVERING_STATUSES: readonly TransactionStatus[] = [
  TransactionStatus.Failed,
  TransactionStatus.InRetry,
  TransactionStatus.StopRequested,
];

/** Statuses in which a transaction is retried: an attempt may still be made (a stop or a capture ends them). */
export const IN_RETRY_STATUSES: readonly TransactionStatus[] = [TransactionStatus.Failed, TransactionStatus.InRetry];

export const RefundStatus = {
  Processing: 'Processing',
  Completed: 'Completed',
  Failed: 'Failed',
} as const;
export type RefundStatus = (typeof RefundStatus)[keyof typeof RefundStatus];

export const AuthCodeDescription = {
  Soft: 'Soft Failure',
  Hard: 'Hard Failure',
} as const;
export type AuthCodeDescription = (typeof AuthCodeDescription)[keyof typeof AuthCodeDescription];

/** Outcome of the post-submission review, kept per submitted transaction. */
export const ReviewStatus = {
  Pending: 'pending',
  Passed: 'passed',
  Rejected: 'rejected',
} as const;
export type ReviewStatus = (typeof ReviewStatus)[keyof typeof ReviewStatus];

export const EventName = {
  RetrySucceeded: 'retry succeeded',
  RetryFailed: 'retry failed',
  RefundCompleted: 'refund completed',
  RefundFailed: 'refund failed',
  ValidationFailed: 'validation failed',
  /** A push the merchant asked for to check its endpoint (API/portal "send test push"); no state changed. */
  Test: 'test',
} as const;
export type EventName = (typeof EventName)[keyof typeof EventName];
