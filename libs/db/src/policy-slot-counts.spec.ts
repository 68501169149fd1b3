import { describe, expect, it } from 'vitest';
import { useScratchMerchant } from '../test/scratch-merchant';
import { PolicyStatsRepository } from './repositories/policy-stats.repository';

// The learner's counts of a batch of decided attempts: one pending row per slot and scope, its
// counts summed, and every read (slots, the fold) seeing the same totals as one row per attempt.
describe('policy slot counts of a batch (real Postgres)', () => {
  const scratch = useScratchMerchant('slots_', []);
  const slot = (localHour: number) => ({ declineClass: 'soft_test', dayAfterFailure: 2, localHour });

  it('attempts of one slot in one batch append one row per scope with their sums; slots() reads the totals', async () => {
    const m = scratch.merchantId;
    await PolicyStatsRepository.countMany(scratch.db, [
      { merchantId: m, slot: slot(9), approved: true },
      { merchantId: m, slot: slot(9), approved: false },
      { merchantId: m, slot: slot(9), approved: true },
      { merchantId: m, slot: slot(14), approved: false },
    ]);
    const pending: { local_hour: number; attempts: number; approvals: number }[] = await scratch.db.query(
      `SELECT local_hour, attempts, approvals FROM policy_slot_pending
        WHERE scope = $1 AND decline_class = 'soft_test' ORDER BY local_hour`,
      [m],
    );
    expect(pending).toEqual([
      { local_hour: 9, attempts: 3, approvals: 2 },
      { local_hour: 14, attempts: 1, approvals: 0 },
    ]);
    // A second batch adds to the same slot; the read sums pending rows (and folded ones).
    await PolicyStatsRepository.countMany(scratch.db, [{ merchantId: m, slot: slot(9), approved: true }]);
    const read = (await PolicyStatsRepository.slots(scratch.db, m, 'soft_test')).filter((r) => r.scope === m);
    expect(read.map((r) => [r.local_hour, r.attempts, r.approvals]).sort()).toEqual([
      [14, 1, 0],
      [9, 4, 3],
    ]);
    // Folded into policy_slot_stats, the totals stay the same.
    await PolicyStatsRepository.fold(scratch.db);
    const folded = (await PolicyStatsRepository.slots(scratch.db, m, 'soft_test')).filter((r) => r.scope === m);
    expect(folded.map((r) => [r.local_hour, r.attempts, r.approvals]).sort()).toEqual([
      [14, 1, 0],
      [9, 4, 3],
    ]);
    await scratch.db.query(`DELETE FROM policy_slot_stats WHERE scope = $1`, [m]);
  });
});
