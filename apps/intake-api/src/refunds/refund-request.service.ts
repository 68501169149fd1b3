import { createHash } from 'node:crypto';
import { HttpException, HttpStatus, Injectable, Logger } from '@nestjs/common';
import {
  amountToMinor,
  validateRefunds,
  type NormalizedRefundRequest,
  type ValidatedRefund,
} from '@retain/api-contract';
import {
  AttemptsRepository,
  RefundIdempotencyRepository,
  RefundsRepository,
  inTransactionWithRetry,
  type TransactionEntity,
} from '@retain/db';
import {
  IN_RETRY_STATUSES,
  RefundStatus,
  RetCode,
  RetMessage,
  TransactionStatus,
  newVid,
  type ErrorEntry,
} from '@retain/domain';
import { closeStop, statusBeforeRefunds, unresolvedAttempts } from '@retain/recovery';
import { OutboxRelay } from '@retain/queues';
import { processorCanRefund } from '@retain/processor';
import { DataSource, type EntityManager } from 'typeorm';
import type { AuthenticatedMerchant } from '../auth/merchant-auth.guard';

export interface RefundCallResult {
  status: 200 | 207;
  body: { message: string; error_count?: number; rejected?: { id: string; errors: ErrorEntry[] }[] };
}

/** The answer stored with an Idempotency-Key, replayed to every retry of the call within 24 h. */
class Replay extends Error {
  constructor(readonly result: RefundCallResult) {
    super('replayed');
  }
}

/** Transactions with money captured (a refund is possible). */
const CAPTURED = [
  TransactionStatus.Captured,
  TransactionStatus.Settled,
  TransactionStatus.PartiallyRefunded,
  TransactionStatus.RefundRequested,
  TransactionStatus.Refunded,
] as string[];

/**
 * RET009 when one of the processors the money was (or may be) captured through cannot refund this
 * amount of the currency (it has no units for it: KWD 1.005 at Stripe); null stands for the app's
 * processor, which takes any ISO amount.
 */
function cannotRefund(processors: (string | null)[], amountMinor: bigint, currency: string): ErrorEntry | undefined {
  const refuser = processors.find((p) => !processorCanRefund(p, amountMinor, currency));
  if (refuser === undefined) return undefined;
  return {
    code: RetCode.RET009,
    message: RetMessage.schema('amount', `cannot be refunded in ${currency} by ${refuser ?? 'the processor'}`),
  };
}

class DryRunRollback extends Error {}

/**
 * What an Idempotency-Key is bound to: the request as read, not its text. Per item in order, its
 * id and amount (null when absent) or, for an item rejected while reading, its errors. Key
 * order, spacing, number spelling (`10`, `10.0`, `1e1`) and unknown fields do not make another
 * request; anything that changes the answer does. Flat, so any nesting of the body is hashed
 * safely (the body itself is not walked: JSON.stringify of a deep body throws).
 */
function hashRequest(items: ValidatedRefund[]): string {
  const canonical = items.map((item) =>
    'errors' in item ? [item.index, item.id, item.errors] : [item.index, item.id, item.value.amount],
  );
  return createHash('sha256').update(JSON.stringify(canonical)).digest('hex');
}

/**
 * POST /retain/refunds (decisions §8). Every item is decided under a row lock on its transaction,
 * so the refundable amount (captured minus refunds not Failed, in minor units) holds under
 * concurrent calls. Accepted items commit together; rejected ones change nothing.
 */
@Injectable()
export class RefundRequestService {
  private readonly logger = new Logger(RefundRequestService.name);

  constructor(
    private readonly db: DataSource,
    private readonly refunds: RefundsRepository,
    private readonly relay: OutboxRelay,
  ) {}

  /**
   * With an `idempotencyKey` (the Idempotency-Key header), the call's answer is stored with the key
   * in the same database transaction as its refunds; a retry with the key and the same body gets that
   * answer again and changes nothing, a concurrent one waits for the first and then does the same,
   * and the key with another body is refused (RET400). A dry run stores nothing.
   */
  async request(
    merchant: AuthenticatedMerchant,
    body: unknown,
    dryrun: boolean,
    idempotencyKey: string | null = null,
  ): Promise<RefundCallResult> {
    const validated = validateRefunds(body);
    if (!validated.ok) throw new HttpException(validated.error, HttpStatus.BAD_REQUEST);
    const errors = new Map<number, ErrorEntry[]>();
    const candidates: { index: number; value: NormalizedRefundRequest }[] = [];
    for (const item of validated.items) {
      if ('errors' in item) errors.set(item.index, item.errors);
      else candidates.push({ index: item.index, value: item.value });
    }
    let accepted = 0;
    let outbox: string[] = [];
    // Rejections found while validating; a transaction that is retried starts again from these.
    const validationErrors = new Map(errors);
    const key = idempotencyKey && !dryrun ? idempotencyKey : null;
    const requestHash = key ? hashRequest(validated.items) : '';
    const answer = (): RefundCallResult => {
      const message = `${accepted} refunds received for processing`;
      if (errors.size === 0) return { status: 200, body: { message } };
      const rejected = [...errors.entries()]
        .sort((a, b) => a[0] - b[0])
        .map(([index, errs]) => ({ id: validated.items[index]?.id ?? `refunds[${index}]`, errors: errs }));
      return { status: 207, body: { message, error_count: rejected.length, rejected } };
    };
    try {
      await this.transaction(async (m) => {
        if (key) {
          const claim = await RefundIdempotencyRepository.claim(m, merchant.id, key, requestHash);
          if (claim.kind === 'mismatch')
            throw new HttpException(
              {
                code: RetCode.RET400,
                message: `${RetMessage.invalidParameter('Idempotency-Key')} (used with another request body)`,
              },
              HttpStatus.BAD_REQUEST,
            );
          if (claim.kind === 'replay')
            throw new Replay({
              status: claim.statusCode as 200 | 207,
              body: claim.response as RefundCallResult['body'],
            });
        }
        errors.clear();
        for (const [index, errs] of validationErrors) errors.set(index, [...errs]);
        const r = await this.apply(m, merchant.id, candidates, errors);
        accepted = r.accepted;
        outbox = r.outbox;
        if (dryrun) throw new DryRunRollback();
        if (key) {
          const result = answer();
          await RefundIdempotencyRepository.complete(m, merchant.id, key, result.status, result.body);
        }
      });
    } catch (err) {
      if (err instanceof Replay) return err.result;
      if (!(err instanceof DryRunRollback)) throw err;
      outbox = [];
    }
    this.relay.publish(outbox).catch((err: unknown) => {
      this.logger.warn({ err: (err as Error).message }, 'outbox publish deferred to the sweeper');
    });
    return answer();
  }

  /** A database transaction, run again after a deadlock or serialization failure (libs/db). */
  private transaction<T>(fn: (m: EntityManager) => Promise<T>): Promise<T> {
    return inTransactionWithRetry(this.db, fn, {
      onRetry: (r) => this.logger.warn(r, 'refund request transaction retried'),
    });
  }

  private async apply(
    m: EntityManager,
    merchantId: string,
    candidates: { index: number; value: NormalizedRefundRequest }[],
    errors: Map<number, ErrorEntry[]>,
  ): Promise<{ accepted: number; outbox: string[] }> {
    if (candidates.length === 0) return { accepted: 0, outbox: [] };
    // Lock in a stable order (the review's too) so two calls touching the same transactions cannot
    // deadlock (FOR NO KEY UPDATE, see RefundsRepository.lockTransactions).
    const ids = [...new Set(candidates.map((c) => c.value.id))].sort();
    const txns = await this.refunds.lockTransactions(m, merchantId, ids);
    const byId = new Map(txns.map((t) => [t.merchantTxnId, t]));
    const outbox: string[] = [];
    let accepted = 0;
    for (const { index, value } of candidates) {
      const txn = byId.get(value.id);
      const reject = (e: ErrorEntry): void => {
        errors.set(index, [...(errors.get(index) ?? []), e]);
      };
      if (!txn) {
        reject({ code: RetCode.RET0404, message: RetMessage.notFound });
        continue;
      }
      let requested: bigint | null = null;
      if (value.amount !== null) {
        const check = amountToMinor(value.amount, txn.currency);
        if (!check.ok) {
          reject(check.error);
          continue;
        }
        requested = check.minor;
      }
      const status = txn.status;
      if (
        status === TransactionStatus.Cancelled ||
        status === TransactionStatus.Stopped ||
        txn.reviewStatus === 'rejected'
      ) {
        reject({ code: RetCode.RET015, message: RetMessage.refundCancelled });
        continue;
      }
      if (CAPTURED.includes(status)) {
        const refundable = await this.refundable(m, txn);
        const amount = requested ?? refundable;
        if (amount <= 0n || amount > refundable) {
          reject({ code: RetCode.RET027, message: RetMessage.refundExceeds });
          continue;
        }
        // Refused now rather than answered `received` and failed in the next batch (KWD 1.005 at Stripe).
        const refuser = cannotRefund([await RefundsRepository.capturingProcessor(m, txn)], amount, txn.currency);
        if (refuser !== undefined) {
          reject(refuser);
          continue;
        }
        await this.createRefund(m, txn, 'refund', amount);
        Object.assign(txn, { status: TransactionStatus.RefundRequested, statusChangedAt: new Date() });
        await this.refunds.saveTransaction(m, txn);
        accepted++;
        continue;
      }
      if ((IN_RETRY_STATUSES as readonly string[]).includes(status)) {
        const amount = requested ?? BigInt(txn.amountMinor);
        if (amount > BigInt(txn.amountMinor)) {
          reject({ code: RetCode.RET027, message: RetMessage.refundExceeds });
          continue;
        }
        // A capture in flight turns the stop into a refund of this amount: one its processor cannot
        // make would fail in the batch, and the customer stay charged though the merchant stopped.
        const refuser = cannotRefund(await RefundsRepository.chargingProcessors(m, txn), amount, txn.currency);
        if (refuser !== undefined) {
          reject(refuser);
          continue;
        }
        await this.createRefund(m, txn, 'stop', amount);
        // An attempt the tick made that never went to the processor (no in-flight mark: queued, or its
        // job failed for good) never starts now: dropped under this row lock, as the worker drops it.
        const dropped = await AttemptsRepository.dropUnstarted(m, txn.id);
        // Attempts that may still have charged (prepared pending, or unknown until reconciled) hold the stop open.
        const n = await unresolvedAttempts(m, txn.id);
        Object.assign(txn, {
          attemptCount: txn.attemptCount - dropped,
          status: TransactionStatus.StopRequested,
          stopRequestedAt: new Date(),
          nextAttemptAt: null,
          statusChangedAt: new Date(),
        });
        // The row is written once: a second UPDATE of a row this transaction already updated
        // re-checks its foreign keys (KEY SHARE on the submission row, which the review locks).
        // No attempt pending or unknown: the stop completes now (closeStop writes the row). Otherwise the
        // retry worker completes it when the attempt's outcome is recorded or reconciled (a capture turns it
        // into a refund).
        if (n === 0) outbox.push(...(await closeStop(m, txn)));
        else await this.refunds.saveTransaction(m, txn);
        accepted++;
        continue;
      }
      if (status === TransactionStatus.StopRequested) {
        // A repeated stop (README, refunds): accepted idempotently. The stop already requested
        // stands as it is (its amount, its refund); nothing new is created or announced.
        if (requested !== null && requested > BigInt(txn.amountMinor)) {
          reject({ code: RetCode.RET027, message: RetMessage.refundExceeds });
          continue;
        }
        accepted++;
        continue;
      }
      reject({ code: RetCode.RET027, message: RetMessage.refundExceeds });
    }
    return { accepted, outbox };
  }

  /**
   * Captured minus every refund that has not failed, in minor units, and at most what is left of the
   * transaction's own charge (a second capture refunded on its own charge is not the merchant's).
   */
  private async refundable(m: EntityManager, txn: TransactionEntity): Promise<bigint> {
    return RefundsRepository.refundableMinor(m, txn);
  }

  private async createRefund(
    m: EntityManager,
    txn: TransactionEntity,
    kind: 'refund' | 'stop',
    amount: bigint,
  ): Promise<void> {
    // The status to go back to if the processor rejects it: the one before any refund request.
    const previous = await statusBeforeRefunds(m, txn);
    const now = new Date();
    await this.refunds.insert(m, {
      vid: newVid(),
      merchantId: txn.merchantId,
      transactionId: txn.id,
      kind,
      amountMinor: amount.toString(),
      currency: txn.currency,
      status: RefundStatus.Processing,
      previousStatus: previous,
      requestedAt: now,
      timestamp: now,
    });
  }
}
