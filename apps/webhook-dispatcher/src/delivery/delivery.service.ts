import { Inject, Injectable, Logger } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import {
  MerchantsRepository,
  WebhookMessagesRepository,
  type ClaimedWebhookMessage,
  type MerchantEntity,
  type WebhookAttemptRecord,
} from '@retain/db';
import { groupCommit } from '@retain/domain';
import { RETAIN_CONFIG, RetainMetrics } from '@retain/platform';
import axios, { type AxiosInstance } from 'axios';
import type { Readable } from 'node:stream';
import { Webhook } from 'standardwebhooks';
import { literalAddressAllowed, webhookAgents } from './address-guard';

/** How long a claimed attempt is leased before a tick may hand the message out again. */
export const LEASE_SECONDS = 60;
/**
 * How long a delivery's record is tried again while Postgres refuses it (an outage), from the
 * message's claim (its lease's start): up to 5 s before the lease runs out, so the push is not claimed
 * and sent again meanwhile. An outage and Postgres's crash recovery after it can outlast half the lease
 * (bench/drills).
 */
const RECORD_RETRY_MS = (LEASE_SECONDS - 5) * 1000;
/**
 * What a claimed push's exchange leaves of the record window at least: a push is sent only if its
 * exchange (10 s at most) starts early enough to end this long before RECORD_RETRY_MS, i.e. within
 * 35 s of its claim. One held back longer (the pump buffers claimed messages while MAX_UNRECORDED
 * deliveries wait for their records) is handed back unsent: its lease could run out mid-exchange or
 * before its record, and another dispatcher's claim would send it too.
 */
const RECORD_MARGIN_MS = 10_000;
const JITTER = 0.2;
/**
 * A receiver's answer is its status; its body is read and dropped, up to this much (then the
 * connection is closed and the status stands), so that no receiver can make the dispatcher buffer
 * an endless body.
 */
const MAX_RESPONSE_BYTES = 64 * 1024;
/**
 * Claims past the schedule's last attempt without a recorded answer (a lease ran out: the dispatcher
 * stopped, or Postgres refused the record) before a push is given up unsent. A few: one lost record
 * must not end a push whose receiver is fine.
 */
const MAX_UNRECORDED_CLAIMS = 2;

/**
 * `signer` null: the merchant's secret cannot be opened (its data key was dropped) or none is stored,
 * and nothing is sent (never unsigned).
 */
interface CachedMerchant {
  merchant: MerchantEntity;
  signer: Webhook | null;
}

/** What the push log says of an attempt not sent because the secret cannot be opened (no key named). */
const UNSIGNABLE_ERROR = 'not sent: the webhook secret cannot be read (an operator must restore its data key)';

/** One attempt of a claimed push, as its record needs it. */
interface AttemptMade {
  claimed: ClaimedWebhookMessage;
  outboxId: string | null;
  log: WebhookAttemptRecord['log'];
  statusCode: number | null;
}

export type DeliveryResult = 'delivered' | 'retry' | 'dead' | 'gone' | 'no_endpoint' | 'skipped';

/**
 * Delivers one attempt of a push claimed by the pump (one worker per attempt): sign it the Standard Webhooks
 * way, POST it (no redirects, 10 s timeout, SSRF-guarded), log the attempt, then record the result:
 * delivered on 2xx, stop on 410, otherwise the next attempt per WEBHOOK_RETRY_SCHEDULE with jitter,
 * dead after the last. message_id never changes across attempts.
 */
@Injectable()
export class DeliveryService {
  private readonly logger = new Logger(DeliveryService.name);
  private readonly http: AxiosInstance;
  private readonly merchantCache = new Map<string, { at: number; value: Promise<CachedMerchant | null> }>();

  constructor(
    private readonly messages: WebhookMessagesRepository,
    private readonly merchants: MerchantsRepository,
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
      // The body is drained by discardBody (bounded), not buffered by axios.
      responseType: 'stream',
      // The body is dropped, so it is never decoded: a receiver's broken or mislabelled encoding (a
      // 202 labelled gzip with a plain body) must not turn its answer into an error. Nothing is asked
      // for either: `accept-encoding: identity` on every request (axios would advertise gzip and br).
      decompress: false,
      // The body is sent as the bytes it was signed as, and the answer is a stream: axios' default
      // transforms (a JSON.parse of every body to check it, header normalizing) have nothing to do.
      transformRequest: [],
      transformResponse: [],
    });
  }

  /** Records attempts: the delivery-log rows and the messages' new states, many in one statement. */
  private readonly record = groupCommit<WebhookAttemptRecord, void>(async (records) => {
    await this.messages.recordAttempts(records);
    return records.map(() => undefined);
  });

  /**
   * Records an attempt, tried again while Postgres refuses it: a push its receiver already has would
   * otherwise stay leased, unrecorded, and be sent again once the lease ran out. Given up after
   * RECORD_RETRY_MS from `since`, the claim's time (then it is sent again: at least once, as before).
   */
  private async recordDurably(attempt: WebhookAttemptRecord, since: number): Promise<void> {
    for (let wait = 250; ; wait = Math.min(2 * wait, 2_000)) {
      try {
        return await this.record(attempt);
      } catch (err) {
        if (Date.now() + wait > since + RECORD_RETRY_MS) throw err;
        this.logger.warn({ err: (err as Error).message }, 'recording a delivery failed: trying again');
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  }

  /**
   * One attempt of a message this worker's pump has claimed (leased to it). `onSent` is called once
   * the HTTP exchange is over, before the result is recorded: the pump's next request need not wait
   * for this one's group commit (the lease keeps the message this worker's until it is recorded).
   * `skipped`: claimed too long ago to be sent now (RECORD_MARGIN_MS), handed back unsent.
   */
  async deliverClaimed(
    claimed: ClaimedWebhookMessage,
    outboxId: string | null = null,
    onSent: () => void = () => undefined,
  ): Promise<DeliveryResult> {
    const claimedAt = claimed.claimed_at;
    const unrecorded = claimed.attempt_count - (this.config.webhookRetryScheduleMs.length + 1);
    if (unrecorded > MAX_UNRECORDED_CLAIMS) {
      // Claimed again and again with no answer recorded: its sending stops the dispatcher (a crash, out
      // of memory) before any record. Sent again, it would do so for good, and every merchant's pushes
      // with it. Dead, unsent: the alert fires, and a replay sends it once the cause is found.
      onSent();
      const error = `not sent: claimed ${claimed.attempt_count} times without a recorded answer (its sending stopped the dispatcher?)`;
      this.logger.error({ message: claimed.message_id, merchant: claimed.merchant_id }, error);
      await this.recordOutcome({ claimed, outboxId, log: null, statusCode: null }, 'dead', error);
      this.metrics.webhooksDead.inc();
      return 'dead';
    }
    let merchant = await this.merchant(claimed.merchant_id);
    // No URL ends the push `no_endpoint`, and nothing retries that: a merchant cached without one is
    // looked up again, by a lookup started after this claim (the URL may have been set a moment ago,
    // and the push replayed since), before the push is given up.
    if (!merchant?.merchant.webhookUrl) merchant = await this.merchant(claimed.merchant_id, claimedAt);
    if (!merchant?.merchant.webhookUrl) {
      onSent();
      await this.recordOutcome(
        { claimed, outboxId, log: null, statusCode: null },
        'no_endpoint',
        'merchant has no webhook URL',
      );
      return 'no_endpoint';
    }
    if (Date.now() > claimedAt + RECORD_RETRY_MS - this.config.webhookTimeoutMs - RECORD_MARGIN_MS) {
      // Held back too long since its claim: not sent by this dispatcher. Handed back (due now, the
      // claim not counted) unless claimed again or replayed meanwhile; if Postgres refuses that, the
      // lease runs out and any dispatcher claims it.
      onSent();
      await this.messages.releaseClaimed([claimed]).catch((err: unknown) => {
        this.logger.warn({ message: claimed.message_id, err: (err as Error).message }, 'releasing a push failed');
      });
      this.logger.warn({ message: claimed.message_id }, 'push not sent: its lease had nearly run out');
      return 'skipped';
    }
    const url = merchant.merchant.webhookUrl;
    const signer = merchant.signer;
    if (!signer) {
      // Never sent unsigned. A failed attempt on the retry schedule, so the push ends dead (the alert
      // fires, the merchant can replay it once the key is back) instead of going round its lease forever.
      onSent();
      const log = {
        attempt: claimed.attempt_count,
        attempted_at: new Date().toISOString(),
        url: redactUrl(url),
        latency_ms: 0,
        error: UNSIGNABLE_ERROR,
      };
      return this.recordFailure({ claimed, outboxId, log, statusCode: null }, UNSIGNABLE_ERROR);
    }
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
        'accept-encoding': 'identity',
        'webhook-id': claimed.message_id,
        'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
        'webhook-signature': signer.sign(claimed.message_id, timestamp, payload),
      };
      // decisions §9: 10 s for the whole exchange. axios' own timeout (a wall-clock timer) covers it up
      // to the response headers and stops there (after them only an idle socket times out), so the
      // body gets what is left of the 10 s: a receiver trickling its body would otherwise hold a slot,
      // and then its lease would run out and the push be sent twice at once.
      const res = await this.http.post<Readable>(url, payload, { headers });
      // decisions §9: any 2xx accepts, and the status line is the receiver's answer. It stands whatever
      // happens to the (dropped) body after it: cut at 64 KiB or at the 10 s, or its connection dropped.
      statusCode = res.status;
      await discardBody(res.data, MAX_RESPONSE_BYTES, started + this.config.webhookTimeoutMs - Date.now()).catch(
        (err: unknown) =>
          this.logger.debug({ message: claimed.message_id, err: describe(err) }, 'response body cut off'),
      );
    } catch (err) {
      error = describe(err);
    }
    const latencyMs = Date.now() - started;
    onSent();
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
    const attempt = { claimed, outboxId, log, statusCode };
    if (statusCode !== null && statusCode >= 200 && statusCode < 300) {
      await this.recordOutcome(attempt, 'delivered', null);
      return 'delivered';
    }
    if (statusCode === 410) {
      await this.recordOutcome(attempt, 'gone', 'receiver answered 410 Gone');
      return 'gone';
    }
    return this.recordFailure(attempt, error ?? `HTTP ${statusCode}`);
  }

  /** A failed attempt: the next one after its delay with up to 20% jitter (decisions §9), or dead after the last. */
  private async recordFailure(attempt: AttemptMade, lastError: string): Promise<DeliveryResult> {
    const schedule = this.config.webhookRetryScheduleMs;
    const n = attempt.claimed.attempt_count;
    if (n > schedule.length) {
      await this.recordOutcome(attempt, 'dead', lastError);
      this.metrics.webhooksDead.inc();
      return 'dead';
    }
    await this.recordOutcome(
      attempt,
      'pending',
      lastError,
      Math.round(schedule[n - 1]! * (1 + Math.random() * JITTER)),
    );
    return 'retry';
  }

  private recordOutcome(
    { claimed, outboxId, log, statusCode }: AttemptMade,
    status: WebhookAttemptRecord['status'],
    lastError: string | null,
    delayMs: number | null = null,
  ): Promise<void> {
    return this.recordDurably(
      {
        message_id: claimed.message_id,
        attempt_count: claimed.attempt_count,
        replay_count: claimed.replay_count,
        outbox_id: outboxId,
        log,
        status,
        status_code: statusCode,
        delay_ms: delayMs,
        last_error: lastError,
      },
      claimed.claimed_at,
    );
  }

  /**
   * Merchants change rarely; a few seconds of caching spares a query and a secret decryption per
   * delivery. The signer holds the decrypted secret in memory only. `notBefore`: only a lookup
   * started at or after that time will do.
   */
  private merchant(id: string, notBefore = Date.now() - 5000): Promise<CachedMerchant | null> {
    const hit = this.merchantCache.get(id);
    if (hit && hit.at >= notBefore) return hit.value;
    // The lookup itself is cached: a pipe's worth of deliveries starting at once share one query.
    const value = this.merchants.findById(id).then((merchant): CachedMerchant | null => {
      if (!merchant) return null;
      try {
        const secret = this.merchants.webhookSecret(merchant);
        // No stored secret (the column allows NULL): unsignable too, never sent without a signature.
        if (!secret) throw new Error('the merchant has no stored webhook secret');
        return { merchant, signer: new Webhook(secret) };
      } catch (err) {
        // The message names the data key, never the secret.
        this.logger.error(
          { merchant: id, err: (err as Error).message },
          'webhook secret cannot be opened: pushes not sent',
        );
        return { merchant, signer: null };
      }
    });
    value.catch(() => this.merchantCache.delete(id));
    this.merchantCache.set(id, { at: Date.now(), value });
    return value;
  }
}

/**
 * Reads a response body to its end and drops it; past `max` bytes the connection is closed. Fails
 * with a TimeoutError (the connection closed) if it has not ended within `withinMs`, or with the
 * stream's error (a connection dropped mid-body). Either way the status already read stands.
 */
function discardBody(body: Readable, max: number, withinMs: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let read = 0;
    let settled = false;
    const settle = (err?: unknown): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err) reject(err);
      else resolve();
    };
    const timer = setTimeout(
      () => {
        body.destroy();
        settle(new DOMException('whole exchange over its deadline', 'TimeoutError'));
      },
      Math.max(0, withinMs),
    );
    body.on('data', (chunk: Buffer) => {
      read += chunk.length;
      if (read > max) {
        body.destroy();
        settle();
      }
    });
    body.on('end', () => settle());
    body.on('error', (err) => settle(err));
  });
}

function describe(err: unknown): string {
  const e = err as { code?: string; message?: string; name?: string };
  if (e?.code === 'ADDRESS_NOT_ALLOWED' || e?.message === 'address not allowed') return 'address not allowed';
  // The whole-exchange deadline while the body was read (before the headers: axios' ECONNABORTED).
  if (e?.name === 'TimeoutError') return 'timeout';
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
