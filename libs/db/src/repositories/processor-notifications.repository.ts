import type { DataSource, EntityManager } from 'typeorm';

/** Something that runs SQL: the DataSource outside a transaction, an EntityManager inside one. */
type Sql = Pick<EntityManager, 'query'> | Pick<DataSource, 'query'>;

/** A verified processor notification to store (Adyen NotificationRequestItem, minus its signature). */
export interface NewProcessorNotification {
  processor: 'adyen';
  merchantId: string;
  /** The account version whose HMAC key verified it. */
  accountId: string;
  merchantAccountCode: string;
  eventCode: string;
  success: boolean;
  pspReference: string;
  originalReference: string | null;
  merchantReference: string | null;
  amountValue: number;
  currency: string;
  reason: string | null;
  eventDate: string | null;
  live: boolean;
  /** additionalData.refusalReasonRaw, additionalData.merchantAdviceCode and the item's paymentMethod (a refusal's codes). */
  refusalReasonRaw: string | null;
  merchantAdviceCode: string | null;
  paymentMethod: string | null;
}

export interface ProcessorNotificationRow {
  id: string;
  processor: string;
  merchant_id: string;
  account_id: string;
  merchant_account_code: string;
  event_code: string;
  success: boolean;
  psp_reference: string;
  original_reference: string | null;
  merchant_reference: string | null;
  amount_value: string;
  currency: string;
  reason: string | null;
  refusal_reason_raw: string | null;
  merchant_advice_code: string | null;
  payment_method: string | null;
  processed_at: Date | null;
}

/** The attempt an AUTHORISATION names (its vid is the payment's reference), of the merchant. */
export interface NotifiedAttempt {
  id: string;
  vid: string;
  state: string;
}

/** The refund a REFUND-family notification names, of the merchant. */
export interface NotifiedRefund {
  id: string;
  vid: string;
  status: string;
}

/**
 * Processor notifications (migration ProcessorNotifications): stored by intake-api before it answers
 * the processor, acted on once by the retry worker.
 */
export class ProcessorNotificationsRepository {
  /**
   * Stores notifications in the caller's transaction; returns the ids of the new ones (a notification
   * already stored, Adyen delivering it again, is skipped).
   */
  static async insertNew(m: Sql, rows: readonly NewProcessorNotification[]): Promise<string[]> {
    if (rows.length === 0) return [];
    const inserted: { id: string }[] = await m.query(
      `INSERT INTO processor_notifications (processor, merchant_id, account_id, merchant_account_code, event_code,
              success, psp_reference, original_reference, merchant_reference, amount_value, currency, reason,
              event_date, live, refusal_reason_raw, merchant_advice_code, payment_method)
       SELECT x.processor, x.merchant_id, x.account_id, x.merchant_account_code, x.event_code, x.success,
              x.psp_reference, x.original_reference, x.merchant_reference, x.amount_value, x.currency, x.reason,
              x.event_date, x.live, x.refusal_reason_raw, x.merchant_advice_code, x.payment_method
         FROM jsonb_to_recordset($1::jsonb) AS x(processor varchar, merchant_id uuid, account_id uuid,
              merchant_account_code varchar, event_code varchar, success boolean, psp_reference varchar,
              original_reference varchar, merchant_reference varchar, amount_value bigint, currency varchar,
              reason text, event_date varchar, live boolean, refusal_reason_raw text, merchant_advice_code text,
              payment_method varchar)
       ON CONFLICT DO NOTHING
       RETURNING id`,
      [
        JSON.stringify(
          rows.map((r) => ({
            processor: r.processor,
            merchant_id: r.merchantId,
            account_id: r.accountId,
            merchant_account_code: r.merchantAccountCode,
            event_code: r.eventCode,
            success: r.success,
            psp_reference: r.pspReference,
            original_reference: r.originalReference,
            merchant_reference: r.merchantReference,
            amount_value: r.amountValue,
            currency: r.currency,
            reason: r.reason,
            event_date: r.eventDate,
            live: r.live,
            refusal_reason_raw: r.refusalReasonRaw,
            merchant_advice_code: r.merchantAdviceCode,
            payment_method: r.paymentMethod,
          })),
        ),
      ],
    );
    return inserted.map((r) => r.id);
  }

  /** The notification, locked until the caller's transaction ends (one handler at a time). */
  static async lock(m: EntityManager, id: string): Promise<ProcessorNotificationRow | null> {
    const [row]: ProcessorNotificationRow[] = await m.query(
      `SELECT * FROM processor_notifications WHERE id = $1 FOR UPDATE`,
      [id],
    );
    return row ?? null;
  }

  static async markProcessed(m: Sql, id: string, outcome: string): Promise<void> {
    await m.query(
      `UPDATE processor_notifications SET processed_at = now(), outcome = $2 WHERE id = $1 AND processed_at IS NULL`,
      [id, outcome],
    );
  }

  /** The merchant's attempt whose vid is `vid` (Adyen's merchantReference of a payment). */
  static async attemptOf(m: Sql, merchantId: string, vid: string): Promise<NotifiedAttempt | null> {
    const [row]: NotifiedAttempt[] = await m.query(
      `SELECT a.id, a.vid, a.state FROM attempts a JOIN transactions t ON t.id = a.transaction_id
        WHERE a.vid = $1 AND t.merchant_id = $2`,
      [vid, merchantId],
    );
    return row ?? null;
  }

  /**
   * The merchant's refund a refund notification names: by its vid (the reference Retain sent, Adyen's
   * merchantReference), else by the processor's id of it (pspReference).
   */
  static async refundOf(
    m: Sql,
    merchantId: string,
    vid: string | null,
    processorRefundId: string,
  ): Promise<NotifiedRefund | null> {
    const [row]: NotifiedRefund[] = await m.query(
      `SELECT id, vid, status FROM refunds
        WHERE merchant_id = $1 AND kind = 'refund' AND (vid = $2 OR processor_refund_id = $3)
        ORDER BY vid = $2 DESC LIMIT 1`,
      [merchantId, vid ?? '', processorRefundId],
    );
    return row ?? null;
  }
}
