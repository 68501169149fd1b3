import type { MigrationInterface, QueryRunner } from 'typeorm';

/** The tables written on every POST, attempt and push: their primary keys were random v4 uuids. */
export const TIME_ORDERED_ID_TABLES = [
  'transactions',
  'attempts',
  'outbox',
  'webhook_messages',
  'refunds',
  'submissions',
];

/**
 * Time-ordered primary keys (issue 14, the POST at a million transactions).
 *
 * A random uuid lands each new row's primary-key entry on a random leaf page of an index that, at a
 * million transactions, no longer sits in shared_buffers: a read from the OS, a dirtied page, and a
 * full-page image in the WAL the first time that page changes after a checkpoint. Measured on a
 * seeded million (50-row INSERTs like a POST's, 1 GB shared_buffers): the primary key took 0.6 of
 * the ~3.6 index page reads per new row and ~20% of its full-page images; with version-7 uuids
 * (48 bits of Unix milliseconds, then random, RFC 9562) new keys go to the index's right edge and
 * its reads fell from 194 to 4 per 500 rows, the INSERT from ~11.5 to ~10.5 ms per 50 rows (an empty
 * database: ~6.6 ms). The other random-keyed indexes stay: vid is random by contract (decisions.md),
 * and card, subscription and external ids are the merchant's. The ids stay internal and unique
 * (74 random bits per millisecond); PostgreSQL 15 has no uuidv7(), so a SQL function builds one.
 * Existing rows keep their ids.
 */
export class TimeOrderedIds1799300000000 implements MigrationInterface {
  name = 'TimeOrderedIds1799300000000';

  async up(q: QueryRunner): Promise<void> {
    // gen_random_uuid()'s 16 bytes, the first 6 replaced by the Unix time in ms, the version nibble
    // turned from 4 (0100) to 7 (0111) by setting bits 52 and 53; the variant bits stay 10.
    await q.query(`
      CREATE FUNCTION retain_uuid_v7() RETURNS uuid LANGUAGE sql VOLATILE PARALLEL SAFE AS $fn$
        SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) PLACING
          substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3) FROM 1 FOR 6),
          52, 1), 53, 1), 'hex')::uuid
      $fn$`);
    for (const table of TIME_ORDERED_ID_TABLES) {
      await q.query(`ALTER TABLE ${table} ALTER COLUMN id SET DEFAULT retain_uuid_v7()`);
    }
  }

  async down(q: QueryRunner): Promise<void> {
    for (const table of TIME_ORDERED_ID_TABLES) {
      await q.query(`ALTER TABLE ${table} ALTER COLUMN id SET DEFAULT gen_random_uuid()`);
    }
    await q.query(`DROP FUNCTION IF EXISTS retain_uuid_v7()`);
  }
}
