import { Injectable, Logger, type OnApplicationShutdown, type OnModuleDestroy } from '@nestjs/common';
import { WebhookMessagesRepository, type ClaimedWebhookMessage } from '@retain/db';
import { QUEUES } from '@retain/queues';
import { DeliveryService, LEASE_SECONDS } from './delivery.service';

/**
 * Deliveries one merchant may have in flight in one dispatcher: a whole pipe (the webhook.deliver
 * queue's worker concurrency), so a merchant alone is sent as fast as ever.
 */
const PER_MERCHANT = QUEUES['webhook.deliver'].concurrency;
/**
 * Deliveries in flight per dispatcher, all merchants together: two pipes, so a merchant whose
 * receiver hangs (each of its deliveries holding a slot until the 10 s timeout) leaves at least a
 * pipe's worth of slots to the others.
 */
const IN_FLIGHT = 2 * PER_MERCHANT;
/** Messages claimed per statement: a whole pipe's worth, so a claim is not one statement per freed slot. */
const CLAIM = PER_MERCHANT;
/**
 * Deliveries whose record has not committed yet, at most (memory and lease bound). While as many wait
 * (Postgres refusing or stalling records), claimed messages wait in the buffer; one whose lease has
 * nearly run out by the time it could start is handed back unsent (DeliveryService.deliverClaimed).
 */
const MAX_UNRECORDED = 4 * PER_MERCHANT;

/**
 * The dispatcher's pump (issue 14): pushes are rows in Postgres, so they are claimed from there in
 * batches (one UPDATE ... SKIP LOCKED for up to CLAIM per kind, leased like a single claim) into a
 * local buffer, and delivered from it with up to IN_FLIGHT HTTP exchanges in the air; a slot frees
 * when its exchange is over (its record commits in a later group) and takes the next buffered message.
 * The buffer is refilled when nothing in it can start, so one claim statement serves a pipe's worth of
 * deliveries instead of the one or two slots that just freed.
 * Fairness between merchants: a claim shares its rows out between the merchants with work due (one
 * merchant's backlog cannot keep another's pushes out of it), and a merchant has at most PER_MERCHANT
 * deliveries in flight here: its further buffered messages wait for its own slots, and the next claim
 * leaves it out, so the others' pushes go out on the remaining slots.
 * At shutdown, buffered messages never started are released (lease and attempt count undone).
 * BullMQ's `webhook.deliver` jobs and the retry tick only wake it: a job carries no work a row
 * does not hold, so a lost or duplicated job changes nothing, and one row is claimed by one worker.
 */
@Injectable()
export class DeliveryPump implements OnModuleDestroy, OnApplicationShutdown {
  private readonly logger = new Logger(DeliveryPump.name);
  /** HTTP exchanges in the air (the slots). */
  private inFlight = 0;
  /** HTTP exchanges in the air per merchant (merchants with none are not kept). */
  private readonly inFlightOf = new Map<string, number>();
  /** Deliveries not recorded yet (their HTTP exchange may be over): shutdown waits for these. */
  private unrecorded = 0;
  /** Claimed (leased to this worker) and not started yet. */
  private buffered: ClaimedWebhookMessage[] = [];
  private claiming = false;
  private again = false;
  /** A job or the tick woke the pump since its last claim: new pushes may be due. */
  private woken = false;
  /**
   * Merchants that may have more due than the last claim gave them (they got their whole share of it,
   * or were left out of it with their slots all taken): when one's slot frees and nothing of it is
   * buffered, the pump claims again.
   */
  private unclaimed = new Set<string>();
  /** One of `unclaimed` has a free slot and nothing buffered: claim again. */
  private claimable = false;
  private stopped = false;
  private idle: (() => void) | null = null;

  constructor(
    private readonly messages: WebhookMessagesRepository,
    private readonly delivery: DeliveryService,
  ) {}

  /** Claims and starts due deliveries until the slots are full or nothing more is due (a job, the tick). */
  wake(): void {
    this.woken = true;
    this.run();
  }

  private run(): void {
    if (this.stopped) return;
    if (this.claiming) {
      this.again = true;
      return;
    }
    this.claiming = true;
    void this.fill().finally(() => {
      this.claiming = false;
    });
  }

  private async fill(): Promise<void> {
    try {
      do {
        this.again = false;
        while (!this.stopped && this.inFlight < IN_FLIGHT && this.unrecorded < MAX_UNRECORDED) {
          const next = this.buffered.findIndex((r) => (this.inFlightOf.get(r.merchant_id) ?? 0) < PER_MERCHANT);
          if (next >= 0) {
            this.start(this.buffered.splice(next, 1)[0]!);
            continue;
          }
          // Nothing buffered can start: claim (if anything may be due), leaving out the merchants
          // whose slots are all taken.
          if (!this.woken && !this.claimable) break;
          this.woken = false;
          this.claimable = false;
          const full = [...this.inFlightOf].filter(([, n]) => n >= PER_MERCHANT).map(([merchantId]) => merchantId);
          const { rows, share } = await this.messages.claimNextDue(CLAIM, LEASE_SECONDS, full);
          const got = new Map<string, number>();
          for (const r of rows) got.set(r.merchant_id, (got.get(r.merchant_id) ?? 0) + 1);
          this.unclaimed = new Set([
            ...full,
            ...[...got].filter(([, n]) => n >= share).map(([merchantId]) => merchantId),
          ]);
          if (this.stopped) {
            await this.messages.releaseClaimed(rows);
            break;
          }
          this.buffered.push(...interleaved(rows));
          if (rows.length === 0) break;
        }
      } while (this.again && !this.stopped);
    } catch (err) {
      // Claimed rows stay leased and come due again; the next wake (a job, the tick) claims again.
      this.logger.warn({ err: (err as Error).message }, 'claiming pushes failed; retried on the next wake');
    }
  }

  /** Rows buffered, or a claim or wake waiting: worth a run once a slot or a record frees up. */
  private get hasWork(): boolean {
    return this.buffered.length > 0 || this.claimable || this.woken || this.again;
  }

  private start(row: ClaimedWebhookMessage): void {
    this.inFlight++;
    this.inFlightOf.set(row.merchant_id, (this.inFlightOf.get(row.merchant_id) ?? 0) + 1);
    this.unrecorded++;
    let sent = false;
    const freeSlot = (): void => {
      if (sent) return;
      sent = true;
      this.inFlight--;
      const left = this.inFlightOf.get(row.merchant_id)! - 1;
      if (left > 0) this.inFlightOf.set(row.merchant_id, left);
      else this.inFlightOf.delete(row.merchant_id);
      if (this.unclaimed.has(row.merchant_id) && !this.buffered.some((r) => r.merchant_id === row.merchant_id)) {
        this.unclaimed.delete(row.merchant_id);
        this.claimable = true;
      }
      // A wake that came while every slot was taken claims now (it used to wait for the next tick).
      if (this.hasWork) this.run();
    };
    void this.delivery
      .deliverClaimed(row, null, freeSlot)
      .catch((err: unknown) => {
        // Not recorded: the lease runs out and the attempt is made again (same message_id).
        this.logger.warn({ message: row.message_id, err: (err as Error).message }, 'delivery not recorded');
      })
      .finally(() => {
        freeSlot();
        this.unrecorded--;
        if (this.unrecorded === 0) this.idle?.();
        // At MAX_UNRECORDED nothing starts (Postgres slow to take records): this commit makes room,
        // and nothing else would wake the pump before the next job or tick.
        if (this.unrecorded === MAX_UNRECORDED - 1 && this.hasWork) this.run();
      });
  }

  /** The first shutdown hook: nothing new starts from here on, and what was claimed but not sent is handed back. */
  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    // Buffered and never sent: due again at once for any dispatcher, this claim not counted as an attempt.
    const unsent = this.buffered.splice(0);
    if (unsent.length > 0)
      await this.messages.releaseClaimed(unsent).catch((err: unknown) => {
        this.logger.warn({ err: (err as Error).message }, 'releasing unsent pushes failed; their lease runs out');
      });
  }

  /** Lets deliveries in flight finish (their records commit) before the app's connections close. */
  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    if (this.unrecorded === 0) return;
    await Promise.race([
      new Promise<void>((resolve) => (this.idle = resolve)),
      new Promise<void>((resolve) => setTimeout(resolve, 15_000).unref()),
    ]);
  }
}

/** The claimed rows merchant by merchant in turn (each merchant's in the claim's order), so slots are taken in turn. */
function interleaved(rows: ClaimedWebhookMessage[]): ClaimedWebhookMessage[] {
  const byMerchant = new Map<string, ClaimedWebhookMessage[]>();
  for (const r of rows) {
    const list = byMerchant.get(r.merchant_id);
    if (list) list.push(r);
    else byMerchant.set(r.merchant_id, [r]);
  }
  if (byMerchant.size <= 1) return rows;
  const lists = [...byMerchant.values()];
  const out: ClaimedWebhookMessage[] = [];
  for (let i = 0; out.length < rows.length; i++) for (const list of lists) if (i < list.length) out.push(list[i]!);
  return out;
}
