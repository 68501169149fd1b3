import { Inject, Injectable, Logger } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import { TransactionEntity, type StoredPaymentMethod } from '@retain/db';
import {
  classifyDecline,
  EventName,
  RetCode,
  RetMessage,
  TransactionStatus,
  cardBrand,
  cardColumnsFromPan,
  cardFingerprint,
  firstAttemptAt,
  maskCardNumber,
  validCardNumber,
  type ErrorEntry,
} from '@retain/domain';
import { RETAIN_CONFIG } from '@retain/platform';
import { announceTransaction } from '@retain/recovery';
import { PgSandboxLedger, createProcessor, type PaymentProcessor } from '@retain/processor';
import { OutboxRelay, announce } from '@retain/queues';
import { DataSource, type EntityManager } from 'typeorm';
import { CardDecryptor } from './card-decryptor';

interface PendingRow {
  id: string;
  merchant_txn_id: string;
  card_kind: 'clear' | 'jwe' | 'masked' | 'token';
  card_jwe: string | null;
  card_network: string | null;
  payment_method: StoredPaymentMethod;
  billing_descriptor: string | null;
  auth_code: string;
  amount_minor: string;
  submitted_ts: Date;
}

/**
 * The post-submission review (decisions §6): decrypt JWE card numbers, de-tokenize tokens, check
 * processor limits; schedule the first attempt of those that pass; one `validation failed` push per
 * submission for those that fail. Idempotent: a reviewed submission is never reviewed again.
 */
@Injectable()
export class ReviewService {
  private readonly logger = new Logger(ReviewService.name);
  private readonly decryptor: CardDecryptor;
  private readonly processor: PaymentProcessor;

  constructor(
    private readonly db: DataSource,
    private readonly relay: OutboxRelay,
    @Inject(RETAIN_CONFIG) private readonly config: RetainConfig,
  ) {
    this.decryptor = new CardDecryptor(config.jweKeys);
    this.processor = createProcessor(config.processor, new PgSandboxLedger(db));
  }

  async review(submissionId: string): Promise<{ passed: number; rejected: number }> {
    const result = await this.db.transaction(async (m) => {
      const [sub]: { id: string; merchant_id: string; request_id: string; reviewed_at: Date | null }[] = await m.query(
        `SELECT id, merchant_id, request_id, reviewed_at FROM submissions WHERE id = $1 FOR UPDATE`,
        [submissionId],
      );
      if (!sub || sub.reviewed_at) return { passed: 0, rejected: 0, outbox: [] as string[] };
      const rows: PendingRow[] = await m.query(
        `SELECT id, merchant_txn_id, card_kind, card_jwe, card_network, payment_method, billing_descriptor, auth_code,
                amount_minor, submitted_ts
           FROM transactions WHERE submission_id = $1 AND review_status = 'pending' ORDER BY merchant_txn_id FOR UPDATE`,
        [submissionId],
      );
      const rejected: { id: string; errors: ErrorEntry[] }[] = [];
      let passed = 0;
      const cancelled: string[] = [];
      for (const row of rows) {
        const errors = await this.check(m, row);
        if (errors.length > 0) {
          rejected.push({ id: row.merchant_txn_id, errors });
          await m.query(
            `UPDATE transactions SET review_status = 'rejected', next_attempt_at = NULL, card_jwe = NULL, updated_at = now()
              WHERE id = $1`,
            [row.id],
          );
        } else {
          passed++;
          cancelled.push(...(await this.schedule(m, row)));
        }
      }
      await m.query(`UPDATE submissions SET reviewed_at = now(), review_error_count = $2 WHERE id = $1`, [
        submissionId,
        rejected.length,
      ]);
      const outbox =
        rejected.length === 0
          ? []
          : await announce(m, [
              {
                merchantId: sub.merchant_id,
                eventName: EventName.ValidationFailed,
                payloadId: sub.request_id,
                requestId: sub.request_id,
                errorCount: rejected.length,
                content: { success_count: passed, error_count: rejected.length, rejected },
              },
            ]);
      return { passed, rejected: rejected.length, outbox: [...cancelled, ...outbox] };
    });
    this.relay.publish(result.outbox).catch((err: unknown) => {
      this.logger.warn({ err: (err as Error).message }, 'outbox publish deferred to the sweeper');
    });
    return { passed: result.passed, rejected: result.rejected };
  }

  /** All review failures of one transaction; stores the decrypted card on success. */
  private async check(m: EntityManager, row: PendingRow): Promise<ErrorEntry[]> {
    const errors: ErrorEntry[] = [];
    const limits = this.processor.limits;
    if (row.card_kind === 'jwe') {
      const pan = row.card_jwe ? await this.decryptor.decrypt(row.card_jwe) : null;
      if (!pan || !validCardNumber(pan)) {
        errors.push({ code: RetCode.RET010, message: RetMessage.invalidCard });
      } else {
        const c = cardColumnsFromPan(this.config.cardKeys, pan);
        // The first attempt is planned with the card's network (schedule() reads the row).
        row.card_network = cardBrand(pan);
        const pm = { ...row.payment_method, card_account_display: c.display };
        await m.query(
          `UPDATE transactions SET card_enc = $2, card_key_id = $3, card_hmac = $4, card_bin = $5, card_last4 = $6,
             card_network = $7, account_hash = $8, payment_method = $9::jsonb, card_jwe = NULL WHERE id = $1`,
          [
            row.id,
            c.cardEnc,
            c.cardKeyId,
            c.cardHmac,
            c.cardBin,
            c.cardLast4,
            cardBrand(pan),
            c.accountHash,
            JSON.stringify(pm),
          ],
        );
      }
    } else if (row.card_kind === 'token') {
      const token = row.payment_method.id;
      const r = token.length <= limits.maxPaymentMethodIdLength ? await this.processor.detokenize(token) : null;
      if (r && !r.ok) errors.push({ code: RetCode.RET011, message: RetMessage.token });
      else if (r && r.ok) {
        // The token stays the instrument; the card's fingerprint lets the network limits count per card.
        // A token sent without credit_card (or without its BIN) is shown masked, first 6 and last 4.
        row.card_network ??= cardBrand(r.pan);
        const pm = {
          ...row.payment_method,
          card_account_display: row.payment_method.card_account_display ?? maskCardNumber(r.pan),
        };
        await m.query(
          `UPDATE transactions SET card_hmac = $2, card_bin = COALESCE(card_bin, $3), card_last4 = $4,
             card_network = COALESCE(card_network, $5), payment_method = $6::jsonb WHERE id = $1`,
          [
            row.id,
            cardFingerprint(this.config.cardKeys, r.pan),
            r.pan.slice(0, 6),
            r.pan.slice(-4),
            cardBrand(r.pan),
            JSON.stringify(pm),
          ],
        );
      }
    } else if (row.card_kind === 'masked') {
      errors.push({
        code: RetCode.RET012,
        message: RetMessage.check('a full card number or a token is required for retry'),
      });
    }
    if (row.payment_method.id.length > limits.maxPaymentMethodIdLength) {
      errors.push({
        code: RetCode.RET012,
        message: RetMessage.check(`payment_method.id longer than ${limits.maxPaymentMethodIdLength} characters`),
      });
    }
    if (row.billing_descriptor !== null && !limits.billingDescriptorPattern.test(row.billing_descriptor)) {
      errors.push({
        code: RetCode.RET012,
        message: RetMessage.check('billing_descriptor has characters or a length the processor does not accept'),
      });
    }
    return errors;
  }

  /**
   * First retry per the policy; an original decline that must never be retried ends at once:
   * `Cancelled` with a `retry failed` push (decisions §7, content = the submitted transaction),
   * announced in this database transaction. A transaction stopped meanwhile (refund call before
   * the review) is left to its stop. Returns outbox ids to publish after commit.
   */
  private async schedule(m: EntityManager, row: PendingRow): Promise<string[]> {
    const plan = firstAttemptAt({
      startedAt: new Date(row.submitted_ts),
      now: new Date(),
      lastDecline: { responseCode: row.auth_code },
      network: row.card_network,
      amountMinor: BigInt(row.amount_minor),
      cardHistory: [],
      timeScale: this.config.retryTimeScale,
    });
    if (plan.kind === 'retry') {
      // auth_code_description is our reading of the response code the merchant sent (spec: the
      // service's interpretation of the provider response); each attempt then updates it.
      const { description } = classifyDecline({ network: row.card_network, responseCode: row.auth_code });
      await m.query(
        `UPDATE transactions SET review_status = 'passed', updated_at = now(), auth_code_description = $3,
           next_attempt_at = CASE WHEN stop_requested_at IS NULL THEN $2::timestamptz END WHERE id = $1`,
        [row.id, plan.at, description],
      );
      return [];
    }
    await m.query(`UPDATE transactions SET review_status = 'passed', updated_at = now() WHERE id = $1`, [row.id]);
    // TypeORM answers an UPDATE with [rows, affected].
    const [, affected]: [unknown[], number] = await m.query(
      `UPDATE transactions SET status = $2, status_changed_at = now(), auth_code_description = 'Hard Failure',
         next_attempt_at = NULL, updated_at = now() WHERE id = $1 AND stop_requested_at IS NULL`,
      [row.id, TransactionStatus.Cancelled],
    );
    if (affected === 0) return [];
    this.logger.log({ reason: plan.reason }, 'original decline is not retryable: cancelled without attempts');
    const txn = await m.getRepository(TransactionEntity).findOneOrFail({ where: { id: row.id } });
    return announceTransaction(m, txn, EventName.RetryFailed, new Date());
  }
}
