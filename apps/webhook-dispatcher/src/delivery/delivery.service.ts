import { Inject, Injectable, Logger } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import { MerchantsRepository, type MerchantEntity } from '@retain/db';
import { RETAIN_CONFIG, RetainMetrics } from '@retain/platform';
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

const LOG_SQL = `INSERT INTO webhook_deliveries (message_id, attempt, attempted_at, url, status_code, latency_ms, error)
  VALUES ($1, $2, $3, $4, $5, $6, $7)`;

/** How long a claimed attempt is leased before a tick may hand the message out again. */
const LEASE_SECONDS = 60;
const JITTER = 0.2;

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
  private readonly merchantCache = new Map<string, { at: number; merchant: MerchantEntity | null }>();

  constructor(
    private readonly db: DataSource,
    private readonly metrics: RetainMetrics,
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

  async deliver(messageId: string): Promise<DeliveryResult> {
    // TypeORM answers an UPDATE ... RETURNING with [rows, affected].
    const [rows]: [ClaimedMessage[], number] = await this.db.query(
      `UPDATE webhook_messages SET attempt_count = attempt_count + 1,
              next_attempt_at = now() + ($2::int * interval '1 second'), updated_at = now()
        WHERE message_id = $1 AND status = 'pending' AND (next_attempt_at IS NULL OR next_attempt_at <= now())
        RETURNING message_id, merchant_id, body, attempt_count`,
      [messageId, LEASE_SECONDS],
    );
    const claimed = rows[0];
    if (!claimed) return 'skipped';
    const merchant = await this.merchant(claimed.merchant_id);
    if (!merchant?.webhookUrl) {
      await this.finish(claimed.message_id, 'no_endpoint', null, 'merchant has no webhook URL');
      return 'no_endpoint';
    }
    const url = merchant.webhookUrl;
    const payload = JSON.stringify(claimed.body);
    const started = Date.now();
    let statusCode: number | null = null;
    let error: string | null = null;
    try {
      if (!this.config.webhookAllowPrivate && !literalAddressAllowed(url)) throw new Error('address not allowed');
      const secret = this.merchants.webhookSecret(merchant);
      const timestamp = new Date();
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        'user-agent': 'Retain-Webhooks/1.0',
        'webhook-id': claimed.message_id,
        'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
      };
      if (secret) headers['webhook-signature'] = new Webhook(secret).sign(claimed.message_id, timestamp, payload);
      const res = await this.http.post(url, payload, { headers });
      statusCode = res.status;
    } catch (err) {
      error = describe(err);
    }
    const latencyMs = Date.now() - started;
    // The attempt's log row is written together with the message's new state (one round trip).
    const log = [
      claimed.message_id,
      claimed.attempt_count,
      new Date(started),
      redactUrl(url),
      statusCode,
      latencyMs,
      error,
    ];
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

    if (statusCode !== null && statusCode >= 200 && statusCode < 300) {
      await this.finish(claimed.message_id, 'delivered', statusCode, null, log);
      return 'delivered';
    }
    if (statusCode === 410) {
      await this.finish(claimed.message_id, 'gone', statusCode, 'receiver answered 410 Gone', log);
      return 'gone';
    }
    const schedule = this.config.webhookRetryScheduleMs;
    const attempt = claimed.attempt_count;
    const lastError = error ?? `HTTP ${statusCode}`;
    if (attempt > schedule.length) {
      await this.finish(claimed.message_id, 'dead', statusCode, lastError, log);
      return 'dead';
    }
    const delay = Math.round(schedule[attempt - 1]! * (1 + Math.random() * JITTER));
    await this.db.query(
      `WITH log AS (${LOG_SQL})
       UPDATE webhook_messages SET next_attempt_at = now() + ($8::int * interval '1 millisecond'),
              last_status_code = $5, last_error = $9, updated_at = now()
        WHERE message_id = $1 AND status = 'pending'`,
      [...log, delay, lastError],
    );
    return 'retry';
  }

  private async finish(
    messageId: string,
    status: string,
    statusCode: number | null,
    err: string | null,
    log?: unknown[],
  ): Promise<void> {
    const set = (st: string, code: string, e: string): string =>
      `UPDATE webhook_messages SET status = ${st}::varchar, next_attempt_at = NULL, last_status_code = ${code},
              last_error = ${e}, delivered_at = CASE WHEN ${st}::varchar = 'delivered' THEN now() ELSE delivered_at END,
              dead_at = CASE WHEN ${st}::varchar = 'dead' THEN now() ELSE dead_at END, updated_at = now()
        WHERE message_id = $1`;
    if (!log) {
      await this.db.query(set('$2', '$3', '$4'), [messageId, status, statusCode, err]);
      return;
    }
    // $1..$7 are the log row (message_id first); the new status and the error follow.
    await this.db.query(`WITH log AS (${LOG_SQL}) ${set('$8', '$5', '$9')}`, [...log, status, err]);
  }

  /** Merchants change rarely; a few seconds of caching spares a query per delivery. */
  private async merchant(id: string): Promise<MerchantEntity | null> {
    const hit = this.merchantCache.get(id);
    if (hit && Date.now() - hit.at < 5000) return hit.merchant;
    const merchant = await this.merchants.findById(id);
    this.merchantCache.set(id, { at: Date.now(), merchant });
    return merchant;
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
