import { createHash } from 'node:crypto';
import { currencyExponent, isIsoCurrency } from '@retain/domain';
import { cardNetwork } from '../card-network';
import type {
  ChargeRequest,
  ChargeResult,
  DetokenizeResult,
  PaymentProcessor,
  ProcessorLimits,
  RefundRequest,
  RefundResult,
} from '../processor.port';
import { SANDBOX_UPDATER_NEW_EXPIRY_CARD, sandboxUpdateKey } from '../account-updater/sandbox-account-updater';
import type { SandboxLedger } from './sandbox-ledger';
import { modelOutcome, type ModelOutcome } from './sandbox-model';

const approve: ModelOutcome = { kind: 'approve' };

/** The sandbox card approved on the first attempt (decisions §12): the fixtures' default card. */
export const SANDBOX_APPROVED_CARD = '4111111111111111';

/** decisions §15: approved for half of the amount (rounded down to the minor unit). */
export const SANDBOX_PARTIAL_CARD = '4000000000003220';

/** The scripted cards of decisions §12: outcome by retry attempt number (1-based). */
export const SANDBOX_TEST_CARDS: Readonly<Record<string, (attempt: number) => ModelOutcome>> = {
  [SANDBOX_APPROVED_CARD]: () => approve,
  '5555555555554444': () => approve,
  '4000000000000077': (n) => (n >= 3 ? approve : { kind: 'decline', code: '51' }),
  '4000000000000002': () => ({ kind: 'decline', code: '05' }),
  '4000000000000069': () => ({ kind: 'decline', code: '54' }),
  '4000000000000119': (n) => (n === 1 ? { kind: 'error' } : approve),
  '4100000000000019': () => ({ kind: 'decline', code: '41' }),
  '5100000000000008': () => ({ kind: 'decline', code: '51', mac: '03' }),
  // decisions §15. 0341 is approved once the sandbox account updater has given it new data (charge()).
  '4000000000000341': () => ({ kind: 'decline', code: '54' }),
  '4000000000000259': () => ({ kind: 'decline', code: '54' }),
  '4000000000000507': () => ({ kind: 'decline', code: '46' }),
  // decisions §15: a partial authorization for half of the amount.
  [SANDBOX_PARTIAL_CARD]: () => ({ kind: 'approve', half: true }),
};

/** Processor tokens (decisions §12) and network tokens (§15) of the sandbox. */
const TOKEN_RE = /^n?tok_sandbox_(\d{4})$/;

const MESSAGES: Readonly<Record<string, string>> = {
  '00': 'Approved',
  '05': 'Do not honor',
  '14': 'Invalid card number',
  '41': 'Lost card, pick up',
  '51': 'Insufficient funds',
  '46': 'Closed account',
  '54': 'Expired card',
  '59': 'Suspected fraud',
  '61': 'Exceeds withdrawal amount limit',
  '65': 'Exceeds withdrawal frequency limit',
  '91': 'Issuer or switch inoperative',
  R1: 'Revocation of all authorizations order',
};

/**
 * The sandbox processor (PROCESSOR=sandbox, the default): scripted outcomes for the test cards of
 * decisions §12, the seeded recovery model for every other card, idempotent by key through its
 * ledger. Results carry response codes and ids, never the card number.
 */
export class SandboxProcessor implements PaymentProcessor {
  readonly name = 'sandbox';
  readonly forcedDeposits = true;
  readonly limits: ProcessorLimits = {
    maxPaymentMethodIdLength: 64,
    // Statement descriptors as card networks print them: at most 22 characters of letters,
    // digits, space and . * & ' - (no quotes, < > or other characters).
    billingDescriptorPattern: /^[A-Za-z0-9 .*&'-]{1,22}$/,
  };

  constructor(private readonly ledger: SandboxLedger) {}

  async charge(req: ChargeRequest): Promise<ChargeResult> {
    // The same key returns what was stored, whatever else the request says: never a second charge.
    const stored = await this.ledger.get(req.idempotencyKey);
    if (stored) return stored.result as ChargeResult;
    // A forced deposit is captured without asking the issuer (the merchant carries the risk).
    const result = req.forcedDeposit || (await this.updatedCardApproves(req)) ? this.approved(req) : this.decide(req);
    return (await this.ledger.putIfAbsent(req.idempotencyKey, 'charge', result)).result as ChargeResult;
  }

  async lookupCharge(idempotencyKey: string, original?: ChargeRequest): Promise<ChargeResult | null> {
    const stored = await this.ledger.get(idempotencyKey);
    if (stored?.kind === 'charge') return settledAnswer(stored.result as ChargeResult);
    // Like the real processors' same-key replay: with the original, the attempt's one charge.
    if (original && original.idempotencyKey === idempotencyKey) return settledAnswer(await this.charge(original));
    return null;
  }

  async refund(req: RefundRequest): Promise<RefundResult> {
    const stored = await this.ledger.get(req.idempotencyKey);
    if (stored) return stored.result as RefundResult;
    // Scripted failure (decisions §12): an amount whose decimal form ends in .13.
    const rejected = endsInPoint13(req.amountMinor, req.currency);
    const result: RefundResult = rejected
      ? { outcome: 'failed', processorRefundId: null, message: 'Refund rejected by the processor' }
      : { outcome: 'completed', processorRefundId: `sbr_${opaqueId(req.idempotencyKey)}`, message: 'Refunded' };
    return (await this.ledger.putIfAbsent(req.idempotencyKey, 'refund', result)).result as RefundResult;
  }

  /**
   * The sandbox settles in a daily batch: a capture is settled from the next UTC midnight on
   * (`at` is the caller's clock: time-scaled in demos and tests).
   */
  async settlementOf(
    charge: { processorTransactionId: string; capturedAt: Date },
    at: Date,
  ): Promise<'settled' | 'pending'> {
    const c = charge.capturedAt;
    const nextMidnight = Date.UTC(c.getUTCFullYear(), c.getUTCMonth(), c.getUTCDate() + 1);
    return at.getTime() >= nextMidnight ? 'settled' : 'pending';
  }

  async detokenize(token: string): Promise<DetokenizeResult> {
    const pan = panOfToken(token);
    return pan ? { ok: true, pan } : { ok: false, message: 'Unknown sandbox token' };
  }

  /**
   * 4000000000000341 is declined `54` until the sandbox account updater has run for it: approved
   * when sent with an expiry the updater issued (recorded in the sandbox's ledger), as its number or
   * as one of its tokens (`tok_sandbox_0341`, `ntok_sandbox_0341`: decisions §12, §15).
   */
  private async updatedCardApproves(req: ChargeRequest): Promise<boolean> {
    const pan =
      req.instrument.kind === 'pan' ? req.instrument.pan.replace(/[\s-]/g, '') : panOfToken(req.instrument.token);
    if (pan !== SANDBOX_UPDATER_NEW_EXPIRY_CARD || !req.instrument.expiration) return false;
    return (await this.ledger.get(sandboxUpdateKey(pan, req.instrument.expiration))) !== null;
  }

  private approved(req: ChargeRequest): ChargeResult {
    const processorTransactionId = `sbx_${opaqueId(req.idempotencyKey)}`;
    return { outcome: 'approved', responseCode: '00', processorTransactionId, message: MESSAGES['00']! };
  }

  private decide(req: ChargeRequest): ChargeResult {
    const pan =
      req.instrument.kind === 'pan' ? req.instrument.pan.replace(/[\s-]/g, '') : panOfToken(req.instrument.token);
    const processorTransactionId = `sbx_${opaqueId(req.idempotencyKey)}`;
    if (!pan) {
      return {
        outcome: 'declined',
        responseCode: '14',
        merchantAdviceCode: null,
        network: 'other',
        processorTransactionId,
        message: 'Unknown sandbox token',
      };
    }
    const network = cardNetwork(pan);
    const scripted = SANDBOX_TEST_CARDS[pan];
    const outcome = scripted
      ? scripted(req.attemptNumber)
      : modelOutcome({
          pan,
          network,
          originalResponseCode: req.originalResponseCode,
          amountMinor: req.amountMinor,
          attemptNumber: req.attemptNumber,
          at: req.at,
          originalFailedAt: req.originalFailedAt,
        });
    switch (outcome.kind) {
      case 'approve':
        return {
          outcome: 'approved',
          responseCode: '00',
          processorTransactionId,
          message: MESSAGES['00']!,
          ...(outcome.half && req.amountMinor > 1n ? { amountMinor: req.amountMinor / 2n } : {}),
        };
      case 'error':
        return { outcome: 'error', message: 'Processor timeout' };
      case 'decline':
        return {
          outcome: 'declined',
          responseCode: outcome.code,
          merchantAdviceCode: outcome.mac ?? null,
          network,
          processorTransactionId,
          message: MESSAGES[outcome.code] ?? 'Declined',
        };
    }
  }
}

/**
 * Whether the decimal form of an amount ends in `.13`, in the currency's own exponent: 10.13 USD
 * (1013 minor), 10.130 KWD (10130 minor; 10.013 KWD does not), 10.1300 CLF. A 0-decimal currency
 * (JPY) has no decimal part, so no amount of it ends in .13. Unknown codes are read as 2 decimals.
 */
export function endsInPoint13(amountMinor: bigint, currency: string): boolean {
  let exponent = 2;
  if (isIsoCurrency(currency)) exponent = currencyExponent(currency);
  if (exponent < 2) return false;
  const scale = 10n ** BigInt(exponent);
  const abs = amountMinor < 0n ? -amountMinor : amountMinor;
  return abs % scale === 13n * 10n ** BigInt(exponent - 2);
}

/** `tok_sandbox_<last4>` (and the network token `ntok_sandbox_<last4>`) stands for the scripted card ending in those digits. */
function panOfToken(token: string): string | null {
  const m = TOKEN_RE.exec(token);
  if (!m) return null;
  return Object.keys(SANDBOX_TEST_CARDS).find((pan) => pan.endsWith(m[1]!)) ?? null;
}

/** A processor-side id derived from the key: stable, and reveals nothing about the card. */
const opaqueId = (key: string): string => createHash('sha256').update(`sandbox:${key}`).digest('hex').slice(0, 24);

/** The ledger is the sandbox's own record: an error stored under a key charged nothing under it. */
function settledAnswer(result: ChargeResult): ChargeResult {
  return result.outcome === 'error' ? { ...result, settled: true } : result;
}
