import { Inject, Injectable, Logger } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import { MerchantsRepository, type MerchantEntity } from '@retain/db';
import { RETAIN_CONFIG, RetainMetrics } from '@retain/platform';
import { OutboxRelay, groupCommit } from '@retain/queues';
import axios, { type AxiosInstance } from 'axios';
import { Webhook } from 'standardwebhooks';
import { DataSource } from 'typeorm';
import { literalAddressAllowed, webhookAgents } from './address-guard';

interface ClaimedMessage {
  message_id: string;
  merchant_id: string;
  body: { header: Record<string, unknown>; content: unknown };
  attempt_count: number;
}

/** The outcome of one attempt, written with its delivery-log row in one grouped statement. */
interface AttemptRecord {
  message_id: string;
  /** The outbox row of the job that made this attempt, completed in the same statement. */
  outbox_id: string | null;
  /** null: no attempt was made (no endpoint), so no delivery-log row. */
  log: { attempt: number; attempted_at: string; url: string; latency_ms: number; error: string | null } | null;
  status: 'pending' | 'delivered' | 'gone' | 'dead' | 'no_endpoint';
  status_code: number | null;
  delay_ms: number | null;
  last_error: string | null;
}

/** How long a claimed attempt is leased before a tick may hand the message out again. */
const LEASE_SECONDS = 60;
const JITTER = 0.2;

interface CachedMerchant {
  merchant: MerchantEntity;
  signer: Webhook | null;
}

export type DeliveryResult = 'delivered' | 'retry' | 'dead' | 'gone' | 'no_endpoint' | 'skipped';

/**
 * Delivers one attempt of a push: claim it (one worker per attempt), sign it the Standard Webhooks
 * way, POST it (no redirects, 10 s timeout, SSRF-guarded), log the attempt, then record the result:
 * delivered on 2xx, stop on 410, otherwise the next attempt per WEBHOOK_RETRY_SCHEDULE with jitter,
 * dead after the last. message_id never changes across attempts.
 */
@Injectable()
export class DeliveryService {
  private readonly logger = new Logger(DeliveryService.name);
  private readonly http: AxiosInstance;
  private readonly merchants: MerchantsRepository;
  private readonly merchantCache = new Map<string, { at: number; value: CachedMerchant | null }>();

  constructor(
    private readonly db: DataSource,
    private readonly metrics: RetainMetrics,
    private readonly relay: OutboxRelay,
    @Inject(RETAIN_CONFIG) private readonly config: RetainConfig,
  ) {
    const agents = webhookAgents(config.webhookAllowPrivate);
    this.http = axios.create({
      ...agents,
      timeout: config.webhookTimeoutMs,
      maxRedirects: 0,
      proxy: false,
      validateStatus: () => true,
      responseType: 'text',
      transformResponse: (d: unknown) => d,
    });
    this.merchants = new MerchantsRepository(db, config.cardKeys);
  }

  /**
   * Claims due attempts (one worker per attempt): many concurrent jobs, one UPDATE. A message
   * named twice in one batch (a duplicate job) is handed to the first caller only.
   */
  private readonly claim = groupCommit<string, ClaimedMessage | null>(async (ids) => {
    // TypeORM answers an UPDATE ... RETURNING with [rows, affected].
    const [rows]: [ClaimedMessage[], number] = await this.db.query(
      `UPDATE webhook_messages SET attempt_count = attempt_count + 1,
              next_attempt_at = now() + ($2::int * interval '1 second'), updated_at = now()
        WHERE message_id = ANY($1::bpchar[]) AND status = 'pending'
          AND (next_attempt_at IS NULL OR next_attempt_at <= now())
        RETURNING message_id, merchant_id, body, attempt_count`,
      [ids, LEASE_SECONDS],
    );
    const byId = new Map(rows.map((r) => [r.message_id, r]));
    return ids.map((id) => {
      const row = byId.get(id) ?? null;
      byId.delete(id);
      return row;
    });
  });

  /** Records attempts: the delivery-log rows and the messages' new states, many in one statement. */
  private readonly record = groupCommit<AttemptRecord, void>(async (records) => {
    await this.db.query(
      `WITH x AS (
         SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(message_id char(27), outbox_id uuid, log jsonb,
           status varchar, status_code int, delay_ms int, last_error text)
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
         FROM x WHERE m.message_id = x.message_id AND m.status = 'pending'`,
      [JSON.stringify(records)],
    );
    return records.map(() => undefined);
  });

  async deliver(messageId: string, outboxId: string | null = null): Promise<DeliveryResult> {
    const claimed = await this.claim(messageId);
    if (!claimed) {
      // Nothing to record (delivered already, or not due): the job's outbox row is done all the same.
      if (outboxId) await this.relay.complete(outboxId);
      return 'skipped';
    }
    const merchant = await this.merchant(claimed.merchant_id);
    if (!merchant?.merchant.webhookUrl) {
      await this.record({
        message_id: claimed.message_id,
        outbox_id: outboxId,
        log: null,
        status: 'no_endpoint',
        status_code: null,
        delay_ms: null,
        last_error: 'merchant has no webhook URL',
      });
      return 'no_endpoint';
    }
    const url = merchant.merchant.webhookUrl;
    const payload = JSON.stringify(claimed.body);
    const started = Date.now();
    let statusCode: number | null = null;
    let error: string | null = null;
    try {
      if (!this.config.webhookAllowPrivate && !literalAddressAllowed(url)) throw new Error('address not allowed');
      const timestamp = new Date();
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        'user-agent': 'Retain-Webhooks/1.0',
        'webhook-id': claimed.message_id,
        'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
      };
      if (merchant.signer) headers['webhook-signature'] = merchant.signer.sign(claimed.message_id, timestamp, payload);
      const res = await this.http.post(url, payload, { headers });
      statusCode = res.status;
    } catch (err) {
      error = describe(err);
    }
    const latencyMs = Date.now() - started;
    const log = {
      attempt: claimed.attempt_count,
      attempted_at: new Date(started).toISOString(),
      url: redactUrl(url),
      latency_ms: latencyMs,
      error,
    };
    this.metrics.webhookLatency.observe(latencyMs / 1000);
    const resultLabel =
      statusCode === null
        ? error === 'address not allowed'
          ? 'refused'
          : 'error'
        : statusCode === 410
          ? '410'
          : `${Math.floor(statusCode / 100)}xx`;
    this.metrics.webhookDeliveries.inc({ result: resultLabel });
    const outcome = (status: AttemptRecord['status'], lastError: string | null, delayMs: number | null = null) =>
      this.record({
        message_id: claimed.message_id,
        outbox_id: outboxId,
        log,
        status,
        status_code: statusCode,
        delay_ms: delayMs,
        last_error: lastError,
      });

    if (statusCode !== null && statusCode >= 200 && statusCode < 300) {
      await outcome('delivered', null);
      return 'delivered';
    }
    if (statusCode === 410) {
      await outcome('gone', 'receiver answered 410 Gone');
      return 'gone';
    }
    const schedule = this.config.webhookRetryScheduleMs;
    const attempt = claimed.attempt_count;
    const lastError = error ?? `HTTP ${statusCode}`;
    if (attempt > schedule.length) {
      await outcome('dead', lastError);
      return 'dead';
    }
    // The next attempt after this one's delay, with up to 20% jitter (decisions §9).
    await outcome('pending', lastError, Math.round(schedule[attempt - 1]! * (1 + Math.random() * JITTER)));
    return 'retry';
  }

  /**
   * Merchants change rarely; a few seconds of caching spares a query and a secret decryption per
   * delivery. The signer holds the decrypted secret in memory only.
   */
  private async merchant(id: string): Promise<CachedMerchant | null> {
    const hit = this.merchantCache.get(id);
    if (hit && Date.now() - hit.at < 5000) return hit.value;
    const merchant = await this.merchants.findById(id);
    const secret = merchant ? this.merchants.webhookSecret(merchant) : null;
    const value = merchant ? { merchant, signer: secret ? new Webhook(secret) : null } : null;
    this.merchantCache.set(id, { at: Date.now(), value });
    return value;
  }
}

function describe(err: unknown): string {
  const e = err as { code?: string; message?: string };
  if (e?.code === 'ADDRESS_NOT_ALLOWED' || e?.message === 'address not allowed') return 'address not allowed';
  if (e?.code === 'ECONNABORTED' || /timeout/i.test(e?.message ?? '')) return 'timeout';
  if (e?.code) return `connection error ${e.code}`;
  return 'connection error';
}

/** Credentials in a webhook URL are never written to the delivery log. */
function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.username || u.password) {
      u.username = '***';
      u.password = '';
    }
    return u.toString();
  } catch {
    return '(invalid URL)';
  }
}
