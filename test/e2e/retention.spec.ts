import {
  ApiClient,
  WebhookReceiver,
  createMerchant,
  insertMerchantRow,
  insertTransactionRow,
  startApp,
  testDb,
  txn,
  usePrivateDatabase,
  waitFor,
  type RunningApp,
} from '@retain/testing';
import { SANDBOX_APPROVED_CARD } from '@retain/processor';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

// Retention sweeps a whole database: this file runs on a private one (and a private queue
// prefix), so its one-second windows never reach another file's rows.
const ENV = {
  RETRY_TIME_SCALE: '100000',
  JOB_LOCK_MS: '2000',
  REFUND_BATCH_CRON: '*/1 * * * * *',
  RETENTION_INTERVAL: '500ms',
  CARD_DATA_ERASE_AFTER: '1s',
  OUTBOX_RETENTION: '1s',
  WEBHOOK_RETENTION: '1h',
  SANDBOX_LEDGER_RETENTION: '1h',
};

describe('retention through the real apps: erased card data, and reads and refunds that still work', () => {
  usePrivateDatabase('ret');
  const apps: RunningApp[] = [];
  let client: ApiClient;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    apps.push(
      ...(await Promise.all([
        startApp('intake-api', { env: ENV }),
        startApp('submission-validator', { env: ENV }),
        startApp('retry-worker', { env: ENV }),
        startApp('refund-batcher', { env: ENV }),
        startApp('webhook-dispatcher', { env: ENV }),
      ])),
    );
    const merchant = await createMerchant(receiver.url);
    client = new ApiClient(apps[0]!.url, merchant.api_key);
  });
  afterAll(async () => {
    for (const a of apps) await a.stop();
    await receiver?.stop();
  });

  const related = async (id: string) =>
    (await client.request('GET', `/v1/retain/transactions/${id}?related=true`)).json.data as Record<string, any>[];

  it(
    'a recovered transaction loses its card data after the window; it still reads the same and refunds',
    { timeout: 120_000 },
    async () => {
      const t = txn({ amount: 12.5 });
      const id = t['id'] as string;
      expect((await client.submit([t])).status).toBe(200);
      await waitFor(async () => ['Captured', 'Settled'].includes((await related(id))[0]?.status), {
        timeoutMs: 60_000,
        what: 'Captured',
      });
      const db = await testDb();
      const row = async () =>
        (
          await db.query(
            `SELECT card_enc, card_jwe, card_hmac, card_last4, card_erased_at FROM transactions
              WHERE merchant_txn_id = $1`,
            [id],
          )
        )[0];
      const heldBefore = await row();
      expect(heldBefore.card_hmac).toMatch(/^[0-9a-f]{64}$/);
      const erased = await waitFor(async () => ((await row()).card_erased_at ? row() : null), {
        timeoutMs: 30_000,
        what: 'card data erased',
      });
      expect(erased).toMatchObject({ card_enc: null, card_jwe: null, card_hmac: heldBefore.card_hmac });

      // The card number is nowhere in the service's database (every row of every table).
      const tables: { table_name: string }[] = await db.query(
        `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`,
      );
      for (const { table_name } of tables) {
        const [{ n }] = await db.query(`SELECT count(*)::int AS n FROM "${table_name}" x WHERE x::text LIKE $1`, [
          `%${SANDBOX_APPROVED_CARD}%`,
        ]);
        expect(n, table_name).toBe(0);
      }
      // The sealed value is gone too: nothing left to decrypt for this transaction.
      const [{ sealed }] = await db.query(
        `SELECT count(*)::int AS sealed FROM transactions WHERE merchant_txn_id = $1
            AND (card_enc IS NOT NULL OR card_jwe IS NOT NULL OR cryptogram IS NOT NULL)`,
        [id],
      );
      expect(sealed).toBe(0);

      // Reads show the same masked card; a refund still goes through (it names the processor's charge).
      const [submitted, attempt] = await related(id);
      expect(JSON.stringify(submitted)).toContain(heldBefore.card_last4);
      expect(attempt).toMatchObject({ status: 'Captured' });
      expect((await client.request('POST', '/v1/retain/refunds', { refunds: [{ id }] })).status).toBe(200);
      await waitFor(async () => (await related(id))[0]?.status === 'Refunded', { timeoutMs: 30_000, what: 'Refunded' });
      await waitFor(() => receiver.byEvent('refund completed').find((p) => p.body.header['transaction_id'] === id));
      // Completed outbox rows past OUTBOX_RETENTION are gone; none is left open.
      await waitFor(
        async () =>
          (await db.query(`SELECT count(*)::int AS n FROM outbox WHERE completed_at < now() - interval '2 seconds'`))[0]
            .n === 0,
        { timeoutMs: 15_000, what: 'old outbox rows deleted' },
      );
    },
  );
});

describe('retention at a retry worker start: a pod restarted more often than RETENTION_INTERVAL still sweeps', () => {
  usePrivateDatabase('ret1');
  let worker: RunningApp | undefined;
  afterAll(async () => {
    await worker?.stop();
  });

  it(
    'the first sweep runs seconds after start, not one interval later: old outbox rows go, ended card data is erased',
    { timeout: 90_000 },
    async () => {
      const db = await testDb();
      const merchantId = await insertMerchantRow(db);
      // A Cancelled transaction whose recovery ended 200 days ago, and an outbox row completed 8 days ago.
      const t = await insertTransactionRow(db, merchantId, { status: 'Cancelled' });
      await db.query(
        `UPDATE transactions SET status_changed_at = now() - interval '200 days', next_attempt_at = NULL WHERE id = $1`,
        [t.id],
      );
      const [{ id: outboxId }] = await db.query(
        `INSERT INTO outbox (queue, job_name, payload, published_at, completed_at, created_at)
         VALUES ('retry-attempt', 'x', '{"v":1}', now() - interval '8 days', now() - interval '8 days',
                 now() - interval '8 days') RETURNING id`,
      );
      // The defaults' retentions (7 d, 180 d) and interval (1 h): only the first sweep can take them in time.
      worker = await startApp('retry-worker', { env: { RETENTION_FIRST_SWEEP_DELAY: '1s' } });
      const swept = async () => {
        const [row] = await db.query(
          `SELECT (SELECT card_erased_at IS NOT NULL FROM transactions WHERE id = $1) AS erased,
                  NOT EXISTS (SELECT 1 FROM outbox WHERE id = $2) AS deleted`,
          [t.id, outboxId],
        );
        return row.erased && row.deleted ? row : null;
      };
      expect(await waitFor(swept, { timeoutMs: 20_000, what: 'the first sweep' })).toEqual({
        erased: true,
        deleted: true,
      });
      expect((await db.query(`SELECT card_enc FROM transactions WHERE id = $1`, [t.id]))[0].card_enc).toBeNull();
    },
  );
});
