import { describe, expect, it } from 'vitest';
import { useScratchMerchant } from '../test/scratch-merchant';
import { RetentionRepository } from './repositories/retention.repository';

// Issue 14: retention deletes in batches that never walk a whole table. Each batch finds its rows
// through an index: with sequential scans priced out (enable_seqscan off), a sweep of each kind runs
// no sequential scan of any table (counted in pg_stat_xact_user_tables). Without such an index, a
// backlog of n rows costs n/batch scans of n rows each. Portal sessions are the exception the
// repository documents: that table holds only the last 12 hours' sessions.
describe('retention sweeps find their rows by index (real Postgres)', () => {
  const scratch = useScratchMerchant('retplan_');
  const day = 86_400_000;
  const sweeps: [string, (db: Parameters<typeof RetentionRepository.outbox>[0]) => Promise<number>][] = [
    ['outbox', (db) => RetentionRepository.outbox(db, new Date(Date.now() - day), 1000)],
    ['webhook_messages', (db) => RetentionRepository.webhookMessages(db, new Date(Date.now() - day), 1000)],
    [
      'sandbox_ledger',
      (db) => RetentionRepository.sandboxLedger(db, new Date(Date.now() - day), 1000, new Date(Date.now() - day)),
    ],
    [
      'refund_idempotency_keys',
      (db) => RetentionRepository.refundIdempotencyKeys(db, new Date(Date.now() - day), 1000),
    ],
    [
      'processor_notifications',
      (db) => RetentionRepository.processorNotifications(db, new Date(Date.now() - day), 1000),
    ],
  ];

  for (const [kind, sweep] of sweeps) {
    it(`${kind}: no sequential scan`, async () => {
      const runner = scratch.db.createQueryRunner();
      await runner.startTransaction();
      try {
        await runner.query(`SET LOCAL enable_seqscan = off`);
        await sweep(runner);
        const scanned: { relname: string; seq_scan: number }[] = await runner.query(
          `SELECT relname, seq_scan::int AS seq_scan FROM pg_stat_xact_user_tables WHERE seq_scan > 0 ORDER BY relname`,
        );
        expect(scanned, kind).toEqual([]);
      } finally {
        await runner.rollbackTransaction();
        await runner.release();
      }
    });
  }
});
