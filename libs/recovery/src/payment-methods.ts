import { AttemptsRepository, PaymentMethodsRepository, TransactionEntity, type PaymentMethodRow } from '@retain/db';
import {
  cardDataVersion,
  checkNetworkLimits,
  historyAsOf,
  newVid,
  open,
  openText,
  parseSealedText,
  planNextAttempt,
  seal,
  type DataKey,
  type LimitCheck,
  type Plan,
  type PlanInput,
} from '@retain/domain';
import type { DataSource, EntityManager } from 'typeorm';

/**
 * The payment methods of a customer (decisions §15): each transaction charges one payment method
 * of its account (payment_method_ref, its card columns copied into the transaction row, which the
 * attempts read). When that one can no longer be retried, the account's next eligible one is
 * adopted: `primary: 1` first, then the most recently seen. Sealing: cryptograms are stored sealed
 * in payment_methods (aad `cryptogram`) and never logged.
 */

/** A card whose expiry month is over (YYYYMM; an unknown expiry is not expired). */
export function cardExpired(expiration: string | null | undefined, now: Date): boolean {
  if (!expiration || !/^\d{6}$/.test(expiration)) return false;
  const month = now.getUTCFullYear() * 100 + now.getUTCMonth() + 1;
  return Number(expiration) < month;
}

/**
 * Whether the account updater can be asked about a card (decisions §15): a stored card number, or a
 * token the processor de-tokenized at review (`tok_sandbox_<last 4>`, `ntok_sandbox_<last 4>`), whose
 * last 4 digits are known only from that number. A saved payment method of Stripe or Adyen is checked,
 * never de-tokenized (no last 4): its processor keeps it up to date itself. The retry worker asks the
 * processor again before it asks the updater (detokenize, never for a processor with `checkToken`).
 */
export function updaterReaches(card: { cardKind: string | null; cardLast4: string | null }): boolean {
  return card.cardKind !== 'token' || card.cardLast4 !== null;
}

/**
 * The next attempt on a fresh card (an adopted payment method, or a card kept for the account
 * updater): retried soon, like a cleared outage, and planned by the transaction's own policy version
 * and arm (its policy inputs, read with this card), so its budget and window bind it and the plan
 * explains itself like any other. The review's fallbacks and the retry worker's share it.
 */
export function freshCardPlan(
  txn: Pick<TransactionEntity, 'submittedTs' | 'cardNetwork' | 'amountMinor' | 'expirationDate'>,
  attemptsMade: number,
  inputs: Partial<PlanInput>,
  now: Date,
  timeScale: number,
): Plan {
  return planNextAttempt({
    ...inputs,
    attemptsMade,
    startedAt: txn.submittedTs,
    now,
    lastDecline: { technical: true },
    network: txn.cardNetwork,
    amountMinor: BigInt(txn.amountMinor),
    cardHistory: [],
    cardDataVersion: cardDataVersion(txn.expirationDate),
    timeScale,
  });
}

/**
 * Remembers the reviewed transaction's payment method for its account and makes the transaction
 * charge the stored one (latest data wins: an older submission charges the newer data).
 */
export async function rememberPaymentMethod(
  m: EntityManager,
  keys: readonly DataKey[],
  merchantId: string,
  transactionId: string,
): Promise<string | null> {
  // The intake stored it sealed (sealText); rows accepted before that hold it in clear.
  const stored = await PaymentMethodsRepository.cryptogramOf(m, merchantId, transactionId);
  const sealed = stored ? (parseSealedText(stored) ?? seal(keys, stored, 'cryptogram')) : null;
  const id = await PaymentMethodsRepository.remember(m, merchantId, transactionId, newVid(), sealed);
  // Adopted, and the card the original decline came from (the policy reads that decline for this card
  // only): one statement, as the review runs this for every row of a submission under its locks.
  if (id) await PaymentMethodsRepository.adopt(m, merchantId, transactionId, id, { original: true });
  return id;
}

/** The transaction charges `pm` from now on (its card columns; the cryptogram stays sealed in `pm`). */
export async function adoptPaymentMethod(
  m: EntityManager,
  merchantId: string,
  transactionId: string,
  pm: PaymentMethodRow,
): Promise<void> {
  await PaymentMethodsRepository.adopt(m, merchantId, transactionId, pm.id);
}

/** The cryptogram to send with a charge: the transaction's payment method's, opened; else the transaction's own. */
export async function cryptogramOf(
  m: Pick<EntityManager, 'query'>,
  keys: readonly DataKey[],
  txn: TransactionEntity,
): Promise<string | null> {
  if (txn.cryptogram) return openText(keys, txn.cryptogram, 'cryptogram');
  if (!txn.paymentMethodRef || txn.isNetworkToken !== 1) return null;
  const pm = await PaymentMethodsRepository.get(m, txn.merchantId, txn.paymentMethodRef);
  if (!pm?.cryptogram_enc || !pm.cryptogram_key_id) return null;
  return open(keys, { keyId: pm.cryptogram_key_id, value: pm.cryptogram_enc }, 'cryptogram');
}

/** Reloads the transaction's columns into the locked entity after an adopt. */
export async function reloadTransaction(m: EntityManager, txn: TransactionEntity): Promise<void> {
  const fresh = await m.getRepository(TransactionEntity).findOneByOrFail({ id: txn.id });
  Object.assign(txn, fresh);
}

/** Whether the transaction's card columns lag behind its payment method's (newer data arrived). */
export function paymentMethodChanged(txn: TransactionEntity, pm: PaymentMethodRow): boolean {
  return (
    txn.cardEnc !== pm.card_enc ||
    txn.cardHmac !== pm.card_hmac ||
    txn.expirationDate !== pm.expiration_date ||
    txn.eciIndicator !== pm.eci_indicator ||
    txn.accountUpdated !== pm.account_updated ||
    txn.accountUpdateJwe !== pm.account_update_jwe
  );
}

export interface NextPaymentMethod {
  pm: PaymentMethodRow;
  /** Earliest time the network limits allow an attempt on it. */
  at: Date;
}

/**
 * The account's next payment method to charge, in order (primary first, then most recently seen),
 * skipping ended ones, ones without chargeable card data, ones the transaction's processor account
 * cannot charge (`chargeable`), expired cards (unless the updater may renew them) and cards the
 * network rules block for good or until after `until` (the recovery window's end). The first one
 * allowed at once wins; otherwise the one allowed soonest. Null when none is left.
 */
export async function nextPaymentMethod(
  m: EntityManager,
  input: {
    merchantId: string;
    accountId: string;
    /** The transaction to charge: its own original decline binds the card on any payment method. */
    transactionId: string;
    except: string[];
    now: Date;
    /** The recovery window's end: a card the network rules free only after it is no candidate. */
    until: Date;
    amountMinor: bigint;
    timeScale: number;
    updaterOn: boolean;
    /**
     * Whether the transaction's processor account (its division's, decisions §13) can charge the
     * payment method: the review's rule for a submitted one (chargeableBy of @retain/platform). A
     * customer's payment methods are remembered across divisions, whose accounts charge different
     * things (a Stripe saved method, a sandbox token, a card number only with raw card data).
     */
    chargeable: (pm: PaymentMethodRow) => Promise<boolean>;
  },
): Promise<NextPaymentMethod | null> {
  const candidates = await PaymentMethodsRepository.alternatives(m, input.merchantId, input.accountId, input.except);
  let soonest: NextPaymentMethod | null = null;
  for (const pm of candidates) {
    const chargeable = pm.card_kind === 'token' || (pm.card_enc !== null && pm.card_key_id !== null);
    if (!chargeable) continue;
    // An expired card only while the account updater may still renew it (not yet asked about this data).
    if (cardExpired(pm.expiration_date, input.now) && !updaterMayRenew(pm, input.updaterOn)) continue;
    if (!(await input.chargeable(pm))) continue;
    const check = await limitsOf(
      m,
      input.merchantId,
      pm,
      input.now,
      input.amountMinor,
      input.timeScale,
      input.transactionId,
    );
    if (check.allowed) return { pm, at: input.now };
    if (check.permanently || check.notBefore > input.until) continue;
    if (!soonest || check.notBefore < soonest.at) soonest = { pm, at: check.notBefore };
  }
  return soonest;
}

/** Whether the account updater may still renew this payment method's card (asked once per card data version). */
export function updaterMayRenew(pm: PaymentMethodRow, updaterOn: boolean): boolean {
  return (
    updaterOn &&
    updaterReaches({ cardKind: pm.card_kind, cardLast4: pm.card_last4 }) &&
    pm.updater_checked_version !== cardDataVersion(pm.expiration_date)
  );
}

/** The network limits for an attempt on this payment method's card now. */
export function limitsOf(
  m: EntityManager,
  merchantId: string,
  pm: PaymentMethodRow,
  at: Date,
  amountMinor: bigint,
  timeScale: number,
  transactionId: string,
): Promise<LimitCheck> {
  // The transaction's own original decline binds the card on whichever payment method carries it.
  return cardLimitsNow(
    m,
    {
      merchantId,
      cardHmac: pm.card_hmac,
      network: pm.card_network,
      dataVersion: cardDataVersion(pm.expiration_date),
    },
    { amountMinor, exceptAttemptId: null, transactionId },
    at,
    timeScale,
  );
}

/**
 * When the issuer decided an attempt: its charge's time (its in-flight mark, the `at` of its charge
 * request), never after it is recorded. The dated network rules of that moment classify its decline,
 * however much later the outcome is recorded (a lookup of an unknown attempt).
 */
export function declineTime(attempt: { preparedAt: Date | string | null }, recordedAt: Date): Date {
  const prepared = attempt.preparedAt ? new Date(attempt.preparedAt) : null;
  return prepared && prepared.getTime() < recordedAt.getTime() ? prepared : recordedAt;
}

/**
 * The network limits on a card for an attempt made now: its merchant's history of the card (but
 * `exceptAttemptId`, with `transactionId`'s own original decline), read under the caller's card lock
 * where it has one. A check now: what is dated after `at` (an original decline at its transaction's
 * timestamp, which may lie ahead of our clock; another pod's mark in flight) counts as made at `at`
 * (historyAsOf). The one reading of "may this card be charged now": the retry worker's check before a
 * charge and before a replay, and the fallbacks' (limitsOf). No card fingerprint: no history.
 */
export async function cardLimitsNow(
  m: EntityManager | DataSource,
  card: { merchantId: string; cardHmac: string | null; network: string | null; dataVersion: string | null },
  attempt: { amountMinor: bigint; exceptAttemptId: string | null; transactionId: string },
  at: Date,
  timeScale: number,
): Promise<LimitCheck> {
  const history = card.cardHmac
    ? await AttemptsRepository.cardHistory(
        m,
        card.merchantId,
        card.cardHmac,
        attempt.exceptAttemptId,
        attempt.transactionId,
      )
    : [];
  return checkNetworkLimits(
    { network: card.network, cardDataVersion: card.dataVersion },
    historyAsOf(history, at),
    at,
    attempt.amountMinor,
    { timeScale },
  );
}
