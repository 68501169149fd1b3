import { loadConfig, type RetainConfig } from '@retain/config';
import {
  AttemptEntity,
  AttemptsRepository,
  TransactionEntity,
  WebhookMessagesRepository,
  attemptView,
  chargedPaymentMethodFields,
  createDataSource,
  dropDatabase,
  MIGRATIONS,
  migrate,
  revertLast,
  transactionView,
} from '@retain/db';
import { EventName } from '@retain/domain';
import { RetainMetrics } from '@retain/platform';
import {
  PgSandboxLedger,
  SANDBOX_UPDATER_NEW_EXPIRY_CARD,
  SandboxAccountUpdater,
  SandboxProcessor,
  sandboxUpdateKey,
} from '@retain/processor';
import { announce } from '@retain/queues';
import { announceTransaction } from '@retain/recovery';
import {
  closeTestDb,
  insertAttemptRow,
  insertMerchantRow,
  insertRefundRow,
  insertTransactionRow,
  testDb,
} from '@retain/testing';
import { createHash, randomBytes } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RetentionService } from '../src/retention/retention.service';

const DAY = 86_400_000;
// The sweep runs "on" 2002-01-01 with every retention at one day: rows dated 2001-06 are past it,
// rows dated 2001-12-31 12:00 are not. Every other test file's rows are from today: untouched.
const NOW = new Date('2002-01-01T00:00:00Z');
const OLD = new Date('2001-06-01T00:00:00Z');
const RECENT = new Date('2001-12-31T12:00:00Z');
/** A Luhn-valid Visa number of this run only, so a search for it finds nothing of other files. */
function uniqueCard(): string {
  const body = `4${Array.from(randomBytes(14), (b) => b % 10).join('')}`;
  let sum = 0;
  for (let k = 0; k < body.length; k++) {
    let d = Number(body[body.length - 1 - k]);
    if (k % 2 === 0) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return body + ((10 - (sum % 10)) % 10);
}
const CARD = uniqueCard();

describe('retention sweep: what it deletes and erases, and what it never touches', () => {
  let db: DataSource;
  let sweep: RetentionService;
  let metrics: RetainMetrics;
  let merchantId: string;

  beforeAll(async () => {
    db = await testDb();
    const config: RetainConfig = {
      ...loadConfig('retry-worker'),
      retention: {
        intervalMs: 3_600_000,
        firstSweepDelayMs: 10_000,
        outboxMs: DAY,
        webhooksMs: DAY,
        sandboxLedgerMs: DAY,
        cardDataMs: DAY,
      },
    };
    metrics = new RetainMetrics('retry-worker');
    sweep = new RetentionService(db, metrics, config);
    merchantId = await insertMerchantRow(db);
  });
  afterAll(async () => {
    // The pushes and outbox rows written here are not for other files' dispatchers and sweepers.
    await db.query(`DELETE FROM webhook_messages WHERE merchant_id = $1`, [merchantId]);
    // Unknown attempts made up here would be looked up, and raise the alert gauge, in other files.
    await db.query(`UPDATE attempts SET state = 'declined', processed_at = now() WHERE merchant_id = $1`, [merchantId]);
    await db.query(`DELETE FROM outbox WHERE id = ANY($1::uuid[])`, [outboxIds]);
    await closeTestDb();
  });

  const outboxIds: string[] = [];
  const outboxRow = async (completedAt: Date | null): Promise<string> => {
    const [{ id }] = await db.query(
      // An open row is marked failed for good, so no sweeper of another test file re-publishes it.
      `INSERT INTO outbox (queue, job_name, payload, published_at, completed_at, failed_at, created_at)
       VALUES ('retry-attempt', 'x', '{"v":1}', $2, $1, CASE WHEN $1::timestamptz IS NULL THEN $2::timestamptz END, $2)
       RETURNING id`,
      [completedAt, OLD],
    );
    outboxIds.push(id);
    return id;
  };
  const message = async (status: string, at: Date): Promise<string> => {
    const id = `msg_${randomBytes(12).toString('hex')}`.slice(0, 27);
    await db.query(
      `INSERT INTO webhook_messages (message_id, merchant_id, event_name, payload_id, body, status, delivered_at, dead_at,
         created_at, updated_at)
       VALUES ($1, $2, 'retry failed', 'p', '{"email":"someone@example.com"}', $3,
               CASE WHEN $3::varchar = 'delivered' THEN $4::timestamptz END, CASE WHEN $3::varchar = 'dead' THEN $4::timestamptz END, $4, $4)`,
      [id, merchantId, status, at],
    );
    await db.query(
      `INSERT INTO webhook_deliveries (message_id, attempt, attempted_at, url, status_code, latency_ms)
       VALUES ($1, 1, $2, 'https://example.com/hook', 200, 12)`,
      [id, at],
    );
    return id;
  };
  const ledgerOp = async (key: string, kind: string, at: Date): Promise<void> => {
    await db.query(
      `INSERT INTO sandbox_operations (idempotency_key, kind, result, created_at) VALUES ($1, $2, '{}', $3)`,
      [key, kind, at],
    );
  };
  const exists = async (sql: string, params: unknown[]): Promise<boolean> =>
    (await db.query(`SELECT EXISTS (${sql}) AS e`, params))[0].e;
  const ended = async (status: string, changedAt: Date, card = CARD) => {
    const t = await insertTransactionRow(db, merchantId, { card, status });
    await db.query(
      `UPDATE transactions SET status_changed_at = $2, card_jwe = 'eyJhbGciOi.jwe.of.the.card', next_attempt_at = NULL
        WHERE id = $1`,
      [t.id, changedAt],
    );
    return t;
  };
  const cardColumns = async (id: string) =>
    (
      await db.query(
        `SELECT card_enc, card_jwe, cryptogram, account_update_jwe, card_hmac, card_bin, card_last4, expiration_date,
                card_erased_at FROM transactions WHERE id = $1`,
        [id],
      )
    )[0];

  it('outbox: completed rows past retention go; open rows and recent ones stay', async () => {
    const old = await outboxRow(OLD);
    const open = await outboxRow(null);
    const recent = await outboxRow(RECENT);
    const done = await sweep.sweep(NOW);
    expect(done.outbox).toBeGreaterThanOrEqual(1);
    expect(await exists(`SELECT 1 FROM outbox WHERE id = $1`, [old])).toBe(false);
    expect(await exists(`SELECT 1 FROM outbox WHERE id = $1`, [open])).toBe(true);
    expect(await exists(`SELECT 1 FROM outbox WHERE id = $1`, [recent])).toBe(true);
  });

  it("processor notifications: acted on past the outbox's retention go; unprocessed and recent ones stay", async () => {
    const [{ id: accountId }] = await db.query(`SELECT gen_random_uuid() AS id`);
    const notification = async (processedAt: Date | null, receivedAt: Date): Promise<string> => {
      const [{ id }] = await db.query(
        `INSERT INTO processor_notifications (processor, merchant_id, account_id, merchant_account_code, event_code,
           success, psp_reference, amount_value, currency, live, received_at, processed_at)
         VALUES ('adyen', $1, $2, 'RetainTest', 'AUTHORISATION', true, $3, 1999, 'EUR', false, $4, $5) RETURNING id`,
        [merchantId, accountId, `psp_${randomBytes(6).toString('hex')}`, receivedAt, processedAt],
      );
      return id;
    };
    const old = await notification(OLD, OLD);
    const unprocessed = await notification(null, OLD);
    const recent = await notification(RECENT, RECENT);
    const done = await sweep.sweep(NOW);
    expect(done.processor_notifications).toBeGreaterThanOrEqual(1);
    const kept = async (id: string) => exists(`SELECT 1 FROM processor_notifications WHERE id = $1`, [id]);
    expect({ old: await kept(old), unprocessed: await kept(unprocessed), recent: await kept(recent) }).toEqual({
      old: false,
      unprocessed: true,
      recent: true,
    });
  });

  it('portal sessions: expired ones (12 h after login, 30 min idle, by the database clock) go; live ones stay', async () => {
    // Aged as the session's own expiry reads them (PortalSessionsRepository.resume): against now().
    const session = async (age: string, idle: string): Promise<string> => {
      const hash = randomBytes(32).toString('hex');
      await db.query(
        `INSERT INTO portal_sessions (token_hash, merchant_id, created_at, last_seen_at)
         VALUES ($1, $2, now() - $3::interval, now() - $4::interval)`,
        [hash, merchantId, age, idle],
      );
      return hash;
    };
    const tooOld = await session('12 hours 1 minute', '1 minute');
    const idle = await session('1 hour', '31 minutes');
    const live = await session('11 hours 58 minutes', '29 minutes');
    const done = await sweep.sweep(NOW);
    const kept = async (hash: string) => exists(`SELECT 1 FROM portal_sessions WHERE token_hash = $1`, [hash]);
    expect({ tooOld: await kept(tooOld), idle: await kept(idle), live: await kept(live) }).toEqual({
      tooOld: false,
      idle: false,
      live: true,
    });
    expect(done.portal_sessions).toBeGreaterThanOrEqual(2);
    const metric = await metrics.registry.getSingleMetricAsString('retain_retention_rows_total');
    expect(metric).toMatch(/kind="portal_sessions"[^}]*} [1-9]/);
  });

  it('an attempt settled as not charged long ago does not hold the card data for ever (its late-capture watch ended)', async () => {
    // A processor error settled as "not charged" (state error, lookup_after set), then a capture.
    const t = await ended('Captured', OLD);
    const settled = await insertAttemptRow(db, t, { state: 'error', preparedAt: OLD, processedAt: OLD });
    await db.query(`UPDATE attempts SET lookup_after = $2 WHERE id = $1`, [settled.id, OLD]);
    await insertAttemptRow(db, t, { retryNumber: 2, state: 'captured', preparedAt: OLD, processedAt: OLD });
    await ledgerOp(settled.vid, 'charge', OLD);
    // One settled within the watch (24 h before the sweep) still holds its transaction's card and ledger row.
    const watched = await ended('Cancelled', OLD);
    const late = await insertAttemptRow(db, watched, { state: 'error', preparedAt: RECENT, processedAt: RECENT });
    await db.query(`UPDATE attempts SET lookup_after = $2 WHERE id = $1`, [late.id, RECENT]);
    await ledgerOp(late.vid, 'charge', OLD);
    await sweep.sweep(NOW);
    expect((await cardColumns(t.id)).card_enc).toBeNull();
    expect(await exists(`SELECT 1 FROM sandbox_operations WHERE idempotency_key = $1`, [settled.vid])).toBe(false);
    expect((await cardColumns(watched.id)).card_enc).not.toBeNull();
    expect(await exists(`SELECT 1 FROM sandbox_operations WHERE idempotency_key = $1`, [late.vid])).toBe(true);
  });

  it('push messages: delivered, gone (410) and endpoint-less ones past retention go with their delivery logs; pending and dead ones stay', async () => {
    const delivered = await message('delivered', OLD);
    const dead = await message('dead', OLD);
    const gone410 = await message('gone', OLD);
    const noEndpoint = await message('no_endpoint', OLD);
    const pending = await message('pending', OLD);
    const recent = await message('delivered', RECENT);
    const recentGone = await message('gone', RECENT);
    await sweep.sweep(NOW);
    for (const gone of [delivered, gone410, noEndpoint]) {
      expect(await exists(`SELECT 1 FROM webhook_messages WHERE message_id = $1`, [gone])).toBe(false);
      expect(await exists(`SELECT 1 FROM webhook_deliveries WHERE message_id = $1`, [gone])).toBe(false);
    }
    // decisions §9: a message that runs out of attempts "is kept as dead and can be replayed".
    for (const kept of [pending, recent, recentGone, dead]) {
      expect(await exists(`SELECT 1 FROM webhook_messages WHERE message_id = $1`, [kept])).toBe(true);
    }
  });

  it('refund idempotency keys: answered for 24 h, then gone', async () => {
    const key = async (k: string, at: Date) =>
      db.query(
        `INSERT INTO refund_idempotency_keys (merchant_id, key, request_hash, status_code, response, created_at)
         VALUES ($1, $2, repeat('0', 64), 200, '{}', $3)`,
        [merchantId, k, at],
      );
    await key('old-key', new Date(NOW.getTime() - 25 * 3_600_000));
    await key('fresh-key', new Date(NOW.getTime() - 23 * 3_600_000));
    await sweep.sweep(NOW);
    const keys = await db.query(`SELECT key FROM refund_idempotency_keys WHERE merchant_id = $1 ORDER BY key`, [
      merchantId,
    ]);
    expect(keys.map((r: { key: string }) => r.key)).toEqual(['fresh-key']);
  });

  it('sandbox ledger: old operations go, except what an unresolved attempt or an open refund still looks up', async () => {
    const t = await ended('Cancelled', OLD);
    const settled = await insertAttemptRow(db, t, { state: 'declined', processedAt: OLD });
    const unknown = await insertAttemptRow(db, t, { state: 'unknown', retryNumber: 2, preparedAt: OLD });
    const refundId = await insertRefundRow(db, t, 'refund', '100');
    const [{ vid: refundVid }] = await db.query(`SELECT vid FROM refunds WHERE id = $1`, [refundId]);
    await ledgerOp(settled.vid, 'charge', OLD);
    await ledgerOp(unknown.vid, 'charge', OLD);
    await ledgerOp(refundVid, 'refund', OLD);
    await ledgerOp(`recent_${randomBytes(4).toString('hex')}`, 'charge', RECENT);
    await sweep.sweep(NOW);
    const held = async (key: string) => exists(`SELECT 1 FROM sandbox_operations WHERE idempotency_key = $1`, [key]);
    expect(await held(settled.vid)).toBe(false);
    expect(await held(unknown.vid)).toBe(true);
    expect(await held(refundVid)).toBe(true);
  });

  it("sandbox ledger: the sandbox account updater's renewals stay, so a renewed card is still approved after SANDBOX_LEDGER_RETENTION", async () => {
    const ledger = new PgSandboxLedger(db);
    // An expiry of this test only: the updater renews 4000000000000341 (decisions §15) three years on.
    const renewal = await new SandboxAccountUpdater(ledger).lookup(
      { pan: SANDBOX_UPDATER_NEW_EXPIRY_CARD, expiration: '209901' },
      new Date(),
    );
    expect(renewal).toEqual({ kind: 'updated', pan: SANDBOX_UPDATER_NEW_EXPIRY_CARD, expiration: '210201' });
    await db.query(`UPDATE sandbox_operations SET created_at = $2 WHERE idempotency_key = $1`, [
      sandboxUpdateKey(SANDBOX_UPDATER_NEW_EXPIRY_CARD, '210201'),
      OLD,
    ]);
    await sweep.sweep(NOW);
    const charge = await new SandboxProcessor(ledger).charge({
      idempotencyKey: `ret_${randomBytes(8).toString('hex')}`,
      attemptNumber: 1,
      amountMinor: 1000n,
      currency: 'USD',
      instrument: { kind: 'pan', pan: SANDBOX_UPDATER_NEW_EXPIRY_CARD, expiration: '210201' },
      originalResponseCode: '51',
      divisionNumber: 'd',
      at: new Date(),
    });
    expect(charge).toMatchObject({ outcome: 'approved', responseCode: '00' });
  });

  it('card data: erased once the recovery ended and the refund window passed; the fingerprint and masked fields stay', async () => {
    // A card of this test only: other tests' rows that keep their card data hold CARD's hash.
    const card = uniqueCard();
    const cancelled = await ended('Cancelled', OLD, card);
    // Declined within the networks' counting windows, so the card history below must still find it.
    const declined = await insertAttemptRow(db, cancelled, {
      state: 'declined',
      processedAt: new Date(),
      responseCode: '05',
    });
    // The attempt's view of its payment method, as markInFlight stores it (with an updater's JWE).
    const hash = createHash('sha1').update(card).digest('hex');
    const updateJwe = `eyJhbGciOiJSU0EtT0FFUC0yNTYifQ.update.${randomBytes(6).toString('hex')}`;
    await db.query(
      `UPDATE attempts SET payment_method_view = jsonb_build_object('payment_method', jsonb_build_object('id', 'pm_1',
         'credit_card', jsonb_build_object('account', '411111******1111', 'account_hash', $2::text,
           'account_update_jwe', $3::text)), 'is_network_token', NULL, 'eci_indicator', NULL)
        WHERE id = $1`,
      [declined.id, hash, updateJwe],
    );
    const before = await cardColumns(cancelled.id);
    expect(before.card_enc).toMatch(/\S/);

    const done = await sweep.sweep(NOW);
    expect(done.card_data).toBeGreaterThanOrEqual(1);
    const after = await cardColumns(cancelled.id);
    expect(after).toMatchObject({
      card_enc: null,
      card_jwe: null,
      cryptogram: null,
      account_update_jwe: null,
      card_hmac: before.card_hmac,
      card_bin: before.card_bin,
      card_last4: before.card_last4,
      expiration_date: before.expiration_date,
    });
    expect(after.card_erased_at).not.toBeNull();
    // No copy of the card number or of its sealed form is left in any row of any table.
    const tables: { table_name: string }[] = await db.query(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`,
    );
    // Nor its unkeyed SHA-1 (account_hash): with the BIN and last four kept, it gives the number back in
    // under a second (about 10^5 Luhn-valid candidates); nor an account updater's JWE of a new number.
    for (const { table_name } of tables) {
      const [{ n }] = await db.query(
        `SELECT count(*)::int AS n FROM "${table_name}" x
          WHERE x::text LIKE $1 OR x::text LIKE $2 OR x::text LIKE $3 OR x::text LIKE $4`,
        [`%${card}%`, `%${before.card_enc}%`, `%${hash}%`, `%${updateJwe}%`],
      );
      expect(n, table_name).toBe(0);
    }
    // The network rules still count this card's attempts by its fingerprint.
    const history = await AttemptsRepository.cardHistory(db, merchantId, before.card_hmac, null, null);
    expect(history.length).toBeGreaterThanOrEqual(1);
    // The metric counts what was erased.
    const metric = await metrics.registry.getSingleMetricAsString('retain_retention_rows_total');
    expect(metric).toMatch(/kind="card_data"[^}]*} [1-9]/);
  });

  it("push messages of an erased transaction, whatever their status, show its card as its reads do: a dead one's replay sends that", async () => {
    const card = uniqueCard();
    const hash = createHash('sha1').update(card).digest('hex');
    const updateJwe = `eyJhbGciOiJSU0EtT0FFUC0yNTYifQ.update.${randomBytes(6).toString('hex')}`;
    const t = await ended('Cancelled', OLD, card);
    // As the review stores it: the masked number the reads show, and an account updater's JWE of a new number.
    await db.query(
      `UPDATE transactions SET account_update_jwe = $2, account_updated = true,
              payment_method = payment_method || jsonb_build_object('card_account_display', $3::text)
        WHERE id = $1`,
      [t.id, updateJwe, `${card.slice(0, 6)}******${card.slice(-4)}`],
    );
    const attempt = await insertAttemptRow(db, t, { state: 'declined', processedAt: OLD });
    // The pushes, as the services announce them while the card data is held: the transaction's
    // (retry failed) and an attempt's (its view of the payment method it charged, as markInFlight stores it).
    await db.transaction(async (m) => {
      const txn = await m.getRepository(TransactionEntity).findOneByOrFail({ id: t.id });
      expect(txn.accountHash).toBe(hash);
      const a = await m.getRepository(AttemptEntity).findOneByOrFail({ id: attempt.id });
      a.paymentMethodView = chargedPaymentMethodFields(txn);
      await m.query(`UPDATE attempts SET payment_method_view = $2 WHERE id = $1`, [a.id, a.paymentMethodView]);
      outboxIds.push(...(await announceTransaction(m, txn, EventName.RetryFailed, OLD, 3)));
      outboxIds.push(
        ...(await announce(m, [
          {
            merchantId,
            eventName: EventName.RetrySucceeded,
            payloadId: a.vid,
            merchantTransactionId: txn.merchantTxnId,
            transactionRowId: txn.id,
            content: attemptView(txn, a),
            occurredAt: OLD,
          },
        ])),
      );
    });
    const ids: string[] = (
      await db.query(`SELECT message_id FROM webhook_messages WHERE transaction_id = $1 ORDER BY event_name, id`, [
        t.id,
      ])
    ).map((r: { message_id: string }) => r.message_id);
    expect(ids).toHaveLength(4);
    expect(
      JSON.stringify(await db.query(`SELECT body FROM webhook_messages WHERE transaction_id = $1`, [t.id])),
    ).toContain(hash);
    // Retry failed: one dead (kept for replay), one pending, one delivered within WEBHOOK_RETENTION; retry succeeded dead.
    const [dead, pending, delivered] = ids.slice(0, 3);
    const setStatus = (id: string, status: string) =>
      db.query(
        `UPDATE webhook_messages SET status = $2::varchar, next_attempt_at = CASE WHEN $2::varchar = 'pending' THEN $3::timestamptz END,
                delivered_at = CASE WHEN $2::varchar = 'delivered' THEN $3::timestamptz END,
                dead_at = CASE WHEN $2::varchar = 'dead' THEN $3::timestamptz END, updated_at = $3::timestamptz
          WHERE message_id = $1`,
        [id, status, status === 'delivered' ? RECENT : OLD],
      );
    await setStatus(dead!, 'dead');
    await setStatus(pending!, 'pending');
    await setStatus(delivered!, 'delivered');
    await setStatus(ids[3]!, 'dead');

    await sweep.sweep(NOW);
    expect((await cardColumns(t.id)).card_erased_at).not.toBeNull();
    // What the reads show now: the transaction's GET, and its attempt's.
    const txn = await db.getRepository(TransactionEntity).findOneByOrFail({ id: t.id });
    const a = await db.getRepository(AttemptEntity).findOneByOrFail({ id: attempt.id });
    const shown = transactionView(txn).payment_method as { credit_card: Record<string, unknown> };
    expect(shown.credit_card).toMatchObject({
      account_hash: null,
      account: `${card.slice(0, 6)}******${card.slice(-4)}`,
    });
    expect(shown.credit_card).not.toHaveProperty('account_update_jwe');
    expect(attemptView(txn, a).payment_method).toEqual(shown);
    const bodies: { message_id: string; status: string; body: { content: { payment_method: unknown } } }[] =
      await db.query(`SELECT message_id, status, body FROM webhook_messages WHERE transaction_id = $1`, [t.id]);
    expect(bodies.map((b) => b.status).sort()).toEqual(['dead', 'dead', 'delivered', 'pending']);
    for (const b of bodies) expect(b.body.content.payment_method, b.status).toEqual(shown);
    // Neither the hash nor the updater's JWE is left in any push, attempt or delivery log.
    for (const table of ['webhook_messages', 'webhook_deliveries', 'attempts', 'transactions']) {
      const [{ n }] = await db.query(
        `SELECT count(*)::int AS n FROM ${table} x WHERE x::text LIKE $1 OR x::text LIKE $2`,
        [`%${hash}%`, `%${updateJwe}%`],
      );
      expect(n, table).toBe(0);
    }
    // An operator replays the dead push: the body the dispatcher claims, signs and sends is the erased one.
    const pushes = new WebhookMessagesRepository(db);
    expect(await pushes.replay(dead!)).toBe(true);
    const { rows } = await pushes.claimNextDue(100, 60);
    const replayed = rows.find((r) => r.message_id === dead);
    expect((replayed?.body.content as { payment_method: unknown }).payment_method).toEqual(shown);
  });

  it("a tokenized or masked card's hash (the merchant's, beside the BIN and last four) is erased too, once", async () => {
    // Sent as a token or masked with its account_hash: no sealed number, JWE, cryptogram or updater JWE.
    const rows = [];
    for (const kind of ['token', 'masked']) {
      const card = uniqueCard();
      const t = await ended('Cancelled', OLD, card);
      await db.query(
        `UPDATE transactions SET card_kind = $2, card_enc = NULL, card_key_id = NULL, card_jwe = NULL, cryptogram = NULL
          WHERE id = $1`,
        [t.id, kind],
      );
      rows.push({ t, hash: createHash('sha1').update(card).digest('hex') });
    }
    // The customer's payment method of the token card, last seen long ago.
    const [{ id: pm }] = await db.query(
      `INSERT INTO payment_methods (vid, merchant_id, account_id, pm_id, card_kind, card_hmac, card_bin, card_last4,
         account_hash, payment_method, last_seen_at)
       SELECT $2, merchant_id, account_id, 'pm_tok', card_kind, card_hmac, card_bin, card_last4, account_hash,
              payment_method, $3
         FROM transactions WHERE id = $1 RETURNING id`,
      [rows[0]!.t.id, `pm${randomBytes(8).toString('hex')}`, OLD],
    );
    const row = async (id: string) =>
      (
        await db.query(
          `SELECT account_hash, card_bin, card_last4, card_hmac, card_erased_at FROM transactions WHERE id = $1`,
          [id],
        )
      )[0];
    for (const { t, hash } of rows) expect((await row(t.id)).account_hash).toBe(hash);

    await sweep.sweep(NOW);
    const erased = [];
    for (const { t } of rows) {
      const r = await row(t.id);
      expect(r, t.id).toMatchObject({ account_hash: null, card_erased_at: expect.any(Date) });
      expect(r.card_last4).toMatch(/^\d{4}$/); // the masked fields stay
      erased.push(r.card_erased_at.getTime());
    }
    const pmRow = async () =>
      (await db.query(`SELECT account_hash, card_erased_at FROM payment_methods WHERE id = $1`, [pm]))[0];
    expect(await pmRow()).toMatchObject({ account_hash: null, card_erased_at: expect.any(Date) });
    const pmErased = (await pmRow()).card_erased_at.getTime();
    // Erased once: the next sweep does not take them again.
    await sweep.sweep(NOW);
    expect(await Promise.all(rows.map(async ({ t }) => (await row(t.id)).card_erased_at.getTime()))).toEqual(erased);
    expect((await pmRow()).card_erased_at.getTime()).toBe(pmErased);
  });

  it('a kind whose sweep fails does not stop the others: card data is still erased', async () => {
    // OUTBOX_RETENTION as builds before its upper bound took it: "now" minus it is a date Postgres refuses
    // (timestamp out of range), so the outbox kind, swept first, fails on every run.
    const base = loadConfig('retry-worker');
    const broken = new RetentionService(db, new RetainMetrics('retry-worker'), {
      ...base,
      retention: { ...base.retention, outboxMs: 9_999_999 * DAY, sandboxLedgerMs: DAY, cardDataMs: DAY },
    });
    const old = await outboxRow(OLD);
    const t = await ended('Cancelled', OLD, uniqueCard());
    const done = await broken.sweep(NOW);
    expect({ outbox: done.outbox, card_data: done.card_data >= 1 }).toEqual({ outbox: 0, card_data: true });
    expect(await exists(`SELECT 1 FROM outbox WHERE id = $1`, [old])).toBe(true);
    expect(await cardColumns(t.id)).toMatchObject({ card_enc: null, card_jwe: null, card_erased_at: expect.any(Date) });
  });

  it('card data stays while anything may still need it', async () => {
    const recent = await ended('Cancelled', RECENT); // inside the refund window
    const inRetry = await ended('In Retry', OLD); // still being recovered
    const unknown = await ended('Cancelled', OLD); // an attempt whose charge is not known
    await insertAttemptRow(db, unknown, { state: 'unknown', preparedAt: OLD });
    const refunding = await ended('Captured', OLD); // a refund still to send
    await insertRefundRow(db, refunding, 'refund', '100');
    const stopping = await ended('Stop Requested', OLD);
    await db.query(`UPDATE transactions SET stop_requested_at = $2 WHERE id = $1`, [stopping.id, OLD]);
    await sweep.sweep(NOW);
    for (const t of [recent, inRetry, unknown, refunding, stopping]) {
      const c = await cardColumns(t.id);
      expect(c.card_enc, t.id).toMatch(/\S/);
      expect(c.card_erased_at).toBeNull();
    }
  });

  it('card data of a stop that ended is erased too: stop_requested_at stays on the row as history', async () => {
    // Stopped (nothing charged), and a stop whose in-flight attempt captured and was then refunded.
    const stopped = await ended('Stopped', OLD);
    const refunded = await ended('Refunded', OLD);
    await db.query(`UPDATE transactions SET stop_requested_at = $2 WHERE id = ANY($1::uuid[])`, [
      [stopped.id, refunded.id],
      OLD,
    ]);
    await sweep.sweep(NOW);
    for (const t of [stopped, refunded]) {
      const c = await cardColumns(t.id);
      expect(c, t.id).toMatchObject({ card_enc: null, card_jwe: null, card_erased_at: expect.any(Date) });
    }
  });

  /**
   * A customer (account) with a Cancelled and an In Retry transaction, and a payment method last seen
   * long ago holding the Cancelled one's sealed card (ended at `endedAt`, or not ended).
   */
  const customerWithPaymentMethod = async ({ endedAt }: { endedAt: Date | null }) => {
    const account = `acct_${randomBytes(4).toString('hex')}`;
    const t = await ended('Cancelled', OLD);
    const live = await ended('In Retry', OLD);
    await db.query(`UPDATE transactions SET account_id = $2 WHERE id = ANY($1::uuid[])`, [[t.id, live.id], account]);
    const [{ id: pm }] = await db.query(
      `INSERT INTO payment_methods (vid, merchant_id, account_id, pm_id, card_kind, card_enc, card_key_id, card_hmac,
         payment_method, last_seen_at, ended_at, ended_reason)
       SELECT $2, merchant_id, $3, 'pm_1', card_kind, card_enc, card_key_id, card_hmac, payment_method, $4, $5,
              CASE WHEN $5::timestamptz IS NOT NULL THEN 'account updater: Account closed' END
         FROM transactions WHERE id = $1 RETURNING id`,
      [t.id, `pm${randomBytes(8).toString('hex')}`, account, OLD, endedAt],
    );
    return { live, pm: pm as string };
  };

  it("payment methods: erased once none of the customer's transactions is being recovered", async () => {
    const { live, pm } = await customerWithPaymentMethod({ endedAt: null });
    const pmCard = async () =>
      (await db.query(`SELECT card_enc, card_erased_at FROM payment_methods WHERE id = $1`, [pm]))[0];
    await sweep.sweep(NOW);
    expect((await pmCard()).card_enc).toMatch(/\S/); // the account's other transaction may fall back to it
    await db.query(`UPDATE transactions SET status = 'Cancelled', status_changed_at = $2 WHERE id = $1`, [
      live.id,
      OLD,
    ]);
    await sweep.sweep(NOW);
    expect(await pmCard()).toMatchObject({ card_enc: null, card_erased_at: expect.any(Date) });
  });

  it('an ended payment method (never charged again) is erased even while its customer has a transaction in recovery', async () => {
    const { pm } = await customerWithPaymentMethod({ endedAt: OLD });
    await sweep.sweep(NOW);
    const [row] = await db.query(`SELECT card_enc, card_erased_at FROM payment_methods WHERE id = $1`, [pm]);
    expect(row).toMatchObject({ card_enc: null, card_erased_at: expect.any(Date) });
  });
});

describe('card data that earlier builds left on rows they had erased (migration ReEraseLegacyCardData)', () => {
  // A database of its own: migrated, ReEraseLegacyCardData and the newer ones reverted, rows seeded as an earlier build left
  // them, then migrated again as an upgrade does.
  const url = new URL(process.env['DATABASE_URL']!);
  url.pathname = `/retain_reerase_${randomBytes(4).toString('hex')}`;
  const scratch = url.toString();
  let db: DataSource;
  afterAll(async () => {
    if (db?.isInitialized) await db.destroy();
    await dropDatabase(scratch);
  });

  it('an upgrade erases the hash and updater JWE left on erased transactions, payment methods, attempts and pushes', async () => {
    await migrate(scratch);
    // Back to before ReEraseLegacyCardData (and every migration after it).
    const since = MIGRATIONS.findIndex((m) => m.name === 'ReEraseLegacyCardData1801000000000');
    for (let i = since; i < MIGRATIONS.length; i++) await revertLast(scratch);
    db = createDataSource(scratch, 2);
    await db.initialize();
    const merchantId = await insertMerchantRow(db);
    const leftovers: string[] = [];
    /**
     * A transaction Cancelled and erased long ago by a build that erased the sealed card only: its own
     * account_hash kept (`ownHash`, before the hash was erased) or not; its attempt's copy of the payment
     * method and its dead push still holding the hash and an updater's JWE.
     */
    const erasedEarlier = async (ownHash: boolean) => {
      const card = uniqueCard();
      const hash = createHash('sha1').update(card).digest('hex');
      const jwe = `eyJhbGciOiJSU0EtT0FFUC0yNTYifQ.update.${randomBytes(6).toString('hex')}`;
      leftovers.push(hash, jwe);
      const t = await insertTransactionRow(db, merchantId, { card, status: 'Cancelled' });
      await db.query(
        `UPDATE transactions SET card_enc = NULL, card_key_id = NULL, card_jwe = NULL, cryptogram = NULL,
                account_update_jwe = NULL, account_hash = CASE WHEN $2 THEN account_hash END,
                card_erased_at = now() - interval '100 days', status_changed_at = now() - interval '300 days',
                next_attempt_at = NULL
          WHERE id = $1`,
        [t.id, ownHash],
      );
      const card_ = {
        account: `${card.slice(0, 6)}******${card.slice(-4)}`,
        account_hash: hash,
        account_update_jwe: jwe,
      };
      const a = await insertAttemptRow(db, t, { state: 'declined', processedAt: OLD });
      await db.query(`UPDATE attempts SET payment_method_view = $2::jsonb WHERE id = $1`, [
        a.id,
        JSON.stringify({
          payment_method: { id: 'pm_1', credit_card: card_ },
          is_network_token: null,
          eci_indicator: null,
        }),
      ]);
      await db.query(
        `INSERT INTO webhook_messages (message_id, merchant_id, event_name, payload_id, transaction_id, body, status,
           dead_at, created_at, updated_at)
         VALUES ($1, $2, 'retry failed', 'p', $3, $4::jsonb, 'dead', $5, $5, $5)`,
        [
          `msg_${randomBytes(12).toString('hex')}`.slice(0, 27),
          merchantId,
          t.id,
          JSON.stringify({
            header: { event_name: 'retry failed' },
            content: { payment_method: { id: 'pm_1', credit_card: card_ } },
          }),
          OLD,
        ],
      );
      return { t, a, card_ };
    };
    const before4e = await erasedEarlier(true);
    const beforeB6 = await erasedEarlier(false);
    // A payment method erased with its hash kept.
    const [{ id: pm, account_hash: pmHash }] = await db.query(
      `INSERT INTO payment_methods (vid, merchant_id, account_id, pm_id, card_kind, card_hmac, card_bin, card_last4,
         account_hash, expiration_date, payment_method, last_seen_at, card_erased_at)
       SELECT $2, merchant_id, account_id, 'pm_1', card_kind, card_hmac, card_bin, card_last4, account_hash,
              expiration_date, payment_method, now() - interval '300 days', now() - interval '100 days'
         FROM transactions WHERE id = $1 RETURNING id, account_hash`,
      [before4e.t.id, `pm${randomBytes(8).toString('hex')}`],
    );
    expect(pmHash).toMatch(/^[0-9a-f]{40}$/);
    const rowsOf = async () => ({
      transactions: await db.query(
        `SELECT account_hash, card_bin, card_last4, card_hmac, expiration_date, card_erased_at FROM transactions
          WHERE id = ANY($1::uuid[]) ORDER BY id`,
        [[before4e.t.id, beforeB6.t.id]],
      ),
      payment_method: (
        await db.query(`SELECT account_hash, card_last4, card_erased_at FROM payment_methods WHERE id = $1`, [pm])
      )[0],
    });
    const seeded = await rowsOf();

    await migrate(scratch);
    // Neither the hash nor the updater's JWE is left in any row of any table.
    const tables: { table_name: string }[] = await db.query(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`,
    );
    const found: Record<string, number> = {};
    for (const { table_name } of tables) {
      const [{ n }] = await db.query(`SELECT count(*)::int AS n FROM "${table_name}" x WHERE x::text LIKE ANY($1)`, [
        leftovers.map((l) => `%${l}%`),
      ]);
      if (n > 0) found[table_name] = n;
    }
    expect(found).toEqual({});
    // As today's erasure leaves them: the masked fields, the fingerprint and the erasure's date stay.
    const after = await rowsOf();
    expect(after).toEqual({
      transactions: seeded.transactions.map((r: Record<string, unknown>) => ({ ...r, account_hash: null })),
      payment_method: { ...seeded.payment_method, account_hash: null },
    });
    for (const { a, card_ } of [before4e, beforeB6]) {
      const [{ view }] = await db.query(`SELECT payment_method_view AS view FROM attempts WHERE id = $1`, [a.id]);
      expect(view.payment_method.credit_card).toEqual({ account: card_.account, account_hash: null });
    }
    const bodies: { card: unknown }[] = await db.query(
      `SELECT body #> '{content,payment_method,credit_card}' AS card FROM webhook_messages WHERE merchant_id = $1
        ORDER BY body #>> '{content,payment_method,credit_card,account}'`,
      [merchantId],
    );
    expect(bodies.map((b) => b.card)).toEqual(
      [before4e.card_.account, beforeB6.card_.account].sort().map((account) => ({ account, account_hash: null })),
    );
  });
});
