import { Injectable, Logger } from '@nestjs/common';
import { newRetainTransactionId, newVid } from '@retain/domain';
import { OutboxRelay, QueueName, addToOutbox } from '@retain/queues';
import { DataSource } from 'typeorm';

interface DueRow {
  id: string;
  merchant_id: string;
  attempt_count: number;
  next_attempt_at: Date;
  amount_minor: string;
  currency: string;
  card_hmac: string | null;
  card_network: string | null;
}

/** Rows handed out per tick; the next tick takes the rest. */
const BATCH = 500;

/**
 * The scheduler tick: due transactions (next_attempt_at passed) become attempt rows and
 * `retry.attempt` jobs in one database transaction. FOR UPDATE SKIP LOCKED lets several workers
 * tick at once without handing out the same transaction twice; next_attempt_at is cleared so a
 * transaction has at most one attempt in flight.
 */
@Injectable()
export class AttemptSchedulerService {
  private readonly logger = new Logger(AttemptSchedulerService.name);

  constructor(
    private readonly db: DataSource,
    private readonly relay: OutboxRelay,
  ) {}

  async scheduleDue(): Promise<number> {
    const outboxIds = await this.db.transaction(async (m) => {
      const due: DueRow[] = await m.query(
        `SELECT id, merchant_id, attempt_count, next_attempt_at, amount_minor, currency, card_hmac, card_network
           FROM transactions
          WHERE next_attempt_at <= now() AND review_status = 'passed' AND status IN ('Failed', 'In Retry')
            AND stop_requested_at IS NULL
          ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED`,
        [BATCH],
      );
      if (due.length === 0) return [] as string[];
      const attempts = due.map((t) => ({
        vid: newVid(),
        rtid: newRetainTransactionId(),
        transaction_id: t.id,
        merchant_id: t.merchant_id,
        retry_number: t.attempt_count + 1,
        scheduled_for: new Date(t.next_attempt_at).toISOString(),
        amount_minor: t.amount_minor,
        currency: t.currency,
        card_hmac: t.card_hmac,
        card_network: t.card_network,
      }));
      const inserted: { id: string }[] = await m.query(
        `INSERT INTO attempts (vid, retain_transaction_id, transaction_id, merchant_id, retry_number, state,
           scheduled_for, amount_minor, currency, card_hmac, card_network)
         SELECT x.vid, x.rtid, x.transaction_id, x.merchant_id, x.retry_number, 'pending', x.scheduled_for,
                x.amount_minor, x.currency, x.card_hmac, x.card_network
           FROM jsonb_to_recordset($1::jsonb) AS x(vid text, rtid text, transaction_id uuid, merchant_id uuid,
             retry_number int, scheduled_for timestamptz, amount_minor bigint, currency text, card_hmac text,
             card_network text)
         RETURNING id`,
        [JSON.stringify(attempts)],
      );
      await m.query(
        `UPDATE transactions SET next_attempt_at = NULL, attempt_count = attempt_count + 1, updated_at = now()
          WHERE id = ANY($1::uuid[])`,
        [due.map((t) => t.id)],
      );
      return addToOutbox(
        m,
        inserted.map((a) => ({ queue: QueueName.RetryAttempt, data: { v: 1 as const, attemptId: a.id } })),
      );
    });
    if (outboxIds.length > 0) {
      await this.relay.publish(outboxIds).catch((err: unknown) => {
        this.logger.warn({ err: (err as Error).message }, 'outbox publish deferred to the sweeper');
      });
    }
    return outboxIds.length;
  }
}
