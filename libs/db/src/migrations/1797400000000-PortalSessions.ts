import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Server-side sessions of the merchant portal (decisions §14). Only a SHA-256 of the session token
 * is stored: a leaked table cannot be replayed as cookies. Expiry is read from these timestamps with
 * the database clock (12 h from created_at, 30 min from last_seen_at).
 */
export class PortalSessions1797400000000 implements MigrationInterface {
  name = 'PortalSessions1797400000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE portal_sessions (
        token_hash char(64) PRIMARY KEY,
        merchant_id uuid NOT NULL REFERENCES merchants(id) ON DELETE CASCADE,
        created_at timestamptz NOT NULL DEFAULT now(),
        last_seen_at timestamptz NOT NULL DEFAULT now()
      )`);
    await q.query(`CREATE INDEX portal_sessions_merchant ON portal_sessions (merchant_id)`);
    await q.query(`CREATE INDEX portal_sessions_created ON portal_sessions (created_at)`);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS portal_sessions`);
  }
}
