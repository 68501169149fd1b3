import { describe, expect, it } from 'vitest';
import { useScratchMerchant } from '../test/scratch-merchant';
import { TIME_ORDERED_ID_TABLES } from './migrations/1799300000000-TimeOrderedIds';

/** The 48-bit Unix-millisecond prefix of a version-7 uuid. */
const msOf = (uuid: string): number => parseInt(uuid.replace(/-/g, '').slice(0, 12), 16);

// Migration TimeOrderedIds: the hot tables' primary keys are version-7 uuids (time first, then
// random), so a new row's key lands at the right edge of its index instead of a random page.
describe('time-ordered primary keys (real Postgres)', () => {
  const scratch = useScratchMerchant('v7_', []);

  it('every hot table takes its id from retain_uuid_v7()', async () => {
    const rows: { table_name: string; column_default: string }[] = await scratch.db.query(
      `SELECT table_name, column_default FROM information_schema.columns
        WHERE table_schema = 'public' AND column_name = 'id' AND table_name = ANY($1)`,
      [TIME_ORDERED_ID_TABLES],
    );
    expect(rows.map((r) => r.table_name).sort()).toEqual([...TIME_ORDERED_ID_TABLES].sort());
    for (const r of rows) expect(r.column_default).toBe('retain_uuid_v7()');
  });

  it('a stored row gets a version-7 uuid stamped with the time it was written, later rows sorting after', async () => {
    const before = Date.now();
    const first: { id: string }[] = await scratch.db.query(
      `INSERT INTO transactions (vid, merchant_id, submission_id, merchant_txn_id, status, review_status, amount_minor,
         currency, failed_at, submitted_ts, status_changed_at, division_number, auth_code, subscription_id, account_id,
         account, subscription, payment_method, card_kind, attempt_count)
       SELECT md5('v7' || g || clock_timestamp()), $1, $2, 'v7_' || g, 'Captured', 'passed', 1000, 'USD', now(), now(),
         now(), 'd', '05', 'v7s' || g, 'v7a' || g, '{}'::jsonb, '{}'::jsonb, '{}'::jsonb, 'pan', 1
       FROM generate_series(1, 200) AS g RETURNING id`,
      [scratch.merchantId, scratch.submissionId],
    );
    await new Promise((r) => setTimeout(r, 5));
    const [later] = await scratch.db.query(`SELECT retain_uuid_v7()::text AS id`);
    const after = Date.now();
    for (const { id } of first) {
      // RFC 9562: version nibble 7, variant bits 10.
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      // Postgres' clock and Node's are the same machine's here; a little slack for rounding.
      expect(msOf(id)).toBeGreaterThanOrEqual(before - 1000);
      expect(msOf(id)).toBeLessThanOrEqual(after + 1000);
    }
    expect(new Set(first.map((r) => r.id)).size).toBe(200);
    const maxFirst = first
      .map((r) => r.id)
      .sort()
      .at(-1)!;
    expect(later.id > maxFirst).toBe(true);
  });
});
