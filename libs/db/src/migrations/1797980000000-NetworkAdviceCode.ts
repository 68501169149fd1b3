import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * decisions §16: the optional `network_advice_code` of a submission (the Mastercard Merchant Advice
 * Code of the original decline) is kept, shown, and obeyed by the policy from the first attempt.
 */
export class NetworkAdviceCode1797980000000 implements MigrationInterface {
  name = 'NetworkAdviceCode1797980000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE transactions ADD COLUMN network_advice_code varchar(2)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE transactions DROP COLUMN network_advice_code`);
  }
}
