import { createHash, randomBytes } from 'node:crypto';
import type { DataSource } from 'typeorm';

/** decisions §14: a session lasts at most 12 hours, and ends after 30 minutes without a request. */
export const SESSION_ABSOLUTE_HOURS = 12;
export const SESSION_IDLE_MINUTES = 30;
/** last_seen_at is rewritten at most this often, so a busy portal does not write a row per request. */
const TOUCH_EVERY_SECONDS = 30;

const hashToken = (token: string): string => createHash('sha256').update(token).digest('hex');

export interface SessionMerchant {
  id: string;
  merchantVid: string;
  login: string;
  disabledAt: Date | null;
}

/**
 * Portal sessions (decisions §14). The token (256 random bits, url-safe) goes to the browser once, in
 * the cookie; the table keeps only its SHA-256. Expiry uses the database clock, so a session's age
 * is what its row says (tests age a session by editing created_at / last_seen_at).
 */
export class PortalSessionsRepository {
  constructor(private readonly db: DataSource) {}

  /**
   * Opens a session for the merchant with the API key it logged in with, and returns its token (never
   * stored); null when the key is no longer live. One statement holds the key row (FOR SHARE) while
   * it inserts: a rotation revoking the key waits for it, then ends this session with the others; a
   * rotation that revoked it first makes it open nothing (the row is re-checked after the wait).
   */
  async open(merchantId: string, apiKeyHash: string): Promise<string | null> {
    const token = randomBytes(32).toString('base64url');
    const rows: unknown[] = await this.db.query(
      `WITH live AS (
         SELECT merchant_id FROM merchant_api_keys
          WHERE key_hash = $2 AND merchant_id = $3 AND revoked_at IS NULL
            FOR SHARE
       )
       INSERT INTO portal_sessions (token_hash, merchant_id) SELECT $1, merchant_id FROM live
       RETURNING merchant_id`,
      [hashToken(token), apiKeyHash, merchantId],
    );
    return rows.length > 0 ? token : null;
  }

  /**
   * The merchant of a live session, and the session's idle clock restarted; null when the token is
   * unknown, ended or expired (an expired row is deleted on the way; the retention sweep deletes the
   * others: RetentionRepository.portalSessions).
   */
  async resume(token: string): Promise<SessionMerchant | null> {
    const rows = (await this.db.query(
      `SELECT s.token_hash,
              (s.created_at > now() - make_interval(hours => $2)
                AND s.last_seen_at > now() - make_interval(mins => $3)) AS live,
              s.last_seen_at < now() - make_interval(secs => $4) AS stale,
              m.id, m.merchant_vid, m.login, m.disabled_at
         FROM portal_sessions s JOIN merchants m ON m.id = s.merchant_id
        WHERE s.token_hash = $1`,
      [hashToken(token), SESSION_ABSOLUTE_HOURS, SESSION_IDLE_MINUTES, TOUCH_EVERY_SECONDS],
    )) as {
      token_hash: string;
      live: boolean;
      stale: boolean;
      id: string;
      merchant_vid: string;
      login: string;
      disabled_at: Date | null;
    }[];
    const row = rows[0];
    if (!row) return null;
    if (!row.live) {
      await this.db.query(`DELETE FROM portal_sessions WHERE token_hash = $1`, [row.token_hash]);
      return null;
    }
    if (row.stale) {
      await this.db.query(`UPDATE portal_sessions SET last_seen_at = now() WHERE token_hash = $1`, [row.token_hash]);
    }
    return { id: row.id, merchantVid: row.merchant_vid, login: row.login, disabledAt: row.disabled_at };
  }

  /** Ends one session (logout). */
  async end(token: string): Promise<void> {
    await this.db.query(`DELETE FROM portal_sessions WHERE token_hash = $1`, [hashToken(token)]);
  }

  /** Ends every session of a merchant (its API key was rotated). */
  async endAllOf(merchantId: string): Promise<number> {
    const [, count] = (await this.db.query(`DELETE FROM portal_sessions WHERE merchant_id = $1`, [merchantId])) as [
      unknown,
      number,
    ];
    return count;
  }
}
