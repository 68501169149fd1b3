import { EventName } from '@retain/domain';
import type { DataSource, EntityManager } from 'typeorm';

/**
 * The limit on the test pushes a merchant asks for (event_name 'test': `POST /v1/retain/merchant/webhook/test`,
 * or its replay of one): each counts while it is being delivered (pending) and for `windowSeconds` after it
 * was last touched (its last attempt, its end, a replay), and a merchant has at most `count` counting.
 */
export interface TestPushLimit {
  count: number;
  windowSeconds: number;
}

/** The advisory lock of one merchant's test pushes: one limit check at a time, across replicas. */
const testPushLockKey = (merchantId: string): string => `test-push:${merchantId}`;

/** A push message claimed for one delivery attempt. */
export interface ClaimedWebhookMessage {
  message_id: string;
  merchant_id: string;
  body: { header: Record<string, unknown>; content: unknown };
  /** With replay_count, names this claim: its result is recorded only while the message is still under it. */
  attempt_count: number;
  replay_count: number;
  /**
   * When the claim was made, by this process's clock (Date.now() taken before the claim statement): its
   * lease, counted by the database from within the statement, does not run out before claimed_at + lease.
   */
  claimed_at: number;
}

/** The claim a release hands back: the message under the claim it was handed out with. */
export type WebhookClaim = Pick<ClaimedWebhookMessage, 'message_id' | 'attempt_count' | 'replay_count'>;

/** The outcome of one delivery attempt, written with its delivery-log row. */
export interface WebhookAttemptRecord {
  message_id: string;
  /**
   * The claim this attempt was made under (the claim's attempt_count and replay_count): the message's new
   * state is written only while it is still under that claim. A replay since (a new generation) or a new
   * claim after the lease ran out makes this result stale: its delivery-log row is still written.
   */
  attempt_count: number;
  replay_count: number;
  /** The outbox row of the job that made this attempt, completed in the same statement. */
  outbox_id: string | null;
  /** null: no attempt was made (no endpoint), so no delivery-log row. */
  log: { attempt: number; attempted_at: string; url: string; latency_ms: number; error: string | null } | null;
  status: 'pending' | 'delivered' | 'gone' | 'dead' | 'no_endpoint';
  status_code: number | null;
  delay_ms: number | null;
  last_error: string | null;
}

/**
 * The pump's claim ($1 limit, $2 lease seconds, $3 merchants left out). A merchant's backlog cannot
 * hide the others' pushes behind it: merchants with pending messages are found by a skip scan of
 * webhook_messages_pending_merchant (one probe per merchant, however long its backlog), each one's
 * oldest due work by two probes, and its share taken from its own range of the per-merchant indexes.
 * The number of rows locked is the number claimed (no more than twice `limit`, as before).
 */
export const CLAIM_NEXT_DUE_SQL = `WITH RECURSIVE busy AS (
    (SELECT merchant_id FROM webhook_messages WHERE status = 'pending' ORDER BY merchant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT w.merchant_id FROM webhook_messages w
             WHERE w.status = 'pending' AND w.merchant_id > busy.merchant_id ORDER BY w.merchant_id LIMIT 1)
      FROM busy WHERE busy.merchant_id IS NOT NULL
  ), heads AS (
    SELECT b.merchant_id, LEAST(f.at, d.at) AS waiting_since
      FROM busy b
      LEFT JOIN LATERAL (SELECT w.created_at AS at FROM webhook_messages w
                          WHERE w.merchant_id = b.merchant_id AND w.status = 'pending' AND w.next_attempt_at IS NULL
                          ORDER BY w.created_at LIMIT 1) f ON true
      LEFT JOIN LATERAL (SELECT w.next_attempt_at AS at FROM webhook_messages w
                          WHERE w.merchant_id = b.merchant_id AND w.status = 'pending' AND w.next_attempt_at <= now()
                          ORDER BY w.next_attempt_at LIMIT 1) d ON true
     WHERE b.merchant_id IS NOT NULL AND b.merchant_id <> ALL($3::uuid[]) AND (f.at IS NOT NULL OR d.at IS NOT NULL)
     ORDER BY waiting_since LIMIT $1::int
  ), share AS (
    SELECT ceil($1::int / greatest(count(*), 1)::numeric)::int AS k FROM heads
  ), fresh AS (
    SELECT x.id FROM heads h CROSS JOIN share s CROSS JOIN LATERAL (
      SELECT w.id FROM webhook_messages w
       WHERE w.merchant_id = h.merchant_id AND w.status = 'pending' AND w.next_attempt_at IS NULL
       ORDER BY w.created_at LIMIT s.k FOR UPDATE SKIP LOCKED) x
  ), due AS (
    SELECT x.id FROM heads h CROSS JOIN share s CROSS JOIN LATERAL (
      SELECT w.id FROM webhook_messages w
       WHERE w.merchant_id = h.merchant_id AND w.status = 'pending' AND w.next_attempt_at <= now()
       ORDER BY w.next_attempt_at LIMIT s.k FOR UPDATE SKIP LOCKED) x
  )
  UPDATE webhook_messages m SET attempt_count = m.attempt_count + 1,
         next_attempt_at = now() + ($2::int * interval '1 second'), updated_at = now()
    FROM share
   WHERE m.id IN (SELECT id FROM fresh UNION ALL SELECT id FROM due)
   RETURNING m.message_id, m.merchant_id, m.body, m.attempt_count, m.replay_count, share.k AS share`;

/**
 * The pushes waiting for a dispatcher, counted up to `cap`: pending and due (new, or a retry whose time
 * has come) and not claimed (a claim leases its rows: next_attempt_at moves past now()). KEDA scales
 * webhook-dispatcher on it (k8s/base/keda-scaledobjects.yaml; test/deploy checks the query is this one),
 * every 15 s: the cap (maxReplicaCount x the target per replica; a higher count asks for no more
 * replicas) bounds what it reads in a long backlog. Reads the pending-only partial indexes.
 */
export function duePushesSql(cap: number): string {
  if (!Number.isInteger(cap) || cap <= 0) throw new Error(`cap must be a positive integer, got ${cap}`);
  return (
    `SELECT count(*) AS count FROM (SELECT 1 FROM webhook_messages WHERE status = 'pending' ` +
    `AND (next_attempt_at IS NULL OR next_attempt_at <= now()) LIMIT ${cap}) AS due`
  );
}

/**
 * Push messages (webhook_messages) and their delivery log (webhook_deliveries). The dispatcher's
 * methods are id-scoped by design: a delivery job carries only the message id, and the claim hands
 * back the message's merchant id, which the caller carries from there. The retry tick and the
 * operator's methods (replay, log, list, counts) span every merchant on purpose: they are the
 * service's own work, never a merchant's read.
 */
export class WebhookMessagesRepository {
  constructor(private readonly db: DataSource) {}

  /**
   * Claims the next due attempts (the dispatcher's pump), shared out between merchants, each leased
   * for `leaseSeconds` and its attempt counted, in one statement (CLAIM_NEXT_DUE_SQL): up to `limit`
   * merchants with work due, the longest waiting first, and of each its oldest new messages and its
   * retries whose time has come, up to an equal share of `limit` of each kind (all of it for a
   * merchant alone). A merchant in `exclude` (its deliveries in flight at the caller's limit) gets
   * nothing. `share`: each merchant's share; one that got as many may have more due.
   * SKIP LOCKED: dispatchers claiming at once take different messages.
   */
  async claimNextDue(
    limit: number,
    leaseSeconds: number,
    exclude: readonly string[] = [],
  ): Promise<{ rows: ClaimedWebhookMessage[]; share: number }> {
    const claimedAt = Date.now();
    const [rows]: [(Omit<ClaimedWebhookMessage, 'claimed_at'> & { share: number })[], number] = await this.db.query(
      CLAIM_NEXT_DUE_SQL,
      [limit, leaseSeconds, exclude],
    );
    return {
      rows: rows.map(({ share: _share, ...row }) => ({ ...row, claimed_at: claimedAt })),
      share: rows[0]?.share ?? limit,
    };
  }

  /**
   * Undoes claims that were never sent (a dispatcher shutting down with claimed messages it did not
   * start, or holding one whose lease has nearly run out): due at once again, and the claim not counted
   * as an attempt. Only rows still pending under that same claim (its attempt_count and replay_count)
   * are touched: a message claimed again since (after the lease) or replayed is left to its new claim.
   */
  async releaseClaimed(claims: readonly WebhookClaim[]): Promise<void> {
    if (claims.length === 0) return;
    await this.db.query(
      `UPDATE webhook_messages m SET attempt_count = m.attempt_count - 1,
              next_attempt_at = CASE WHEN m.attempt_count = 1 THEN NULL ELSE now() END, updated_at = now()
         FROM jsonb_to_recordset($1::jsonb) AS c(message_id char(27), attempt_count int, replay_count int)
        WHERE m.message_id = c.message_id AND m.status = 'pending' AND m.attempt_count > 0
          AND m.attempt_count = c.attempt_count AND m.replay_count = c.replay_count`,
      [
        JSON.stringify(
          claims.map(({ message_id, attempt_count, replay_count }) => ({ message_id, attempt_count, replay_count })),
        ),
      ],
    );
  }

  /**
   * Records attempts in ONE statement: the jobs' outbox rows completed, the delivery-log rows
   * inserted and the messages' new states. A message no longer pending, or no longer under the claim
   * the attempt was made under (replayed since, or claimed again after its lease), is left as it is:
   * an operator's replay during an attempt in flight is not undone by that attempt's result.
   */
  async recordAttempts(records: readonly WebhookAttemptRecord[]): Promise<void> {
    await this.db.query(
      `WITH x AS (
         SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(message_id char(27), attempt_count int, replay_count int,
           outbox_id uuid, log jsonb, status varchar, status_code int, delay_ms int, last_error text)
       ), done AS (
         UPDATE outbox SET completed_at = now()
          WHERE id IN (SELECT outbox_id FROM x WHERE outbox_id IS NOT NULL) AND completed_at IS NULL
       ), log AS (
         INSERT INTO webhook_deliveries (message_id, attempt, attempted_at, url, status_code, latency_ms, error)
         SELECT x.message_id, (x.log->>'attempt')::int, (x.log->>'attempted_at')::timestamptz, x.log->>'url',
                x.status_code, (x.log->>'latency_ms')::int, x.log->>'error'
           FROM x WHERE x.log IS NOT NULL AND jsonb_typeof(x.log) = 'object'
       )
       UPDATE webhook_messages m SET status = x.status,
              next_attempt_at = CASE WHEN x.status = 'pending'
                THEN now() + (x.delay_ms * interval '1 millisecond') ELSE NULL END,
              last_status_code = x.status_code, last_error = x.last_error,
              delivered_at = CASE WHEN x.status = 'delivered' THEN now() ELSE m.delivered_at END,
              dead_at = CASE WHEN x.status = 'dead' THEN now() ELSE m.dead_at END, updated_at = now()
         FROM x WHERE m.message_id = x.message_id AND m.status = 'pending' AND m.replay_count = x.replay_count
          -- Under its own claim; or, for a push the receiver took, a claim the database no longer has:
          -- the dispatcher commits asynchronously, so a crash of Postgres can lose the claim's commit
          -- (attempt_count back below the claim's) after the push went out, and the push must not be
          -- sent again for that. A newer claim (another dispatcher's, after the lease) is left alone.
          AND (m.attempt_count = x.attempt_count OR (x.status = 'delivered' AND m.attempt_count < x.attempt_count))`,
      [JSON.stringify(records)],
    );
  }

  /**
   * Puts a message back to pending, due now, as a new replay generation (fresh delivery job ids), also
   * one still pending (a retry hours away made due now): an attempt in flight under the previous
   * generation's claim is then not recorded (recordAttempts). False when there is no such message.
   */
  async replay(messageId: string): Promise<boolean> {
    const [rows]: [{ message_id: string }[], number] = await this.db.query(
      `UPDATE webhook_messages SET status = 'pending', next_attempt_at = now(), attempt_count = 0,
              replay_count = replay_count + 1, dead_at = NULL, updated_at = now()
        WHERE message_id = $1 RETURNING message_id`,
      [messageId],
    );
    return rows.length > 0;
  }

  /** Replays every dead message that died at or after `since`; returns their ids. */
  async replayDead(since: Date): Promise<string[]> {
    const [rows]: [{ message_id: string }[], number] = await this.db.query(
      `UPDATE webhook_messages SET status = 'pending', next_attempt_at = now(), attempt_count = 0,
              replay_count = replay_count + 1, dead_at = NULL, updated_at = now()
        WHERE status = 'dead' AND dead_at >= $1 RETURNING message_id`,
      [since],
    );
    return rows.map((r) => r.message_id);
  }

  /** A message and every delivery attempt in order; null when there is no such message. */
  async withDeliveries(messageId: string): Promise<Record<string, unknown> | null> {
    const [message]: Record<string, unknown>[] = await this.db.query(
      `SELECT message_id, event_name, payload_id, status, attempt_count, next_attempt_at, last_status_code,
              last_error, delivered_at, dead_at, created_at FROM webhook_messages WHERE message_id = $1`,
      [messageId],
    );
    if (!message) return null;
    const attempts: Record<string, unknown>[] = await this.db.query(
      `SELECT attempt, attempted_at, url, status_code, latency_ms, error FROM webhook_deliveries
        WHERE message_id = $1 ORDER BY id`,
      [messageId],
    );
    return { ...message, attempts };
  }

  /** Newest messages first, optionally of one status. */
  list(status: string | null, limit: number): Promise<Record<string, unknown>[]> {
    return this.db.query(
      `SELECT message_id, event_name, status, attempt_count, last_status_code, created_at FROM webhook_messages
        WHERE ($1::text IS NULL OR status = $1) ORDER BY created_at DESC LIMIT $2`,
      [status, limit],
    );
  }

  /** Dead messages waiting for a replay. */
  async countDead(): Promise<number> {
    const [dead]: { count: string }[] = await this.db.query(
      `SELECT count(*) AS count FROM webhook_messages WHERE status = 'dead'`,
    );
    return Number(dead!.count);
  }

  // --- A merchant's own view (the API and portal): every read and replay is scoped to merchantId.

  /**
   * The merchant's push messages, newest first (message_id is a KSUID, so its order is time order),
   * optionally of one status or of one transaction (merchant transaction id); `startingAfter` is the
   * message_id of the previous page's last row.
   */
  async listOfMerchant(
    merchantId: string,
    o: { status: string | null; transactionId: string | null; startingAfter: string | null; limit: number },
  ): Promise<{ data: Record<string, unknown>[]; hasMore: boolean }> {
    const rows: Record<string, unknown>[] = await this.db.query(
      `SELECT w.message_id, w.event_name, w.payload_id, t.merchant_txn_id AS transaction_id, w.status,
              w.attempt_count, w.replay_count, w.next_attempt_at, w.last_status_code, w.last_error,
              w.delivered_at, w.dead_at, w.created_at
         FROM webhook_messages w LEFT JOIN transactions t ON t.id = w.transaction_id
        WHERE w.merchant_id = $1 AND ($2::text IS NULL OR w.status = $2)
          AND ($3::text IS NULL OR w.transaction_id = (SELECT id FROM transactions
                WHERE merchant_id = $1 AND merchant_txn_id = $3))
          AND ($4::text IS NULL OR w.message_id < $4)
        ORDER BY w.message_id DESC LIMIT $5`,
      [merchantId, o.status, o.transactionId, o.startingAfter, o.limit + 1],
    );
    return { data: rows.slice(0, o.limit), hasMore: rows.length > o.limit };
  }

  /** One of the merchant's messages with its body and every delivery attempt; null if not theirs. */
  async oneOfMerchant(merchantId: string, messageId: string): Promise<Record<string, unknown> | null> {
    const [message]: Record<string, unknown>[] = await this.db.query(
      `SELECT w.message_id, w.event_name, w.payload_id, t.merchant_txn_id AS transaction_id, w.status,
              w.attempt_count, w.replay_count, w.next_attempt_at, w.last_status_code, w.last_error,
              w.delivered_at, w.dead_at, w.created_at, w.body
         FROM webhook_messages w LEFT JOIN transactions t ON t.id = w.transaction_id
        WHERE w.merchant_id = $1 AND w.message_id = $2`,
      [merchantId, messageId],
    );
    if (!message) return null;
    const attempts: Record<string, unknown>[] = await this.db.query(
      `SELECT attempt, attempted_at, url, status_code, latency_ms, error FROM webhook_deliveries
        WHERE message_id = $1 ORDER BY id`,
      [messageId],
    );
    return { ...message, attempts };
  }

  /**
   * Replays one of the merchant's messages that is no longer being delivered (dead, gone,
   * no_endpoint or delivered): back to pending, due now, as a new replay generation. 'missing' when
   * the message is not theirs, 'pending' when it is still being delivered (nothing changed). A test
   * push is sent again only within the merchant's test push limit (testPushWait): `{ wait }` (seconds)
   * when the limit is reached, nothing changed.
   */
  async replayOfMerchant(
    merchantId: string,
    messageId: string,
    testPushLimit: TestPushLimit,
  ): Promise<'replayed' | 'pending' | 'missing' | { wait: number }> {
    return this.db.transaction(async (m) => {
      const [message]: { event_name: string }[] = await m.query(
        `SELECT event_name FROM webhook_messages WHERE merchant_id = $1 AND message_id = $2`,
        [merchantId, messageId],
      );
      if (!message) return 'missing';
      if (message.event_name === EventName.Test) {
        const wait = await this.testPushWait(m, merchantId, testPushLimit);
        if (wait > 0) return { wait };
      }
      const [rows]: [{ message_id: string }[], number] = await m.query(
        `UPDATE webhook_messages SET status = 'pending', next_attempt_at = now(), attempt_count = 0,
                replay_count = replay_count + 1, dead_at = NULL, updated_at = now()
          WHERE merchant_id = $1 AND message_id = $2 AND status <> 'pending' RETURNING message_id`,
        [merchantId, messageId],
      );
      return rows.length > 0 ? 'replayed' : 'pending';
    });
  }

  /**
   * Whether the merchant may have one more test push sent (a new one, or a replay of one) within
   * `limit`: 0 if so, else the seconds until that can be at the soonest. A test push counts for
   * `limit.windowSeconds` after it was last touched (made, sent, ended, replayed): at most `limit.count`
   * test pushes made or sent in any such window, each sent at most as often as the retry schedule says.
   * A pending one waiting hours for its next retry (a receiver still broken) stops counting meanwhile,
   * so a merchant fixing its endpoint is never locked out of testing it for longer than the window.
   *
   * Takes the merchant's test push lock for the caller's transaction (`m`), which must make the push
   * in it: concurrent requests, on any replica, are counted one after the other.
   */
  async testPushWait(m: EntityManager, merchantId: string, limit: TestPushLimit): Promise<number> {
    await m.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [testPushLockKey(merchantId)]);
    // When each counting test push stops counting at the soonest: a pending one an attempt from now
    // (next_attempt_at; NULL before its first claim: now) plus the window, an ended one its last touch
    // plus the window. With n counting, a place is free once the (n - count + 1)th of them stops.
    const [row]: { n: number; wait: number | null }[] = await m.query(
      `WITH counting AS (
         SELECT updated_at + $2 * interval '1 second' AS frees_at
           FROM webhook_messages
          WHERE merchant_id = $1 AND event_name = 'test' -- a literal: the partial index's predicate
            AND updated_at > now() - $2 * interval '1 second')
       SELECT n, (SELECT greatest(1, ceil(extract(epoch FROM frees_at - now())))::int FROM counting
                   ORDER BY frees_at OFFSET greatest(n - $3, 0) LIMIT 1) AS wait
         FROM (SELECT count(*)::int AS n FROM counting) c`,
      [merchantId, limit.windowSeconds, limit.count],
    );
    return row!.n < limit.count ? 0 : (row!.wait ?? 1);
  }
}
