import { MAX_WEBHOOK_RETRY_STEP, parseDuration } from '@retain/config';
import { describe, expect, it } from 'vitest';
import { useScratchMerchant } from '../test/scratch-merchant';
import { WebhookMessagesRepository } from './repositories/webhook-messages.repository';

// The dispatcher's grouped record of push attempts (real Postgres).
describe('webhook messages', () => {
  const scratch = useScratchMerchant('webhooks_', ['webhook_messages']);

  const pending = async (n: number): Promise<string[]> => {
    const rows: { message_id: string }[] = await scratch.db.query(
      `INSERT INTO webhook_messages (message_id, merchant_id, event_name, payload_id, body, attempt_count, next_attempt_at)
       SELECT substr(md5(random()::text) || md5(random()::text), 1, 27), $1, 'retry succeeded', 'p', '{}'::jsonb, 1,
              now() + interval '60 seconds'
         FROM generate_series(1, $2) RETURNING message_id`,
      [scratch.merchantId, n],
    );
    return rows.map((r) => r.message_id);
  };

  it('records a batch holding the longest retry delay WEBHOOK_RETRY_SCHEDULE allows, jitter (20%) included', async () => {
    const [longest, next] = await pending(2);
    const delayMs = Math.round(parseDuration(MAX_WEBHOOK_RETRY_STEP)! * 1.2);
    const record = (message_id: string, delay_ms: number) => ({
      message_id,
      outbox_id: null,
      log: {
        attempt: 1,
        attempted_at: new Date().toISOString(),
        url: 'https://x.example/h',
        latency_ms: 3,
        error: null,
      },
      status: 'pending' as const,
      status_code: 503,
      delay_ms,
      last_error: 'HTTP 503',
    });
    await new WebhookMessagesRepository(scratch.db).recordAttempts([record(longest!, delayMs), record(next!, 5000)]);
    const rows: { message_id: string; wait_ms: number }[] = await scratch.db.query(
      `SELECT message_id, extract(epoch FROM next_attempt_at - now()) * 1000 AS wait_ms FROM webhook_messages
        WHERE message_id = ANY($1)`,
      [[longest, next]],
    );
    const wait = new Map(rows.map((r) => [r.message_id, Number(r.wait_ms)]));
    expect(wait.get(longest!)).toBeGreaterThan(delayMs - 60_000);
    expect(wait.get(next!)).toBeLessThan(60_000);
  });
});
