import { EventName, IN_RETRY_STATUSES, RECOVERING_STATUSES, TransactionStatus } from '@retain/domain';

/**
 * The recovery state machine as data: the states of an attempt and of a transaction, every edge
 * allowed between them (named), and the push each edge announces. Apps call `transition` (or
 * `attemptTransition`) inside their database transaction instead of setting a status themselves;
 * a refused edge throws, so a rule broken by an app is a failed job, never a silent wrong state.
 */

/**
 * What is known about one attempt's charge:
 * - `pending`: created by the scheduler; once `prepared_at` is set it may have reached the processor;
 * - `unknown`: the processor gave no decision (timeout, 5xx, a lookup that found nothing yet). It
 *   may have charged. While any attempt of a transaction is unknown, no final edge is allowed;
 * - `captured` / `declined`: the processor's decision;
 * - `error`: not charged (a lookup settled it: nothing was found within the processor's window).
 *   The late-capture watch keeps looking it up for a while; a capture found then is refunded.
 */
export const AttemptState = {
  Pending: 'pending',
  Unknown: 'unknown',
  Captured: 'captured',
  Declined: 'declined',
  Error: 'error',
} as const;
export type AttemptState = (typeof AttemptState)[keyof typeof AttemptState];
export const ATTEMPT_STATES: readonly AttemptState[] = Object.values(AttemptState);

/** Attempts that may still have charged the card: they block every final transaction edge. */
export const UNRESOLVED_ATTEMPT_STATES: readonly AttemptState[] = [AttemptState.Pending, AttemptState.Unknown];

/** Response code recorded for a processor error that gave none (decisions §16: system malfunction). */
export const PROCESSOR_ERROR_CODE = '96';

export interface AttemptEdge {
  from: readonly AttemptState[];
  to: AttemptState;
}

/** Every allowed attempt edge, by name. An attempt never leaves `captured` or `declined`. */
export const ATTEMPT_EDGES = {
  /** The charge was approved (or a lookup of a pending attempt found it approved). */
  approved: { from: [AttemptState.Pending], to: AttemptState.Captured },
  declined: { from: [AttemptState.Pending], to: AttemptState.Declined },
  /** No decision from the processor: outcome unknown until a lookup settles it. */
  outcomeUnknown: { from: [AttemptState.Pending], to: AttemptState.Unknown },
  /** Reconciliation: the lookup found the charge captured. */
  resolvedCaptured: { from: [AttemptState.Unknown], to: AttemptState.Captured },
  resolvedDeclined: { from: [AttemptState.Unknown], to: AttemptState.Declined },
  /** Reconciliation: not found within the processor's window (or the processor recorded no charge). */
  resolvedNotCharged: { from: [AttemptState.Unknown], to: AttemptState.Error },
  /** The processor reports a capture for an attempt settled as not charged. */
  lateCapture: { from: [AttemptState.Error], to: AttemptState.Captured },
} as const satisfies Record<string, AttemptEdge>;
export type AttemptEdgeName = keyof typeof ATTEMPT_EDGES;

export interface TransactionEdge {
  from: readonly TransactionStatus[];
  to: TransactionStatus;
  /** The push this edge announces (decisions §7, §8), none when absent. */
  announces?: EventName;
  /** A final result pushed to the merchant as "nothing charged": refused while an attempt is unresolved. */
  final?: boolean;
}

const S = TransactionStatus;

/** Every allowed transaction edge, by name. */
export const TRANSACTION_EDGES = {
  /** An attempt did not capture and the schedule plans another one (or an attempt is in flight). */
  retryScheduled: { from: IN_RETRY_STATUSES, to: S.InRetry },
  /** An attempt captured. */
  retrySucceeded: { from: IN_RETRY_STATUSES, to: S.Captured, announces: EventName.RetrySucceeded },
  /** Schedule exhausted, retry forbidden or a card blocked: the recovery ends without money. */
  retryExhausted: { from: IN_RETRY_STATUSES, to: S.Cancelled, announces: EventName.RetryFailed, final: true },
  /** A refund call on a transaction still in retry (decisions §8). */
  stopRequested: { from: IN_RETRY_STATUSES, to: S.StopRequested },
  /** The stop's in-flight attempt captured: the stop refund becomes a normal refund. */
  stopCaptured: {
    // Also from the captured statuses: the refund batcher's safety net finds stop refunds left open
    // on a transaction that captured (and may have had refunds since).
    from: [S.StopRequested, S.Captured, S.Settled, S.PartiallyRefunded, S.RefundRequested, S.Refunded],
    to: S.RefundRequested,
    announces: EventName.RetrySucceeded,
  },
  /** The stop completes with nothing charged: one `refund completed` per stop refund. */
  stopClosed: { from: [S.StopRequested], to: S.Stopped, announces: EventName.RefundCompleted, final: true },
  /** A capture reported after the result was final: recorded and refunded at once. */
  lateCapture: { from: [S.Cancelled, S.Stopped], to: S.RefundRequested, announces: EventName.RetrySucceeded },
  refundRequested: {
    from: [S.Captured, S.Settled, S.PartiallyRefunded, S.RefundRequested, S.Refunded],
    to: S.RefundRequested,
  },
  /** The processor reports the capture settled (paid out in its settlement batch). No push: none is specified. */
  settled: { from: [S.Captured], to: S.Settled },
  refundCompleted: { from: [S.RefundRequested], to: S.Refunded, announces: EventName.RefundCompleted },
  refundPartlyCompleted: {
    from: [S.RefundRequested],
    to: S.PartiallyRefunded,
    announces: EventName.RefundCompleted,
  },
  /** The processor refused the refund: back to the status before the request. */
  refundFailed: { from: [S.RefundRequested], to: S.Captured, announces: EventName.RefundFailed },
} as const satisfies Record<string, TransactionEdge>;
export type TransactionEdgeName = keyof typeof TRANSACTION_EDGES;

/** Results pushed to the merchant as final (decisions §7: results are final once pushed). */
export const FINAL_STATUSES: readonly TransactionStatus[] = [S.Captured, S.Cancelled, S.Stopped];
/** Still being recovered (RETDUP2 / RET003 apply); re-exported from libs/domain. */
export { RECOVERING_STATUSES };
/** Money was captured: a refund is possible. */
export const CAPTURED_STATUSES: readonly TransactionStatus[] = [
  S.Captured,
  S.Settled,
  S.PartiallyRefunded,
  S.RefundRequested,
  S.Refunded,
];
/** Ended without money: a late capture found for these is refunded. */
export const ENDED_WITHOUT_CAPTURE: readonly TransactionStatus[] = [S.Cancelled, S.Stopped];

export class RecoveryRuleError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RecoveryRuleError';
  }
}

export interface TransitionContext {
  /** How many attempts of the transaction are `pending` (prepared or not) or `unknown`. */
  unresolvedAttempts: number;
}

/** Why an edge is refused from this status and context, or null when allowed. */
export function refusal(from: string, edge: TransactionEdgeName, ctx: TransitionContext): string | null {
  const e: TransactionEdge = TRANSACTION_EDGES[edge];
  if (!e.from.includes(from as TransactionStatus)) return `${edge}: not allowed from "${from}"`;
  if (e.final && ctx.unresolvedAttempts > 0) {
    return `${edge}: ${ctx.unresolvedAttempts} attempt(s) of the transaction may still have charged`;
  }
  return null;
}

export function canTransition(from: string, edge: TransactionEdgeName, ctx: TransitionContext): boolean {
  return refusal(from, edge, ctx) === null;
}

/** The edge's target status and the push it announces; throws RecoveryRuleError when refused. */
export function transition(
  from: string,
  edge: TransactionEdgeName,
  ctx: TransitionContext,
): { to: TransactionStatus; announces: EventName | null } {
  const why = refusal(from, edge, ctx);
  if (why) throw new RecoveryRuleError(why);
  const e: TransactionEdge = TRANSACTION_EDGES[edge];
  return { to: e.to, announces: e.announces ?? null };
}

/** The attempt edge's target state; throws RecoveryRuleError when refused. */
export function attemptTransition(from: string, edge: AttemptEdgeName): AttemptState {
  const e: AttemptEdge = ATTEMPT_EDGES[edge];
  if (!e.from.includes(from as AttemptState))
    throw new RecoveryRuleError(`attempt ${edge}: not allowed from "${from}"`);
  return e.to;
}

/**
 * An attempt row may be deleted (its retry number freed) only if it never went to the processor:
 * still pending and never prepared. A prepared attempt may have charged; it is resolved by lookup.
 */
export function canDropAttempt(attempt: { state: string; preparedAt: Date | null }): boolean {
  return attempt.state === AttemptState.Pending && attempt.preparedAt === null;
}

/** The outcome of a processor lookup, as the reconciliation reads it. */
export type LookupReading = 'captured' | 'declined' | 'no-decision';

/**
 * What the reconciliation does with an unknown attempt: resolve it from the lookup, settle it as
 * not charged once the processor's window is over, or keep looking (and alert when overdue).
 */
export function reconcileDecision(
  reading: LookupReading | 'lookup-failed',
  ageMs: number,
  limits: { notFoundAfterMs: number; alertAfterMs: number },
  /**
   * How long the processor has had to show a charge under the key: since the last request sent
   * under it (a replay made a charge the processor's search may show only later). Default: ageMs.
   */
  shownForMs: number = ageMs,
): 'resolvedCaptured' | 'resolvedDeclined' | 'resolvedNotCharged' | 'keep' | 'alert' {
  if (reading === 'captured') return 'resolvedCaptured';
  if (reading === 'declined') return 'resolvedDeclined';
  // The processor answered and has no charge for the key: after its window, nothing will appear.
  if (reading === 'no-decision' && shownForMs >= limits.notFoundAfterMs) return 'resolvedNotCharged';
  return ageMs >= limits.alertAfterMs ? 'alert' : 'keep';
}
