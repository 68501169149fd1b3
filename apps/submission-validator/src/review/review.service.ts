import { Inject, Injectable, Logger } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import {
  OriginalDeclinesRepository,
  PaymentMethodsRepository,
  ProcessorAccountsRepository,
  SubmissionsRepository,
  inTransactionWithRetry,
  settleCardFingerprints,
  type PaymentMethodRow,
  type FirstAttemptPass,
  type PendingReviewRow,
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
  cardDataVersion,
  cardFingerprintCandidates,
  endsCardForAccount,
  endsPaymentMethod,
  firstAttemptAt,
  maskCardNumber,
  naiveScheduleFees,
  originalDeclineAt,
  originalDeclineBindsCard,
  recoveryWindowEnd,
  updaterMayCure,
  validCardNumber,
  type CardAttempt,
  type CardColumns,
  type CardFingerprint,
  type ErrorEntry,
  type Plan,
  type PlanInput,
} from '@retain/domain';
import { RETAIN_CONFIG, accountUpdaterConnected, chargeableBy } from '@retain/platform';
import {
  adoptPaymentMethod,
  announceTransaction,
  freshCardPlan,
  nextPaymentMethod,
  policyInputsFor,
  sharedPolicyReads,
  type SharedPolicyReads,
  rememberPaymentMethod,
  storedExplanation,
  updaterReaches,
} from '@retain/recovery';
import {
  PAYMENT_PROCESSOR,
  ProcessorResolver,
  accountSourceOf,
  checkInstrument,
  type PaymentProcessor,
} from '@retain/processor';
import { OutboxRelay, announce } from '@retain/queues';
import { DataSource, type EntityManager } from 'typeorm';
import { CardDecryptor } from './card-decryptor';

type PendingRow = PendingReviewRow;

/** What the checks found for one transaction, decided before any row is locked. */
interface Verdict {
  errors: ErrorEntry[];
  /** Card columns learned by decrypting or de-tokenizing, stored when the transaction passes. */
  card: CardUpdate | null;
  /** Whether the transaction's processor account can charge another payment method (the fallback's). */
  chargeable: (pm: PaymentMethodRow) => Promise<boolean>;
}

type CardUpdate =
  | { kind: 'pan'; columns: CardColumns; paymentMethod: StoredPaymentMethod }
  | {
      kind: 'token';
      /**
       * cardFingerprintCandidates of the de-tokenized card, or of the processor's saved payment
       * method when its card number is never given back (savedMethodIdentity); current key first.
       */
      fingerprints: CardFingerprint[];
      /** Null: not known from the token (what the submission gave is kept). */
      bin: string | null;
      last4: string | null;
      network: string | null;
      paymentMethod: StoredPaymentMethod;
    };

/**
 * What a saved payment method of a processor that never gives its card number back (Stripe `pm_…`,
 * optionally `cus_…|pm_…`; Adyen `shopperReference|storedPaymentMethodId`) is fingerprinted as: the
 * same saved method is the same card whichever customer prefix comes with it, so the network rules
 * count its attempts and hold its blocks per card (network-rules.md: per card per merchant). Never a
 * string of digits only, so it cannot meet a card number's fingerprint.
 */
function savedMethodIdentity(processor: string, token: string): string {
  return `${processor}:saved-method:${token.slice(token.lastIndexOf('|') + 1)}`;
}

/**
 * The original decline's time (domain originalDeclineAt: its timestamp, never after the submission).
 * The card's history (original_declines) holds it at that time: a MAC 24-30 delay runs from it at the
 * latest, so the review's plan and the retry worker's check (historyAsOf: an entry ahead of now
 * counts as now) agree.
 */
function declinedAtOf(row: Pick<PendingRow, 'failed_at' | 'submitted_ts'>): Date {
  return originalDeclineAt(row.failed_at, row.submitted_ts);
}

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
  /** The processor of a transaction: its merchant's account for its division, else PROCESSOR (§13). */
  private readonly processors: ProcessorResolver;

  constructor(
    private readonly db: DataSource,
    private readonly submissions: SubmissionsRepository,
    private readonly relay: OutboxRelay,
    @Inject(RETAIN_CONFIG) private readonly config: RetainConfig,
    /** The default processor (PROCESSOR), for transactions whose merchant has no account of its own. */
    @Inject(PAYMENT_PROCESSOR) processor: PaymentProcessor,
  ) {
    this.decryptor = new CardDecryptor(config.jweKeys);
    this.processors = new ProcessorResolver(
      accountSourceOf(new ProcessorAccountsRepository(db, config.cardKeys)),
      processor,
    );
  }

  async review(submissionId: string): Promise<{ passed: number; rejected: number }> {
    // 1. Read, without locks. A reviewed submission is never reviewed again.
    const sub = await this.submissions.forReview(submissionId);
    if (!sub || sub.reviewed_at) return { passed: 0, rejected: 0 };
    const rows = await this.submissions.pendingReview(sub.merchant_id, submissionId);
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
    const sub = await this.submissions.lockForReview(m, submissionId);
    if (!sub || sub.reviewed_at) return { passed: 0, rejected: 0, outbox: [] };
    const locked = await this.submissions.lockPendingReview(m, sub.merchant_id, submissionId);
    // A submission's transactions are all inserted with it, so step 1 saw every one of them.
    if (locked.some((r) => !verdicts.has(r.id))) throw new Error('pending transactions changed during the review');
    const lockedIds = new Set(locked.map((r) => r.id));
    const stopped = new Set(locked.filter((r) => r.stopped).map((r) => r.id));
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
    // The account histories of the plans below in one statement, and each decline class's slot counts
    // once: the review decides no attempt and counts no slot, so they hold for all its transactions.
    const shared = await sharedPolicyReads(
      m,
      rows
        .filter((r) => lockedIds.has(r.id) && verdicts.get(r.id)?.errors.length === 0)
        .map((r) => ({ merchantId: sub.merchant_id, transactionId: r.id })),
    );
    const rejected: { id: string; errors: ErrorEntry[] }[] = [];
    let passed = 0;
    const cancelled: string[] = [];
    const passes: FirstAttemptPass[] = [];
    for (const row of rows) {
      const verdict = verdicts.get(row.id);
      if (!verdict || !lockedIds.has(row.id)) continue;
      if (verdict.errors.length > 0 && stopped.has(row.id)) {
        // Stopped before its review (its refund closed, `refund completed` pushed): left to its stop,
        // as a stopped one that passes is (decisions §4: RET004 on its id; §8). Rejecting it would
        // push `validation failed` for a transaction the merchant already saw stopped, and let a
        // resubmission of its id replace it and its refund.
        passed++;
        await this.submissions.closeReviewOfStopped(m, sub.merchant_id, row.id);
      } else if (verdict.errors.length > 0) {
        rejected.push({ id: row.merchant_txn_id, errors: verdict.errors });
        await this.submissions.rejectReview(m, sub.merchant_id, row.id);
      } else {
        passed++;
        if (verdict.card) await this.storeCard(m, sub.merchant_id, row, verdict.card, fingerprints.get(row.id) ?? null);
        // decisions §15: the account remembers this payment method (the transaction charges the stored one).
        const pmRef = await rememberPaymentMethod(m, this.config.cardKeys, sub.merchant_id, row.id);
        cancelled.push(
          ...(await this.schedule(
            m,
            sub.merchant_id,
            row,
            pmRef,
            verdict.chargeable,
            stopped.has(row.id),
            shared,
            passes,
          )),
        );
      }
    }
    await this.submissions.passWithFirstAttempts(m, sub.merchant_id, passes);
    await this.submissions.markReviewed(m, submissionId, rejected.length);
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
    // decisions §13: an account without raw_card_data charges tokenized payment methods only. A JWE
    // is judged by what it holds: one that does not decrypt to a card number is RET010 (§6) first.
    // checkInstrument is the rule the fallbacks apply to the account's other payment methods too.
    const pan = row.card_kind === 'jwe' && row.card_jwe ? await this.decryptor.decrypt(row.card_jwe) : null;
    const accepted =
      row.card_kind === 'jwe' || row.card_kind === 'clear'
        ? await checkInstrument(account, processor, { kind: 'pan' })
        : null;
    if (row.card_kind === 'jwe' && (!pan || !validCardNumber(pan))) {
      errors.push({ code: RetCode.RET010, message: RetMessage.invalidCard });
    } else if (accepted && !accepted.ok) {
      errors.push({ code: RetCode.RET011, message: accepted.message });
    } else if (row.card_kind === 'jwe') {
      if (pan) {
        const c = cardColumnsFromPan(this.config.cardKeys, this.config.cardFingerprintKeys, pan);
        // The first attempt is planned with the card's network (schedule() reads the row).
        row.card_network = cardBrand(pan);
        card = { kind: 'pan', columns: c, paymentMethod: { ...row.payment_method, card_account_display: c.display } };
      }
    } else if (row.card_kind === 'token') {
      const token = row.payment_method.id;
      // Stripe and Adyen never give card numbers back: their tokens are checked, not detokenized (pan
      // null). A token too long for the processor is RET012 below, not RET011.
      const r = await checkInstrument(account, processor, {
        kind: 'token',
        token,
        isNetworkToken: row.is_network_token === 1,
      });
      if (!r.ok) {
        if (r.reason !== 'token_length') errors.push({ code: RetCode.RET011, message: RetMessage.token });
      } else if (r.pan === null) {
        // A network token's number (the DPAN) begins like its network's cards: the network rules
        // (Mastercard's, Visa's) bind it from the first plan on, even when no BIN was sent.
        if (row.is_network_token === 1) row.card_network ??= cardBrand(token);
        // decisions §16: network_advice_code is the Mastercard Merchant Advice Code of the original
        // decline, so a saved payment method sent with one (and no BIN) is a Mastercard card: the code
        // binds from the first attempt (MAC 03/21 never, 24-30 not before their delay).
        else if (row.network_advice_code) row.card_network ??= 'mastercard';
        // No card number to fingerprint: the saved payment method stands for its card.
        card = {
          kind: 'token',
          fingerprints: cardFingerprintCandidates(
            this.config.cardFingerprintKeys,
            this.config.cardKeys,
            savedMethodIdentity(processor.name, token),
          ),
          bin: null,
          last4: null,
          network: row.card_network,
          paymentMethod: row.payment_method,
        };
      } else {
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
    if (limits.amountFits && !limits.amountFits(BigInt(row.amount_minor), row.currency)) {
      // A processor counting the currency with fewer decimals (Adyen IDR, Stripe MGA), or taking only
      // multiples of some units (Stripe KWD: whole tens of fils), has no units for the fraction; one
      // with a minimum charge (Stripe USD 0.50) refuses less; none charges in an ISO fund code (CLF):
      // no attempt could ever charge it.
      errors.push({
        code: RetCode.RET012,
        message: RetMessage.check(
          `the processor cannot charge this amount in ${row.currency} (not a currency it charges in, no such fraction there, or below its minimum charge)`,
        ),
      });
    }
    // An empty descriptor is none (spec: optional text): the charge sends none, so nothing to refuse.
    if (row.billing_descriptor && !limits.billingDescriptorPattern.test(row.billing_descriptor)) {
      errors.push({
        code: RetCode.RET012,
        message: RetMessage.check('billing_descriptor has characters or a length the processor does not accept'),
      });
    }
    return { errors, card, chargeable: chargeableBy(account, processor) };
  }

  /** Stores what the check learned of the card (the caller holds the row lock). */
  private async storeCard(
    m: EntityManager,
    merchantId: string,
    row: PendingRow,
    card: CardUpdate,
    fingerprint: CardFingerprint | null,
  ): Promise<void> {
    if (card.kind === 'pan') {
      const c = card.columns;
      await this.submissions.storePanCard(
        m,
        merchantId,
        row.id,
        {
          cardEnc: c.cardEnc,
          cardKeyId: c.cardKeyId,
          cardBin: c.cardBin,
          cardLast4: c.cardLast4,
          cardNetwork: row.card_network,
          accountHash: c.accountHash,
          paymentMethod: card.paymentMethod,
        },
        fingerprint,
      );
      return;
    }
    await this.submissions.storeTokenCard(
      m,
      merchantId,
      row.id,
      { bin: card.bin, last4: card.last4, network: card.network, paymentMethod: card.paymentMethod },
      fingerprint,
    );
  }

  /**
   * The submitted payment method cannot be retried (decisions §15): it ends when the decline binds
   * the card for good, and the account's next eligible payment method is adopted (one the network
   * rules allow: the original decline is already in the card's history). Returns when its first
   * attempt is due, or null.
   */
  private async fallback(
    m: EntityManager,
    merchantId: string,
    row: PendingRow,
    pmRef: string,
    reason: string,
    /** Whether the payment method ends (and whether every one of the account carrying its card does). */
    endIt: { sameCard: boolean } | null,
    windowEnd: Date,
    /** Whether the transaction's processor account can charge a payment method (decisions §13). */
    chargeable: (pm: PaymentMethodRow) => Promise<boolean>,
  ): Promise<(Plan & { kind: 'retry' }) | null> {
    const txn = await this.submissions.transaction(m, merchantId, row.id);
    // Only a decline that binds the card for good ends it (as in the retry worker); a data-quality
    // block leaves it to the network rules (new data lifts it) and to the account updater.
    if (endIt) await PaymentMethodsRepository.end(m, merchantId, pmRef, reason, endIt);
    const next = await nextPaymentMethod(m, {
      merchantId,
      accountId: txn.accountId,
      transactionId: txn.id,
      except: [pmRef],
      now: new Date(),
      until: windowEnd,
      amountMinor: BigInt(row.amount_minor),
      timeScale: this.config.retryTimeScale,
      updaterOn: accountUpdaterConnected(this.config),
      chargeable,
    });
    if (!next) return null;
    await adoptPaymentMethod(m, merchantId, row.id, next.pm);
    // Its first attempt as the retry worker's fallback plans one: from when the limits allow it.
    const plan = await this.freshCardPlan(m, merchantId, row, next.at);
    if (plan.kind !== 'retry') return null;
    this.logger.log({ reason }, 'submitted payment method cannot be retried: the account has another');
    return plan;
  }

  /**
   * freshCardPlan of the transaction's card as stored now, with its policy inputs: `inputs` when the
   * caller read them for this card, read again after an adoption (another card's expiry and BIN).
   */
  private async freshCardPlan(
    m: EntityManager,
    merchantId: string,
    row: PendingRow,
    now: Date,
    inputs?: Partial<PlanInput>,
  ): Promise<Plan> {
    const txn = await this.submissions.transaction(m, merchantId, row.id);
    const planned = inputs ?? (await policyInputsFor(m, merchantId, row.id, accountUpdaterConnected(this.config)));
    return freshCardPlan(txn, 0, planned, now, this.config.retryTimeScale);
  }

  /**
   * First retry per the policy; an original decline that must never be retried ends at once:
   * `Cancelled` with a `retry failed` push (decisions §7, content = the submitted transaction),
   * announced in this database transaction. A transaction stopped meanwhile (refund call before
   * the review) is left to its stop. Returns outbox ids to publish after commit.
   */
  private async schedule(
    m: EntityManager,
    merchantId: string,
    row: PendingRow,
    pmRef: string | null,
    chargeable: (pm: PaymentMethodRow) => Promise<boolean>,
    /** Stopped before its review (read under the row lock): never moved to another payment method. */
    stopped: boolean,
    shared: SharedPolicyReads,
    /** Where a transaction passed with its first attempt goes: written for all of them after the loop. */
    passes: FirstAttemptPass[],
  ): Promise<string[]> {
    const policyInputs = await policyInputsFor(m, merchantId, row.id, accountUpdaterConnected(this.config), shared);
    const declined = {
      network: row.card_network,
      responseCode: row.auth_code,
      merchantAdviceCode: row.network_advice_code,
    };
    const declinedAt = declinedAtOf(row);
    const original = classifyDecline(declined, declinedAt);
    // network-rules.md: a decline that binds the card (a block, a MAC 24-30 delay) binds every attempt
    // of this transaction on that card, whichever payment method carries it (original_declines).
    const bound = originalDeclineBindsCard(declined, declinedAt)
      ? await this.recordOriginalDecline(m, merchantId, row)
      : null;
    const plan = firstAttemptAt({
      ...policyInputs,
      startedAt: new Date(row.submitted_ts),
      now: new Date(),
      // The original decline is judged by the network rules in force when it arrived (its timestamp,
      // never after the submission).
      lastDecline: {
        responseCode: row.auth_code,
        merchantAdviceCode: row.network_advice_code,
        at: declinedAt,
      },
      network: row.card_network,
      amountMinor: BigInt(row.amount_minor),
      // Every policy obeys the original's MAC 24-30 delay from the first attempt (decisions §16).
      cardHistory: bound ? [bound] : [],
      cardDataVersion: bound?.cardDataVersion ?? null,
      timeScale: this.config.retryTimeScale,
    });
    if (plan.kind === 'retry') {
      // auth_code_description is our reading of the response code the merchant sent (spec: the
      // service's interpretation of the provider response); each attempt then updates it.
      const explanation = storedExplanation(plan.explain, policyInputs.policy?.version);
      passes.push({ transactionId: row.id, at: plan.at, authCodeDescription: original.description, plan: explanation });
      return [];
    }
    // decisions §15: "the account updater runs for data-quality declines", the original one too.
    // The card is kept and its first attempt planned like a cleared outage; the retry worker asks
    // the updater before it (once per card data version) and charges only new data.
    if (pmRef && bound && updaterMayCure(original) && (await this.updaterMayRenew(m, merchantId, row))) {
      const first = await this.freshCardPlan(m, merchantId, row, new Date(), policyInputs);
      if (first.kind === 'retry') {
        const explanation = storedExplanation(first.explain, policyInputs.policy?.version);
        passes.push({
          transactionId: row.id,
          at: first.at,
          authCodeDescription: original.description,
          plan: explanation,
        });
        this.logger.log({ reason: plan.reason }, 'data-quality original decline: the account updater first');
        return [];
      }
    }
    // A transaction stopped before its review stays on the payment method it was stopped with (its
    // stop's refund and push named it): the account's next one is never adopted for it.
    const fallback =
      pmRef && !stopped
        ? await this.fallback(
            m,
            merchantId,
            row,
            pmRef,
            plan.reason,
            endsPaymentMethod(original) ? { sameCard: endsCardForAccount(original) } : null,
            recoveryWindowEnd({
              ...policyInputs,
              startedAt: new Date(row.submitted_ts),
              timeScale: this.config.retryTimeScale,
            }),
            chargeable,
          )
        : null;
    if (fallback) {
      const explanation = storedExplanation(fallback.explain, policyInputs.policy?.version);
      passes.push({
        transactionId: row.id,
        at: fallback.at,
        authCodeDescription: original.description,
        plan: explanation,
      });
      return [];
    }
    // No attempt, so no fee paid; a naive daily schedule would have retried it anyway (network-rules.md).
    const naive = naiveScheduleFees({
      network: row.card_network,
      amountMinor: BigInt(row.amount_minor),
      original: {
        at: declinedAt,
        responseCode: row.auth_code,
        merchantAdviceCode: row.network_advice_code,
      },
      attempts: [],
      recoveredAt: null,
    });
    if (
      !(await this.submissions.passWithoutAttempts(m, merchantId, row.id, TransactionStatus.Cancelled, naive.feeMinor))
    )
      return [];
    this.logger.log({ reason: plan.reason }, 'original decline is not retryable: cancelled without attempts');
    const txn = await this.submissions.transaction(m, merchantId, row.id);
    return announceTransaction(m, txn, EventName.RetryFailed, new Date());
  }

  /**
   * Keeps the original decline with the card's history (original_declines) and returns it as a
   * history entry. Null when the card has no fingerprint.
   */
  private async recordOriginalDecline(
    m: EntityManager,
    merchantId: string,
    row: PendingRow,
  ): Promise<CardAttempt | null> {
    const txn = await this.submissions.transaction(m, merchantId, row.id);
    if (!txn.cardHmac) return null;
    const entry: CardAttempt = {
      at: declinedAtOf(row),
      amountMinor: BigInt(row.amount_minor),
      outcome: 'declined',
      original: true,
      responseCode: row.auth_code,
      merchantAdviceCode: row.network_advice_code,
      cardDataVersion: cardDataVersion(txn.expirationDate),
    };
    await OriginalDeclinesRepository.record(m, {
      transactionId: txn.id,
      merchantId,
      cardHmac: txn.cardHmac,
      at: entry.at,
      amountMinor: String(row.amount_minor),
      responseCode: row.auth_code,
      merchantAdviceCode: row.network_advice_code,
      cardDataVersion: entry.cardDataVersion ?? null,
    });
    return entry;
  }

  /**
   * Whether the account updater may yet renew the transaction's card: a stored card number or a
   * token this review de-tokenized (updaterReaches: its last 4 come from that number; never a Stripe
   * or Adyen saved payment method, only checked, which their processors keep up to date), an updater
   * connected, and the updater not yet asked about this very card data (it is asked once per version).
   */
  private async updaterMayRenew(m: EntityManager, merchantId: string, row: PendingRow): Promise<boolean> {
    const txn = await this.submissions.transaction(m, merchantId, row.id);
    if (!txn.paymentMethodRef || !updaterReaches(txn)) return false;
    if (txn.cardKind !== 'token' && txn.cardEnc === null) return false;
    const pm = await PaymentMethodsRepository.get(m, merchantId, txn.paymentMethodRef);
    return (
      pm !== null &&
      pm.updater_checked_version !== cardDataVersion(pm.expiration_date) &&
      accountUpdaterConnected(this.config)
    );
  }
}
