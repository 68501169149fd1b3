import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * When a request last went to the processor again under an attempt's key (a rerun's charge, a
 * lookup's replay): the reconciliation's "not found" counts from it, not from the in-flight mark, so
 * a key-only lookup right after a replay (Stripe's search shows a charge about a minute late) is not
 * taken for "not charged". A nullable column without a default: no table rewrite.
 */
export class AttemptLastSent1800500000100 implements MigrationInterface {
  name = 'AttemptLastSent1800500000100';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE attempts ADD COLUMN last_sent_at timestamptz NULL`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE attempts DROP COLUMN last_sent_at`);
  }
}
