import { Inject, Injectable, Logger } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import {
  ProcessorAccountsRepository,
  TransactionEntity,
  inTransactionWithRetry,
  settleCardFingerprints,
  type StoredPaymentMethod,
} from '@retain/db';
import {
  classifyDecline,
  EventName,
  RetCode,
  RetMessage,
  TransactionStatus,
  cardBrand,
  cardColumnsFromPan,
  cardFingerprintCandidates,
  firstAttemptAt,
  maskCardNumber,
  validCardNumber,
  type CardColumns,
  type CardFingerprint,
  type ErrorEntry,
} from '@retain/domain';
import { RETAIN_CONFIG } from '@retain/platform';
import { announceTransaction } from '@retain/recovery';
import {
  PgSandboxLedger,
  ProcessorResolver,
  accountAccepts,
  accountSourceOf,
  createProcessor,
  type PaymentProcessor,
} from '@retain/processor';
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
  division_number: string | null;
  billing_descriptor: string | null;
  auth_code: string;
  amount_minor: string;
  submitted_ts: Date;
}

/** What the checks found for one transaction, decided before any row is locked. */
interface Verdict {
  errors: ErrorEntry[];
  /** Card columns learned by decrypting or de-tokenizing, stored when the transaction passes. */
  card: CardUpdate | null;
}

type CardUpdate =
  | { kind: 'pan'; columns: CardColumns; paymentMethod: StoredPaymentMethod }
  | {
      kind: 'token';
      /** cardFingerprintCandidates of the de-tokenized card, current key first. */
      fingerprints: CardFingerprint[];
      bin: string;
      last4: string;
      network: string | null;
      paymentMethod: StoredPaymentMethod;
    };

function fingerprintsOf(card: CardUpdate): CardFingerprint[] {
  return card.kind === 'pan' ? card.columns.fingerprints : card.fingerprints;
}

/**
 * The post-submission review (decisions §6): decrypt JWE card numbers, de-tokenize tokens, check
 * processor limits; schedule the first attempt of those that pass; one `validation failed` push per
 * submission for those that fail. Idempotent: a reviewed submission is never reviewed again.
 * The decryption and de-tokenization run before the locking transaction (read, check, then
 * lock + re-check + write), so no row lock is ever held across a processor call.
 */
@Injectable()
export class ReviewService {
  private readonly logger = new Logger(ReviewService.name);
  private readonly decryptor: CardDecryptor;
  private readonly processor: PaymentProcessor;
  /** The processor of a transaction: its merchant's account for its division, else PROCESSOR (§13). */
  private readonly processors: ProcessorResolver;

  constructor(
    private readonly db: DataSource,
    private readonly relay: OutboxRelay,
    @Inject(RETAIN_CONFIG) private readonly config: RetainConfig,
  ) {
    this.decryptor = new CardDecryptor(config.jweKeys);
    this.processor = createProcessor(config.processor, new PgSandboxLedger(db));
    this.processors = new ProcessorResolver(
      accountSourceOf(new ProcessorAccountsRepository(db, config.cardKeys)),
      this.processor,
    );
  }

  async review(submissionId: string): Promise<{ passed: number; rejected: number }> {
    // 1. Read, without locks. A reviewed submission is never reviewed again.
    const [sub]: { merchant_id: string; reviewed_at: Date | null }[] = await this.db.query(
      `SELECT merchant_id, reviewed_at FROM submissions WHERE id = $1`,
      [submissionId],
    );
    if (!sub || sub.reviewed_at) return { passed: 0, rejected: 0 };
    const rows: PendingRow[] = await this.db.query(
      `SELECT id, merchant_txn_id, card_kind, card_jwe, card_network, payment_method, division_number,
              billing_descriptor, auth_code, amount_minor, submitted_ts
         FROM transactions WHERE submission_id = $1 AND review_status = 'pending' ORDER BY merchant_txn_id`,
      [submissionId],
    );
    // 2. The slow calls (JWE decryption, the processor's de-tokenization) with no row locked and no
    //    database transaction open: a stop request on these transactions meanwhile waits for nothing.
    const verdicts = new Map<string, Verdict>();
    for (const row of rows) verdicts.set(row.id, await this.check(row, sub.merchant_id));
    // 3. Lock, re-check, write; run again after a deadlock or serialization failure.
    const result = await inTransactionWithRetry(this.db, (m) => this.record(m, submissionId, rows, verdicts), {
      onRetry: (r) => this.logger.warn(r, 'review transaction retried'),
    });
    this.relay.publish(result.outbox).catch((err: unknown) => {
      this.logger.warn({ err: (err as Error).message }, 'outbox publish deferred to the sweeper');
    });
    return { passed: result.passed, rejected: result.rejected };
  }

  /**
   * Writes the verdicts under the locks. The submission row is locked FOR NO KEY UPDATE (its key
   * never changes), which a foreign-key check (KEY SHARE) from a stop request does not wait on;
   * its transactions are then locked in merchant_txn_id order, the order a stop request locks
   * them in. So a review and a stop never wait on each other in a cycle (issue 9, item 6).
   */
  private async record(
    m: EntityManager,
    submissionId: string,
    rows: PendingRow[],
    verdicts: Map<string, Verdict>,
  ): Promise<{ passed: number; rejected: number; outbox: string[] }> {
    const [sub]: { id: string; merchant_id: string; request_id: string; reviewed_at: Date | null }[] = await m.query(
      `SELECT id, merchant_id, request_id, reviewed_at FROM submissions WHERE id = $1 FOR NO KEY UPDATE`,
      [submissionId],
    );
    if (!sub || sub.reviewed_at) return { passed: 0, rejected: 0, outbox: [] };
    const locked: { id: string }[] = await m.query(
      `SELECT id FROM transactions WHERE submission_id = $1 AND review_status = 'pending'
        ORDER BY merchant_txn_id FOR NO KEY UPDATE`,
      [submissionId],
    );
    // A submission's transactions are all inserted with it, so step 1 saw every one of them.
    if (locked.some((r) => !verdicts.has(r.id))) throw new Error('pending transactions changed during the review');
    const lockedIds = new Set(locked.map((r) => r.id));
    // A card already stored for this merchant keeps its fingerprint (any key id): its limits hold.
    const withCard = rows.filter(
      (r) => lockedIds.has(r.id) && verdicts.get(r.id)?.card && !verdicts.get(r.id)?.errors.length,
    );
    const settled = await settleCardFingerprints(
      m,
      sub.merchant_id,
      withCard.map((r) => fingerprintsOf(verdicts.get(r.id)!.card!)),
    );
    const fingerprints = new Map(withCard.map((r, i) => [r.id, settled[i] ?? null]));
    const rejected: { id: string; errors: ErrorEntry[] }[] = [];
    let passed = 0;
    const cancelled: string[] = [];
    for (const row of rows) {
      const verdict = verdicts.get(row.id);
      if (!verdict || !lockedIds.has(row.id)) continue;
      if (verdict.errors.length > 0) {
        rejected.push({ id: row.merchant_txn_id, errors: verdict.errors });
        await m.query(
          `UPDATE transactions SET review_status = 'rejected', next_attempt_at = NULL, card_jwe = NULL, updated_at = now()
            WHERE id = $1`,
          [row.id],
        );
      } else {
        passed++;
        if (verdict.card) await this.storeCard(m, row, verdict.card, fingerprints.get(row.id) ?? null);
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
  }

  /**
   * All review failures of one transaction, and the card columns to store when it decrypted or
   * de-tokenized the card. Reads and writes no row: it runs before any lock is taken.
   */
  private async check(row: PendingRow, merchantId: string): Promise<Verdict> {
    const errors: ErrorEntry[] = [];
    let card: CardUpdate | null = null;
    const account = await this.processors.account(merchantId, row.division_number);
    const processor = await this.processors.forTransaction(merchantId, row.division_number);
    const limits = processor.limits;
    if ((row.card_kind === 'jwe' || row.card_kind === 'clear') && !accountAccepts(account, { kind: 'pan' })) {
      // decisions §13: an account without raw_card_data charges tokenized payment methods only.
      errors.push({
        code: RetCode.RET011,
        message: "The merchant's processor account takes tokenized payment methods only",
      });
    } else if (row.card_kind === 'jwe') {
      const pan = row.card_jwe ? await this.decryptor.decrypt(row.card_jwe) : null;
      if (!pan || !validCardNumber(pan)) {
        errors.push({ code: RetCode.RET010, message: RetMessage.invalidCard });
      } else {
        const c = cardColumnsFromPan(this.config.cardKeys, this.config.cardFingerprintKeys, pan);
        // The first attempt is planned with the card's network (schedule() reads the row).
        row.card_network = cardBrand(pan);
        card = { kind: 'pan', columns: c, paymentMethod: { ...row.payment_method, card_account_display: c.display } };
      }
    } else if (row.card_kind === 'token') {
      const token = row.payment_method.id;
      const fits = token.length <= limits.maxPaymentMethodIdLength;
      // Stripe and Adyen never give card numbers back: their tokens are checked, not detokenized.
      const checked = fits && processor.checkToken ? processor.checkToken(token) : null;
      const r = fits && !checked ? await processor.detokenize(token) : null;
      if (checked && !checked.ok) errors.push({ code: RetCode.RET011, message: RetMessage.token });
      else if (r && !r.ok) errors.push({ code: RetCode.RET011, message: RetMessage.token });
      else if (r && r.ok) {
        // The token stays the instrument; the card's fingerprint lets the network limits count per card.
        // A token sent without credit_card (or without its BIN) is shown masked, first 6 and last 4.
        row.card_network ??= cardBrand(r.pan);
        card = {
          kind: 'token',
          fingerprints: cardFingerprintCandidates(this.config.cardFingerprintKeys, this.config.cardKeys, r.pan),
          bin: r.pan.slice(0, 6),
          last4: r.pan.slice(-4),
          network: cardBrand(r.pan),
          paymentMethod: {
            ...row.payment_method,
            card_account_display: row.payment_method.card_account_display ?? maskCardNumber(r.pan),
          },
        };
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
    return { errors, card };
  }

  /** Stores what the check learned of the card (the caller holds the row lock). */
  private async storeCard(
    m: EntityManager,
    row: PendingRow,
    card: CardUpdate,
    fingerprint: CardFingerprint | null,
  ): Promise<void> {
    if (card.kind === 'pan') {
      const c = card.columns;
      await m.query(
        `UPDATE transactions SET card_enc = $2, card_key_id = $3, card_hmac = $4, card_bin = $5, card_last4 = $6,
           card_network = $7, account_hash = $8, payment_method = $9::jsonb, card_jwe = NULL, card_hmac_key_id = $10
         WHERE id = $1`,
        [
          row.id,
          c.cardEnc,
          c.cardKeyId,
          fingerprint?.value ?? null,
          c.cardBin,
          c.cardLast4,
          row.card_network,
          c.accountHash,
          JSON.stringify(card.paymentMethod),
          fingerprint?.keyId ?? null,
        ],
      );
      return;
    }
    await m.query(
      `UPDATE transactions SET card_hmac = $2, card_bin = COALESCE(card_bin, $3), card_last4 = $4,
         card_network = COALESCE(card_network, $5), payment_method = $6::jsonb, card_hmac_key_id = $7 WHERE id = $1`,
      [
        row.id,
        fingerprint?.value ?? null,
        card.bin,
        card.last4,
        card.network,
        JSON.stringify(card.paymentMethod),
        fingerprint?.keyId ?? null,
      ],
    );
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
