import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A transaction's original decline class, card network, BIN and billing country, fixed once (migration
 * FixedBreakdownKeys, next): the analytics breakdowns read them in place of the columns that change
 * later. Values as in auth_code_description, card_network, card_bin and the billing address's
 * country; '' when there was none; NULL until fixed. Added alone, in its own migration transaction, so
 * the exclusive lock of ALTER TABLE lasts only as long as adding nullable columns does (no rewrite),
 * not the next migration's backfill.
 */
export class BreakdownKeyColumns1800100000000 implements MigrationInterface {
  name = 'BreakdownKeyColumns1800100000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `ALTER TABLE transactions ADD COLUMN original_decline_class varchar(16),
         ADD COLUMN original_card_network varchar(16), ADD COLUMN original_card_bin varchar(8),
         ADD COLUMN original_country varchar(64)`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(
      `ALTER TABLE transactions DROP COLUMN original_decline_class, DROP COLUMN original_card_network,
         DROP COLUMN original_card_bin, DROP COLUMN original_country`,
    );
  }
}
