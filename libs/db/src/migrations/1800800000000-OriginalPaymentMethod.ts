import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The payment method a transaction was submitted with (the review's, before any fallback): its
 * original decline belongs to that card, so the adaptive policy's "never recovers" reading of the
 * original auth_code binds only that card, not one the transaction moved to (decisions §15).
 * Null for rows reviewed before it: read as still on the submitted card (as before). A nullable
 * column without a default: no table rewrite.
 */
export class OriginalPaymentMethod1800800000000 implements MigrationInterface {
  name = 'OriginalPaymentMethod1800800000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(
      `ALTER TABLE transactions ADD COLUMN original_payment_method_ref uuid NULL REFERENCES payment_methods(id)`,
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE transactions DROP COLUMN original_payment_method_ref`);
  }
}
