import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A payment method's id as long as the intake takes it (255, Stripe's limit; decisions: "must fit
 * the payment provider's length limit"). `payment_methods.pm_id` held 128: the review of a
 * submission with a longer Stripe token failed on the column width and rolled back whole, every
 * time, so none of its transactions was ever reviewed. Widening a varchar rewrites nothing.
 */
export class LongPaymentMethodIds1799500000000 implements MigrationInterface {
  name = 'LongPaymentMethodIds1799500000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE payment_methods ALTER COLUMN pm_id TYPE varchar(255)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE payment_methods ALTER COLUMN pm_id TYPE varchar(128)`);
  }
}
