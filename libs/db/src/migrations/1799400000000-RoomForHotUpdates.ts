import type { MigrationInterface, QueryRunner } from 'typeorm';

/** The fill of transactions' pages: the rest of a page is room for its rows' next versions. */
export const TRANSACTIONS_FILLFACTOR = 70;

/**
 * Room on each page of transactions for a row's next version (issue 14: the attempts, and the
 * indexes at a million transactions).
 *
 * An UPDATE is HOT (it writes no index entry) only when it changes no indexed column and the row's
 * new version fits on the row's own page. DueTransactions kept the retry schedule's columns out of
 * the indexes and set fillfactor 90, but a transaction row is ~1 kB, more than the 819 bytes a page
 * at fillfactor 90 keeps free. A transaction in retry is updated twice per attempt (the tick clears
 * its schedule, the record of a decline sets the next one), and each update that is not HOT writes
 * an entry into each of the table's 14 indexes, several of them random-keyed (card, subscription,
 * vid), which then grow and leave shared_buffers.
 *
 * Measured on 1,870 transactions in retry from `bench/attempts`, five rounds of a tick's update and a
 * decline's record (batches of 500, each its own transaction, as the service writes them):
 * - fillfactor 90: 42-46% of the 18,700 updates HOT; indexes 2.4 -> 5.8-6.0 MB, heap 3.8 -> 15.9-16.8
 *   MB (without VACUUM), 37.7-39.5 MB of WAL, 3.3-3.8 s;
 * - fillfactor 70: 96% HOT; indexes 2.4 -> 2.9 MB, heap 5.4 -> 6.6-6.7 MB (a page prunes its own dead
 *   versions), 16.6-16.7 MB of WAL, 2.3-2.6 s.
 * (fillfactor 80 and 75: 80-87% HOT.) A freshly loaded heap is ~40% larger (5 rows of ~1 kB per
 * page instead of 7); after a few schedule updates it is smaller than at 90, which leaves dead
 * versions for VACUUM. The first attempt's record and a capture change `status` (indexed) and are
 * never HOT. Existing pages keep their fill until rows move (updates, VACUUM FULL or pg_repack).
 *
 * Attempts keep the default fill: tried at 70 (with `prepared_at` out of `attempts_card_merchant`),
 * the in-flight marks of a batch, whose rows one tick packed onto the same pages, did not fit before
 * the batch committed (~560 of 3,000 HOT), and `bench/attempts` did not move.
 */
export class RoomForHotUpdates1799400000000 implements MigrationInterface {
  name = 'RoomForHotUpdates1799400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE transactions SET (fillfactor = ${TRANSACTIONS_FILLFACTOR})`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE transactions SET (fillfactor = 90)`);
  }
}
