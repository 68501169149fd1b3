import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import {
  AttemptEntity,
  OriginalDeclinesRepository,
  PaymentMethodsRepository,
  TransactionEntity,
  settleCardFingerprints,
  type CardDataUpdate,
  type PaymentMethodRow,
} from '@retain/db';
import {
  cardColumnsFromPan,
  cardDataVersion,
  cardBrand,
  classifyDecline,
  endsCardForAccount,
  endsPaymentMethod,
  open,
  recoveryWindowEnd,
  updaterMayCure,
  type Plan,
  type PlanInput,
} from '@retain/domain';
import { RETAIN_CONFIG, chargeableBy } from '@retain/platform';
import {
  ACCOUNT_UPDATER,
  NO_ACCOUNT_UPDATER,
  TRANSACTION_PROCESSORS,
  encryptCardUpdate,
  type AccountUpdater,
  type AccountUpdaterAnswer,
  type ChargeResult,
  type TransactionProcessors,
} from '@retain/processor';
import {
  adoptPaymentMethod,
  cardExpired,
  cryptogramOf,
  declineTime,
  freshCardPlan,
  limitsOf,
  nextPaymentMethod,
  paymentMethodChanged,
  policyInputsFor,
  reloadTransaction,
  transactionWindowEnd,
  updaterMayRenew,
  updaterReaches,
} from '@retain/recovery';
import { DataSource, type EntityManager } from 'typeorm';

/** How long an attempt waits while another charge of the same customer is at the processor. */
const CUSTOMER_BUSY_WAIT_MS = 2_000;

export type CardChoice = { kind: 'charge' } | { kind: 'wait'; until: Date } | { kind: 'none'; reason: string };

/**
 * The customer's payment methods in the retry worker (decisions §15): one charge at a time per
 * customer, the card each attempt charges (the transaction's, newer data of it, or the account's
 * next one), the account updater for data-quality declines and expired cards. Transactions from
 * before the payment_methods table (payment_method_ref null) keep their own card only.
 */
@Injectable()
export class PaymentMethodsService {
  private readonly logger = new Logger(PaymentMethodsService.name);

  constructor(
    private readonly db: DataSource,
    @Inject(RETAIN_CONFIG) private readonly config: RetainConfig,
    @Optional() @Inject(ACCOUNT_UPDATER) private readonly updater: AccountUpdater = NO_ACCOUNT_UPDATER,
    /** De-tokenizes a token for the updater (without it, tokens are never renewed). */
    @Optional() @Inject(TRANSACTION_PROCESSORS) private readonly processors: TransactionProcessors | null = null,
  ) {}

  /** Whether an account updater answers (decisions §15: for every merchant; its key only adds a JWE). */
  get updaterOn(): boolean {
    return this.updater !== NO_ACCOUNT_UPDATER;
  }

  /**
   * Under the attempt's locks, before the network-limit check: waits while another charge of this
   * customer is in flight (the account lock makes the check and the in-flight mark one step), and
   * puts the card to charge into the transaction row.
   */
  async chooseCard(m: EntityManager, attempt: AttemptEntity, txn: TransactionEntity): Promise<CardChoice> {
    if (!txn.paymentMethodRef) return { kind: 'charge' };
    await PaymentMethodsRepository.lockAccount(m, txn.merchantId, txn.accountId);
    if (await PaymentMethodsRepository.chargeInFlight(m, txn.merchantId, txn.accountId, attempt.id)) {
      return { kind: 'wait', until: new Date(Date.now() + CUSTOMER_BUSY_WAIT_MS) };
    }
    const pm = await PaymentMethodsRepository.get(m, txn.merchantId, txn.paymentMethodRef);
    if (pm && !pm.ended_at) {
      if (paymentMethodChanged(txn, pm)) await this.adopt(m, attempt, txn, pm.id);
      return { kind: 'charge' };
    }
    const next = await this.next(m, txn, new Date(), await this.windowEnd(m, txn));
    if (!next) return { kind: 'none', reason: pm?.ended_reason ?? 'payment method ended' };
    await this.adopt(m, attempt, txn, next.pm.id);
    return next.at.getTime() <= Date.now() ? { kind: 'charge' } : { kind: 'wait', until: next.at };
  }

  /**
   * The network limits forbid the transaction's card: the account's next payment method they allow
   * by `until` (now, or the recovery window's end when the card is blocked for good; decisions §15:
   * "the next eligible payment method of the account is tried") is adopted for this attempt. Returns
   * when it may be charged (now: at once), or null when none is (nothing adopted then).
   */
  async alternative(
    m: EntityManager,
    attempt: AttemptEntity,
    txn: TransactionEntity,
    until: Date,
  ): Promise<Date | null> {
    if (!txn.paymentMethodRef) return null;
    const next = await this.next(m, txn, new Date(), until);
    if (!next) return null;
    this.logger.log('network limit on the card: the account’s next payment method');
    await this.adopt(m, attempt, txn, next.pm.id);
    return next.at;
  }

  /**
   * The transaction's card can no longer be retried (its plan stopped though the transaction's own
   * budget and window, under its policy version and experiment arm, are not used up): the card
   * itself with new data (the updater's), else the account's next payment method, with its first
   * attempt planned by that same policy. A permanent card block ends the payment method. Null when
   * no payment method is left.
   */
  async fallbackPlan(
    m: EntityManager,
    txn: TransactionEntity,
    attempt: AttemptEntity,
    result: ChargeResult | null,
    now: Date,
    /** The transaction's policy inputs (policyInputsFor), as the caller planned with them. */
    inputs: Partial<PlanInput>,
  ): Promise<Plan | null> {
    if (!txn.paymentMethodRef) return null;
    // The transaction's own budget and window, whichever card: the ended card's expiry ends nothing.
    const anyCard = inputs.card ? { ...inputs, card: { ...inputs.card, renewable: true } } : inputs;
    if (freshCardPlan(txn, attempt.retryNumber, anyCard, now, this.config.retryTimeScale).kind !== 'retry') return null;
    const ref = txn.paymentMethodRef;
    if (result?.outcome === 'declined') {
      // The rules in force when the issuer declined (the attempt's charge), not when it is recorded.
      const c = classifyDecline(
        {
          network: txn.cardNetwork ?? result.network,
          responseCode: result.responseCode,
          merchantAdviceCode: result.merchantAdviceCode,
        },
        declineTime(attempt, now),
      );
      if (endsPaymentMethod(c)) {
        await PaymentMethodsRepository.end(m, txn.merchantId, ref, c.reason, { sameCard: endsCardForAccount(c) });
      }
    }
    const amount = BigInt(txn.amountMinor);
    const current = await PaymentMethodsRepository.get(m, txn.merchantId, ref);
    let target: { id: string; at: Date } | null = null;
    // Updated data lifts a "new card data" block for this card (a new card data version).
    if (current && !current.ended_at && cardDataVersion(current.expiration_date) !== attempt.cardDataVersion) {
      const check = await limitsOf(m, txn.merchantId, current, now, amount, this.config.retryTimeScale, txn.id);
      if (check.allowed) target = { id: current.id, at: now };
    }
    if (!target) {
      const windowEnd = recoveryWindowEnd({
        ...inputs,
        startedAt: txn.submittedTs,
        timeScale: this.config.retryTimeScale,
      });
      const next = await this.next(m, txn, now, windowEnd);
      if (next) target = { id: next.pm.id, at: next.at };
    }
    if (!target) return null;
    await adoptPaymentMethod(
      m,
      txn.merchantId,
      txn.id,
      (await PaymentMethodsRepository.get(m, txn.merchantId, target.id))!,
    );
    await reloadTransaction(m, txn);
    // Planned with the adopted card's own inputs (its expiry, BIN).
    const adopted = await policyInputsFor(m, txn.merchantId, txn.id, this.updaterOn);
    const plan = freshCardPlan(
      txn,
      attempt.retryNumber,
      adopted,
      target.at > now ? target.at : now,
      this.config.retryTimeScale,
    );
    return plan.kind === 'retry' ? plan : null;
  }

  /**
   * Outside any database transaction: asks the account updater about the attempt's card when it is
   * expired (before charging it) or was just declined for its data (Visa category 3, Mastercard
   * advice 01, ISO data codes), once per card data version, for every merchant (decisions §15) when
   * an updater is connected. Applies the answer: new data (sealed, masked, and a JWE to the
   * merchant's key when it registered one) or the payment method's end ("account closed").
   * A token the processor de-tokenizes (the sandbox's) is asked about like a stored card number, with
   * the number the processor gives back (held in memory for the question only); it stays the
   * instrument, charged with the new expiry (cardUpdate).
   */
  async refreshCard(attemptId: string, decline: ChargeResult | null, declinedAt?: Date): Promise<void> {
    const txn = await PaymentMethodsRepository.transactionOfAttempt(this.db, attemptId);
    if (!txn?.paymentMethodRef || !updaterReaches(txn)) return;
    const now = new Date();
    if (decline) {
      if (decline.outcome !== 'declined') return;
      // `declinedAt`: the attempt's charge time (the dated rules of the decline's own day).
      const c = classifyDecline(
        {
          network: txn.cardNetwork ?? decline.network,
          responseCode: decline.responseCode,
          merchantAdviceCode: decline.merchantAdviceCode,
        },
        declinedAt ?? now,
      );
      if (!updaterMayCure(c)) return;
    } else if (!cardExpired(txn.expirationDate, now) && !(await this.originalAsksUpdater(txn))) {
      return;
    }
    if (this.updater === NO_ACCOUNT_UPDATER) return;
    const pm = await PaymentMethodsRepository.get(this.db, txn.merchantId, txn.paymentMethodRef);
    if (!pm || pm.ended_at) return;
    const version = cardDataVersion(pm.expiration_date);
    if (pm.updater_checked_version !== null && pm.updater_checked_version === version) return;
    const pan = await this.cardNumberOf(txn, pm);
    if (pan === null) return;
    let answer: AccountUpdaterAnswer;
    try {
      answer = await this.updater.lookup({ pan, expiration: pm.expiration_date }, now);
    } catch (err) {
      // An updater that does not answer leaves the card as it is (asked again on the next occasion).
      this.logger.warn({ err: (err as Error).name }, 'account updater did not answer');
      return;
    }
    let update: CardDataUpdate | null = null;
    if (answer.kind === 'updated' && pm.card_kind === 'token') {
      update = this.tokenUpdate(answer, pan);
    } else if (answer.kind === 'updated') {
      // The full new number goes back only encrypted to a key the merchant registered.
      const key = await PaymentMethodsRepository.updaterKey(this.db, txn.merchantId);
      const jwe = key
        ? await encryptCardUpdate(key, { account: answer.pan, expiration_date: answer.expiration })
        : null;
      const c =
        answer.pan !== pan
          ? cardColumnsFromPan(this.config.cardKeys, this.config.cardFingerprintKeys, answer.pan)
          : null;
      update = {
        expirationDate: answer.expiration,
        jwe,
        card: c
          ? {
              cardEnc: c.cardEnc,
              cardKeyId: c.cardKeyId,
              cardHmac: null,
              cardHmacKeyId: null,
              cardBin: c.cardBin,
              cardLast4: c.cardLast4,
              // Its hash beside 555555******4444 gives the number back: shown only to a merchant that
              // gets the number anyway (the JWE to its updater key).
              accountHash: jwe ? c.accountHash : null,
              cardNetwork: cardBrand(answer.pan),
              display: c.display,
            }
          : null,
      };
      if (c && update.card) {
        const [fp] = await settleCardFingerprints(this.db, txn.merchantId, [c.fingerprints]);
        update.card.cardHmac = fp?.value ?? null;
        update.card.cardHmacKeyId = fp?.keyId ?? null;
      }
    }
    await this.db.transaction(async (m) => {
      await PaymentMethodsRepository.markUpdaterChecked(m, txn.merchantId, pm.id, version);
      if (answer.kind === 'closed') {
        await PaymentMethodsRepository.end(m, txn.merchantId, pm.id, `account updater: ${answer.message}`);
      } else if (update) {
        await PaymentMethodsRepository.applyUpdate(m, txn.merchantId, pm.id, update);
        const fresh = await PaymentMethodsRepository.get(m, txn.merchantId, pm.id);
        if (fresh) {
          await adoptPaymentMethod(m, txn.merchantId, txn.id, fresh);
          // Asked before the charge (an expired card): the attempt goes out on the new data.
          await PaymentMethodsRepository.retargetAttemptToTransaction(m, attemptId);
        }
      }
    });
    this.logger.log({ answer: answer.kind }, 'account updater asked');
  }

  /**
   * The full number of the payment method's card, to ask the updater about: a stored number opened,
   * a token de-tokenized by the transaction's processor (the one its attempt goes out through).
   * Null when there is none: a card without a stored number, a processor that checks its tokens and
   * never gives numbers back (Stripe, Adyen: they keep saved cards up to date themselves), a token
   * it no longer knows. Never logged, never stored in clear.
   */
  private async cardNumberOf(txn: TransactionEntity, pm: PaymentMethodRow): Promise<string | null> {
    if (pm.card_kind !== 'token') {
      if (!pm.card_enc || !pm.card_key_id) return null;
      return open(this.config.cardKeys, { keyId: pm.card_key_id, value: pm.card_enc }, 'card');
    }
    if (!this.processors || !updaterReaches({ cardKind: pm.card_kind, cardLast4: pm.card_last4 })) return null;
    const processor = await this.processors.forTransaction(txn.merchantId, txn.divisionNumber || null);
    if (processor.checkToken) return null;
    try {
      const r = await processor.detokenize(pm.pm_id);
      return r.ok ? r.pan : null;
    } catch (err) {
      // Not de-tokenized now: the card stays as it is (asked again on the next occasion).
      this.logger.warn({ err: (err as Error).name }, 'token not de-tokenized for the account updater');
      return null;
    }
  }

  /**
   * New data for a token: the token stays the instrument and takes the new expiry, shown masked like
   * any update (account_updated). No number is stored for it and none is handed back to the merchant
   * (no JWE: the merchant sent a token, not a number). A new number from the updater is not adopted:
   * the processor that issued the token keeps its vault in step with the networks' updaters, so the
   * token goes on standing for the card; only the expiry the charge carries was missing.
   */
  private tokenUpdate(answer: AccountUpdaterAnswer & { kind: 'updated' }, pan: string): CardDataUpdate {
    if (answer.pan !== pan)
      this.logger.log('account updater: a new number for a token, the token and its new expiry kept');
    return { expirationDate: answer.expiration, jwe: null, card: null };
  }

  /**
   * The transaction's original decline was a data-quality one (Visa category 3, MAC 01, ISO data
   * codes) on the card data it still has: the review planned its first attempt for the updater.
   */
  private async originalAsksUpdater(txn: TransactionEntity): Promise<boolean> {
    const c = classifyDecline(
      { network: txn.cardNetwork, responseCode: txn.authCode, merchantAdviceCode: txn.networkAdviceCode },
      txn.failedAt,
    );
    if (!updaterMayCure(c)) return false;
    const version = await OriginalDeclinesRepository.dataVersionOf(this.db, txn.id);
    return version !== undefined && version === cardDataVersion(txn.expirationDate);
  }

  /**
   * Whether the account updater may still renew the transaction's expired card: it reaches the card
   * and has not been asked about this card data version (it did not answer: asked again later).
   */
  async updaterMayRenew(m: EntityManager, txn: TransactionEntity): Promise<boolean> {
    if (!txn.paymentMethodRef) return false;
    const pm = await PaymentMethodsRepository.get(m, txn.merchantId, txn.paymentMethodRef);
    return pm !== null && !pm.ended_at && updaterMayRenew(pm, this.updaterOn);
  }

  /** Puts the cryptogram to send into the (unsaved) entity: it is stored only sealed (payment_methods). */
  async fillCryptogram(txn: TransactionEntity): Promise<void> {
    txn.cryptogram = await cryptogramOf(this.db, this.config.cardKeys, txn);
  }

  /**
   * The account's next payment method the network rules allow by `until` (nextPaymentMethod), one
   * the transaction's processor account (its division's, decisions §13) can charge: the review's
   * rule for a submitted payment method (chargeableBy). Without TRANSACTION_PROCESSORS (some unit
   * tests) every one is taken as chargeable.
   */
  private async next(m: EntityManager, txn: TransactionEntity, now: Date, until: Date) {
    const processors = this.processors;
    const division = txn.divisionNumber || null;
    const chargeable = processors
      ? chargeableBy(
          (await processors.account?.(txn.merchantId, division)) ?? null,
          await processors.forTransaction(txn.merchantId, division),
        )
      : async () => true;
    return nextPaymentMethod(m, {
      merchantId: txn.merchantId,
      accountId: txn.accountId,
      transactionId: txn.id,
      except: txn.paymentMethodRef ? [txn.paymentMethodRef] : [],
      now,
      until,
      amountMinor: BigInt(txn.amountMinor),
      timeScale: this.config.retryTimeScale,
      updaterOn: this.updaterOn,
      chargeable,
    });
  }

  private windowEnd(m: EntityManager, txn: TransactionEntity): Promise<Date> {
    return transactionWindowEnd(m, txn, this.config.retryTimeScale);
  }

  /** Adopts a payment method for the transaction and retargets the not-yet-sent attempt to its card. */
  private async adopt(m: EntityManager, attempt: AttemptEntity, txn: TransactionEntity, pmId: string): Promise<void> {
    const pm = await PaymentMethodsRepository.get(m, txn.merchantId, pmId);
    if (!pm) return;
    await adoptPaymentMethod(m, txn.merchantId, txn.id, pm);
    await reloadTransaction(m, txn);
    await PaymentMethodsRepository.retargetAttempt(m, attempt.id, {
      cardHmac: txn.cardHmac,
      cardNetwork: txn.cardNetwork,
    });
    attempt.cardHmac = txn.cardHmac;
    attempt.cardNetwork = txn.cardNetwork;
  }
}
