// The retain policy as the bench runs it: the REAL planner (libs/domain, POLICY_VERSION) fed with
// what a merchant submits (billing address, card BIN and expiry, original decline and advice code,
// amount, the subscription's earlier successful charges, the account's other outcomes) and with the
// outcomes of its own attempts, counted per slot exactly as the service counts them (slotKeyFor,
// merchant scope). Nothing here looks inside a world: only submitted fields and charge answers.
import {
  declineClassOf,
  firstAttemptAt,
  planNextAttempt,
  POLICY_VERSION,
  seededRng,
  slotKeyFor,
  timeZoneFor,
  type CardAttempt,
  type Plan,
  type PlanInput,
  type SlotStat,
} from '@retain/domain';
import { cardNetwork } from '@retain/processor';

/** The submitted fields this adapter reads (a subset of the spec's Transaction). */
export interface SubmittedFields {
  id: string;
  amount: number | string;
  timestamp: string;
  auth_code: string;
  network_advice_code?: string | null;
  subscription?: { id?: string; starts?: string | null } | null;
  account?: { id?: string } | null;
  payment_method?: {
    billing_address?: { postal_code?: string | null; country?: string | null } | null;
    credit_card?: { account?: string | null; expiration_date?: string | null } | null;
  } | null;
}

export interface Step {
  attemptsMade: number;
  now: Date;
  /** The latest attempt's answer. */
  last: { approved: false; auth_code: string; network_advice_code?: string | null } | { error: true };
  history: readonly CardAttempt[];
}

export const amountMinorOf = (tx: SubmittedFields): bigint => BigInt(Math.round(Number(tx.amount) * 100));

/**
 * One merchant's policy over a bench run. `learning` off plans with the prior alone (the cold-start
 * heuristics), for comparison.
 */
export class LearningPolicy {
  readonly name: string;
  private readonly stats = new Map<string, SlotStat>();
  private statsList: SlotStat[] = [];
  private dirty = false;
  private readonly paid = new Map<string, Date[]>();
  private readonly accounts = new Map<string, { approvals: number; declines: number }>();
  private readonly rng: () => number;

  constructor(
    seed: number,
    private readonly learning = true,
    private readonly config: PlanInput['config'] = undefined,
  ) {
    this.name = learning ? 'retain policy' : 'retain policy (no learning)';
    this.rng = seededRng(seed ^ 0x5eed);
  }

  private base(tx: SubmittedFields): Omit<PlanInput, 'attemptsMade' | 'now' | 'lastDecline' | 'cardHistory'> {
    const failedAt = new Date(tx.timestamp);
    const pan = (tx.payment_method?.credit_card?.account ?? '').replace(/\D/g, '');
    const address = tx.payment_method?.billing_address;
    const sub = tx.subscription?.id;
    const paidBefore = [...(sub ? (this.paid.get(sub) ?? []) : [])];
    const starts = tx.subscription?.starts ? new Date(tx.subscription.starts) : null;
    if (starts && Number.isFinite(starts.getTime())) paidBefore.unshift(starts);
    return {
      startedAt: failedAt,
      firstFailedAt: failedAt,
      network: pan ? cardNetwork(pan) : null,
      amountMinor: amountMinorOf(tx),
      policy: { version: POLICY_VERSION, learning: this.learning },
      config: this.config,
      originalResponseCode: tx.auth_code,
      originalAdviceCode: tx.network_advice_code ?? null,
      cardholder: { country: address?.country ?? null, postalCode: address?.postal_code ?? null },
      card: { bin: pan.slice(0, 8) || null, expiry: tx.payment_method?.credit_card?.expiration_date ?? null },
      paidBefore: paidBefore.filter((d) => d.getTime() < failedAt.getTime()),
      accountOutcomes: tx.account?.id ? (this.accounts.get(tx.account.id) ?? null) : null,
      learned: this.learnedStats(),
      rng: this.rng,
    };
  }

  private learnedStats(): readonly SlotStat[] {
    if (this.dirty) {
      this.statsList = [...this.stats.values()];
      this.dirty = false;
    }
    return this.statsList;
  }

  first(tx: SubmittedFields, now: Date): Plan {
    return firstAttemptAt({
      ...this.base(tx),
      now,
      lastDecline: { responseCode: tx.auth_code, merchantAdviceCode: tx.network_advice_code ?? null },
      cardHistory: [],
    });
  }

  next(tx: SubmittedFields, step: Step): Plan {
    return planNextAttempt({
      ...this.base(tx),
      attemptsMade: step.attemptsMade,
      now: step.now,
      lastDecline:
        'error' in step.last
          ? { technical: true }
          : { responseCode: step.last.auth_code, merchantAdviceCode: step.last.network_advice_code ?? null },
      cardHistory: step.history,
    });
  }

  /** Every attempt's outcome, as the service records it: one count in its slot (merchant scope). */
  recordAttempt(tx: SubmittedFields, at: Date, approved: boolean): void {
    const b = this.base(tx);
    const failedAt = new Date(tx.timestamp);
    const timeZone = timeZoneFor({ cardholder: b.cardholder, card: b.card }).timeZone;
    const key = slotKeyFor({
      declineClass: declineClassOf(b.network as string | null, tx.auth_code, tx.network_advice_code, failedAt),
      // Pooled across countries and BINs: local time already aligns the populations.
      country: null,
      binPrefix: null,
      failedAt,
      at,
      timeZone,
    });
    const id = `${key.declineClass}|${key.dayAfterFailure}|${key.localHour}`;
    const s = this.stats.get(id) ?? { scope: 'merchant' as const, ...key, attempts: 0, approvals: 0 };
    s.attempts++;
    if (approved) s.approvals++;
    this.stats.set(id, s);
    this.dirty = true;
    if (approved && tx.subscription?.id) {
      const list = this.paid.get(tx.subscription.id) ?? [];
      list.push(at);
      this.paid.set(tx.subscription.id, list);
    }
  }

  /** A transaction's final outcome, for its account's record. */
  recordTransaction(tx: SubmittedFields, recovered: boolean): void {
    const id = tx.account?.id;
    if (!id) return;
    const a = this.accounts.get(id) ?? { approvals: 0, declines: 0 };
    if (recovered) a.approvals++;
    else a.declines++;
    this.accounts.set(id, a);
  }
}
