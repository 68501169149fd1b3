import type { DataSource, EntityManager } from 'typeorm';

type Sql = DataSource | EntityManager;

/**
 * Per-merchant pacing asked for by a processor (429 Retry-After): no new attempt of the merchant is
 * sent before `not_before`. Other merchants are never slowed by it.
 */
export class ProcessorThrottlesRepository {
  /** Pushes the merchant's not-before to `until` (never earlier than one already set). */
  static async slowDown(db: Sql, merchantId: string, until: Date): Promise<void> {
    await db.query(
      `INSERT INTO processor_throttles (merchant_id, not_before) VALUES ($1, $2)
       ON CONFLICT (merchant_id) DO UPDATE
         SET not_before = GREATEST(processor_throttles.not_before, EXCLUDED.not_before), updated_at = now()`,
      [merchantId, until],
    );
  }

  /** The merchant's not-before when it is still ahead, else null. */
  static async notBefore(db: Sql, merchantId: string): Promise<Date | null> {
    const [row]: { not_before: Date }[] = await db.query(
      `SELECT not_before FROM processor_throttles WHERE merchant_id = $1 AND not_before > now()`,
      [merchantId],
    );
    return row?.not_before ?? null;
  }

  /** notBefore of many merchants: those still slowed down, with their not-before. */
  static async notBeforeMany(db: Sql, merchantIds: readonly string[]): Promise<Map<string, Date>> {
    const unique = [...new Set(merchantIds)];
    if (unique.length === 0) return new Map();
    const rows: { merchant_id: string; not_before: Date }[] = await db.query(
      `SELECT merchant_id, not_before FROM processor_throttles WHERE merchant_id = ANY($1::uuid[]) AND not_before > now()`,
      [unique],
    );
    return new Map(rows.map((r) => [r.merchant_id, r.not_before]));
  }
}
