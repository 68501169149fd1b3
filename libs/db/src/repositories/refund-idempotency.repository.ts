import type { EntityManager } from 'typeorm';

/** What a call with an Idempotency-Key finds when it claims the key. */
export type IdempotencyClaim =
  { kind: 'claimed' } | { kind: 'replay'; statusCode: number; response: unknown } | { kind: 'mismatch' };

/** How long a key answers with its first call's answer (Stripe's 24 h); retention deletes it after. */
export const REFUND_IDEMPOTENCY_KEY_HOURS = 24;

/**
 * Idempotency keys of POST /v1/retain/refunds (migration RefundIdempotencyKeys), in the call's own
 * database transaction: the claim is an INSERT, so a concurrent call with the same key waits for
 * this one's commit (or rollback) and then finds its stored answer.
 */
export class RefundIdempotencyRepository {
  static async claim(
    m: EntityManager,
    merchantId: string,
    key: string,
    requestHash: string,
  ): Promise<IdempotencyClaim> {
    // Twice at most: a key retention deletes between the two statements (at its 24 h, by the app's
    // clock) is claimed afresh.
    for (let tries = 0; ; tries++) {
      // A key older than 24 h is a new call's, whether or not retention has swept it yet.
      const inserted: unknown[] = await m.query(
        `INSERT INTO refund_idempotency_keys AS k (merchant_id, key, request_hash) VALUES ($1, $2, $3)
         ON CONFLICT (merchant_id, key) DO UPDATE
           SET request_hash = EXCLUDED.request_hash, status_code = NULL, response = NULL, created_at = now()
           WHERE k.created_at < now() - make_interval(hours => $4)
         RETURNING 1`,
        [merchantId, key, requestHash, REFUND_IDEMPOTENCY_KEY_HOURS],
      );
      if (inserted.length > 0) return { kind: 'claimed' };
      const [row]: { request_hash: string; status_code: number | null; response: unknown }[] = await m.query(
        `SELECT request_hash, status_code, response FROM refund_idempotency_keys WHERE merchant_id = $1 AND key = $2`,
        [merchantId, key],
      );
      if (!row && tries === 0) continue;
      if (!row || row.status_code === null) throw new Error('idempotency key claimed without an answer');
      if (row.request_hash !== requestHash) return { kind: 'mismatch' };
      return { kind: 'replay', statusCode: row.status_code, response: row.response };
    }
  }

  /** The answer of the call that claimed the key (same transaction). */
  static async complete(
    m: EntityManager,
    merchantId: string,
    key: string,
    statusCode: number,
    response: unknown,
  ): Promise<void> {
    await m.query(
      `UPDATE refund_idempotency_keys SET status_code = $3, response = $4::jsonb WHERE merchant_id = $1 AND key = $2`,
      [merchantId, key, statusCode, JSON.stringify(response)],
    );
  }
}
