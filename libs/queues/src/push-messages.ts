import { EventName, newMessageId } from '@retain/domain';
import type { EntityManager } from 'typeorm';
import { QueueName } from './contracts';
import { addToOutbox } from './outbox';

/** ISO 8601 with milliseconds and an explicit offset, as the spec's event_timestamp asks. */
export function timestampWithOffset(d: Date): string {
  return d.toISOString().replace('Z', '+00:00');
}

export interface PushEvent {
  merchantId: string;
  eventName: EventName;
  /** Transaction `vid` (40) for transaction events, request id (32) for `validation failed`. */
  payloadId: string;
  content: unknown;
  occurredAt?: Date;
  /** Internal transaction row id, to find a transaction's pushes. */
  transactionRowId?: string | null;
  /** `validation failed` only. */
  requestId?: string;
  errorCount?: number;
  /** Non-validation events: the merchant identifier of the failed transaction. */
  merchantTransactionId?: string;
  /** A message_id chosen by the caller (to answer it, e.g. a test push); a new KSUID otherwise. */
  messageId?: string;
}

/**
 * Records push notifications and one delivery wake-up job in the caller's database transaction, so
 * a push exists exactly when the state change it reports committed. The header is fixed here;
 * `message_id` never changes across delivery retries. Returns outbox ids to publish after commit.
 */
export async function announce(manager: EntityManager, events: PushEvent[]): Promise<string[]> {
  if (events.length === 0) return [];
  const merchantIds = [...new Set(events.map((e) => e.merchantId))];
  const merchants: { id: string; merchant_vid: string; login: string }[] = await manager.query(
    `SELECT id, merchant_vid, login FROM merchants WHERE id = ANY($1::uuid[])`,
    [merchantIds],
  );
  const byId = new Map(merchants.map((m) => [m.id, m]));
  const now = new Date();
  const rows = events.map((e) => {
    const m = byId.get(e.merchantId);
    if (!m) throw new Error('announce: unknown merchant');
    const messageId = e.messageId ?? newMessageId();
    const header: Record<string, unknown> = {
      author_id: m.login,
      class_name: 'retain',
      event_name: e.eventName,
      event_timestamp: timestampWithOffset(e.occurredAt ?? now),
      merchant_vid: m.merchant_vid,
      message_id: messageId,
      submitted: timestampWithOffset(now),
      payload_id: e.payloadId,
    };
    if (e.eventName === EventName.ValidationFailed) {
      header['request_id'] = e.requestId ?? e.payloadId;
      header['error_count'] = e.errorCount ?? 0;
    } else {
      header['transaction_id'] = e.merchantTransactionId ?? null;
    }
    return {
      message_id: messageId,
      merchant_id: e.merchantId,
      event_name: e.eventName,
      payload_id: e.payloadId,
      transaction_id: e.transactionRowId ?? null,
      body: { header, content: e.content },
    };
  });
  await manager.query(
    `INSERT INTO webhook_messages (message_id, merchant_id, event_name, payload_id, transaction_id, body, status)
     SELECT x.message_id, x.merchant_id, x.event_name, x.payload_id, x.transaction_id, x.body, 'pending'
       FROM jsonb_to_recordset($1::jsonb) AS x(message_id text, merchant_id uuid, event_name text,
         payload_id text, transaction_id uuid, body jsonb)`,
    [JSON.stringify(rows)],
  );
  // One job wakes the dispatcher's pump, which claims every due message from Postgres (these
  // among them): the rows are the work, the job only says there is some.
  return addToOutbox(manager, [{ queue: QueueName.WebhookDeliver, data: { v: 1, messageId: rows[0]!.message_id } }]);
}
