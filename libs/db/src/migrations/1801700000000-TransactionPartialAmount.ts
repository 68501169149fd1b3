import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A transaction's partial authorization (decisions §15) is its own capture's: `partial_amount_minor`,
 * the part its capturing attempt was approved for, set with the capture and never by a second capture
 * (an attempt the processor finished late, added to `captured_amount_minor` and refunded at once).
 * `partial_amount` used to be read from `captured_amount_minor`, which a second capture inflates:
 * 9.99 of 19.99 then showed 19.98, or nothing when the second capture was of the whole amount. Filled
 * from the capturing attempt (the one whose processor_transaction_id the transaction kept). Not read
 * by the analytics rollup: its triggers stay quiet.
 */
export class TransactionPartialAmount1801700000000 implements MigrationInterface {
  name = 'TransactionPartialAmount1801700000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE transactions ADD COLUMN partial_amount_minor bigint CHECK (partial_amount_minor > 0)`);
    await q.query(
      `UPDATE transactions t SET partial_amount_minor = a.partial_amount_minor
         FROM attempts a
        WHERE a.transaction_id = t.id AND a.partial_amount_minor IS NOT NULL
          AND a.processor_transaction_id = t.processor_transaction_id`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE transactions DROP COLUMN partial_amount_minor`);
  }
}
