import { describe, expect, it } from 'vitest';
import type { SlotStat } from './attempt-slots';
import { buildSlotModel, slotEstimate } from './slot-learner';

// decisions §2: every read is scoped to the authenticated merchant. A plan's estimate (retry_plan in
// the API) may lean on all merchants' evidence, but must not show how many attempts they made.
describe('slot estimate shown with a plan', () => {
  const stat = (scope: SlotStat['scope'], attempts: number): SlotStat =>
    ({
      scope,
      declineClass: 'funds',
      country: null,
      binPrefix: null,
      dayAfterFailure: 3,
      localHour: 9,
      attempts,
      approvals: Math.floor(attempts / 4),
    }) as unknown as SlotStat;

  it("counts only the merchant's own samples; others' evidence shows as its source, not as a count", () => {
    const borrowed = slotEstimate(buildSlotModel('funds', [stat('global', 4321)]), 3, 8);
    expect(borrowed).toMatchObject({ samples: 0, source: 'global' });
    const own = slotEstimate(buildSlotModel('funds', [stat('merchant', 12), stat('global', 4321)]), 3, 8);
    expect(own.samples).toBe(12);
  });
});
