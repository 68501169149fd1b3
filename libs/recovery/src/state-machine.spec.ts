import { EventName, TRANSACTION_STATUSES, TransactionStatus } from '@retain/domain';
import { describe, expect, it } from 'vitest';
import {
  ATTEMPT_EDGES,
  ATTEMPT_STATES,
  AttemptState,
  RecoveryRuleError,
  TRANSACTION_EDGES,
  attemptTransition,
  canDropAttempt,
  canTransition,
  reconcileDecision,
  transition,
  type AttemptEdgeName,
  type TransactionEdgeName,
} from './state-machine';

const S = TransactionStatus;

/** The whole table, written out once more by hand: every allowed (from, edge) -> to and push. */
interface Expected {
  from: string[];
  to: string;
  push: string | null;
  final: boolean;
}
const EXPECTED: Record<TransactionEdgeName, Expected> = {
  retryScheduled: { from: [S.Failed, S.InRetry], to: S.InRetry, push: null, final: false },
  retrySucceeded: { from: [S.Failed, S.InRetry], to: S.Captured, push: EventName.RetrySucceeded, final: false },
  retryExhausted: { from: [S.Failed, S.InRetry], to: S.Cancelled, push: EventName.RetryFailed, final: true },
  stopRequested: { from: [S.Failed, S.InRetry], to: S.StopRequested, push: null, final: false },
  stopCaptured: {
    from: [S.StopRequested, S.Captured, S.Settled, S.PartiallyRefunded, S.RefundRequested, S.Refunded],
    to: S.RefundRequested,
    push: EventName.RetrySucceeded,
    final: false,
  },
  stopClosed: { from: [S.StopRequested], to: S.Stopped, push: EventName.RefundCompleted, final: true },
  lateCapture: {
    from: [S.Cancelled, S.Stopped],
    to: S.RefundRequested,
    push: EventName.RetrySucceeded,
    final: false,
  },
  refundRequested: {
    from: [S.Captured, S.Settled, S.PartiallyRefunded, S.RefundRequested, S.Refunded],
    to: S.RefundRequested,
    push: null,
    final: false,
  },
  settled: { from: [S.Captured], to: S.Settled, push: null, final: false },
  refundCompleted: { from: [S.RefundRequested], to: S.Refunded, push: EventName.RefundCompleted, final: false },
  refundPartlyCompleted: {
    from: [S.RefundRequested],
    to: S.PartiallyRefunded,
    push: EventName.RefundCompleted,
    final: false,
  },
  refundFailed: { from: [S.RefundRequested], to: S.Captured, push: EventName.RefundFailed, final: false },
};

describe('transaction edges', () => {
  it('the table names every edge', () => {
    expect(Object.keys(TRANSACTION_EDGES).sort()).toEqual(Object.keys(EXPECTED).sort());
  });

  for (const [edge, want] of Object.entries(EXPECTED) as [TransactionEdgeName, Expected][]) {
    for (const from of TRANSACTION_STATUSES) {
      const allowed = want.from.includes(from);
      it(`${edge} from "${from}": ${allowed ? `-> ${want.to}` : 'refused'}`, () => {
        if (allowed) {
          expect(transition(from, edge, { unresolvedAttempts: 0 })).toEqual({ to: want.to, announces: want.push });
        } else {
          expect(() => transition(from, edge, { unresolvedAttempts: 0 })).toThrow(RecoveryRuleError);
          expect(canTransition(from, edge, { unresolvedAttempts: 0 })).toBe(false);
        }
      });
    }
    it(`${edge} with an attempt pending or unknown: ${want.final ? 'refused (final)' : 'allowed'}`, () => {
      const from = want.from[0]!;
      expect(canTransition(from, edge, { unresolvedAttempts: 1 })).toBe(!want.final);
      if (want.final) expect(() => transition(from, edge, { unresolvedAttempts: 2 })).toThrow(/may still have charged/);
    });
  }
});

describe('attempt edges', () => {
  const EXPECTED_ATTEMPT: Record<AttemptEdgeName, [string, string]> = {
    approved: ['pending', 'captured'],
    declined: ['pending', 'declined'],
    outcomeUnknown: ['pending', 'unknown'],
    resolvedCaptured: ['unknown', 'captured'],
    resolvedDeclined: ['unknown', 'declined'],
    resolvedNotCharged: ['unknown', 'error'],
    lateCapture: ['error', 'captured'],
  };
  it('the table names every edge', () => {
    expect(Object.keys(ATTEMPT_EDGES).sort()).toEqual(Object.keys(EXPECTED_ATTEMPT).sort());
  });
  for (const [edge, [from, to]] of Object.entries(EXPECTED_ATTEMPT) as [AttemptEdgeName, [string, string]][]) {
    for (const state of ATTEMPT_STATES) {
      it(`${edge} from ${state}: ${state === from ? `-> ${to}` : 'refused'}`, () => {
        if (state === from) expect(attemptTransition(state, edge)).toBe(to);
        else expect(() => attemptTransition(state, edge)).toThrow(RecoveryRuleError);
      });
    }
  }
  it('captured and declined are terminal: no edge leaves them', () => {
    for (const e of Object.values(ATTEMPT_EDGES)) {
      expect(e.from).not.toContain(AttemptState.Captured);
      expect(e.from).not.toContain(AttemptState.Declined);
    }
  });
  it('only a never-prepared pending attempt may be dropped', () => {
    expect(canDropAttempt({ state: 'pending', preparedAt: null })).toBe(true);
    expect(canDropAttempt({ state: 'pending', preparedAt: new Date() })).toBe(false);
    for (const state of ['unknown', 'captured', 'declined', 'error'])
      expect(canDropAttempt({ state, preparedAt: null })).toBe(false);
  });
});

describe('reconciliation decision', () => {
  const limits = { notFoundAfterMs: 1000, alertAfterMs: 5000 };
  it('a decision found resolves at once, whatever the age', () => {
    expect(reconcileDecision('captured', 0, limits)).toBe('resolvedCaptured');
    expect(reconcileDecision('declined', 0, limits)).toBe('resolvedDeclined');
  });
  it('nothing found: kept until the window is over, then not charged', () => {
    expect(reconcileDecision('no-decision', 999, limits)).toBe('keep');
    expect(reconcileDecision('no-decision', 1000, limits)).toBe('resolvedNotCharged');
  });
  it('nothing found right after a request was sent again under the key: the window runs from that send', () => {
    expect(reconcileDecision('no-decision', 4000, limits, 999)).toBe('keep');
    expect(reconcileDecision('no-decision', 6000, limits, 999)).toBe('alert');
    expect(reconcileDecision('no-decision', 4000, limits, 1000)).toBe('resolvedNotCharged');
  });
  it('a lookup that fails never settles: kept, then the alert', () => {
    expect(reconcileDecision('lookup-failed', 4999, limits)).toBe('keep');
    expect(reconcileDecision('lookup-failed', 5000, limits)).toBe('alert');
    expect(reconcileDecision('lookup-failed', 10 * 86_400_000, limits)).toBe('alert');
  });
});
