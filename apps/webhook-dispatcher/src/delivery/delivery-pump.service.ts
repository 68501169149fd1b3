import { Injectable, Logger, type OnApplicationShutdown, type OnModuleDestroy } from '@nestjs/common';
import { WebhookMessagesRepository, type ClaimedWebhookMessage } from '@retain/db';
import { QUEUES } from '@retain/queues';
import { DeliveryService, LEASE_SECONDS } from './delivery.service';

/** Deliveries in flight per dispatcher: the webhook.deliver queue's worker concurrency. */
const IN_FLIGHT = QUEUES['webhook.deliver'].concurrency;
/** Messages claimed per statement: a whole pipe's worth, so a claim is not one statement per freed slot. */
const CLAIM = IN_FLIGHT;
/** Deliveries whose record has not committed yet, at most (memory and lease bound). */
const MAX_UNRECORDED = 4 * IN_FLIGHT;

/**
 * The dispatcher's pump (issue 14): pushes are rows in Postgres, so they are claimed from there in
 * batches (one UPDATE ... SKIP LOCKED for up to IN_FLIGHT, leased like a single claim) into a local
 * buffer, and delivered from it with up to IN_FLIGHT HTTP exchanges in the air; a slot frees when
 * its exchange is over (its record commits in a later group) and takes the next buffered message.
 * The buffer is refilled when it runs empty while the last claim came back full, so one claim
 * statement serves a pipe's worth of deliveries instead of the one or two slots that just freed.
 * At shutdown, buffered messages never started are released (lease and attempt count undone).
 * BullMQ's `webhook.deliver` jobs and the retry tick only wake it: a job carries no work a row
 * does not hold, so a lost or duplicated job changes nothing, and one row is claimed by one worker.
 */
@Injectable()
export class DeliveryPump implements OnModuleDestroy, OnApplicationShutdown {
  private readonly logger = new Logger(DeliveryPump.name);
  /** HTTP exchanges in the air (the slots). */
  private inFlight = 0;
  /** Deliveries not recorded yet (their HTTP exchange may be over): shutdown waits for these. */
  private unrecorded = 0;
  /** Claimed (leased to this worker) and not started yet. */
  private buffered: ClaimedWebhookMessage[] = [];
  private claiming = false;
  private again = false;
  /** The last claim was full: more may be due, so a freed slot claims again. */
  private more = false;
  private stopped = false;
  private idle: (() => void) | null = null;

  constructor(
    private readonly messages: WebhookMessagesRepository,
    private readonly delivery: DeliveryService,
  ) {}

  /** Claims and starts due deliveries until the slots are full or nothing more is due. */
  wake(): void {
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
          if (this.buffered.length === 0) {
            const rows = await this.messages.claimNextDue(CLAIM, LEASE_SECONDS);
            this.more = rows.length >= CLAIM;
            if (this.stopped) {
              await this.messages.releaseClaimed(rows.map((r) => r.message_id));
              break;
            }
            this.buffered = rows;
            if (rows.length === 0) break;
          }
          this.start(this.buffered.shift()!);
        }
      } while (this.again && !this.stopped);
    } catch (err) {
      // Claimed rows stay leased and come due again; the next wake (a job, the tick) claims again.
      this.logger.warn({ err: (err as Error).message }, 'claiming pushes failed; retried on the next wake');
    }
  }

  private start(row: ClaimedWebhookMessage): void {
    this.inFlight++;
    this.unrecorded++;
    let sent = false;
    const freeSlot = (): void => {
      if (sent) return;
      sent = true;
      this.inFlight--;
      if (this.buffered.length > 0 || this.more || this.again) this.wake();
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
      });
  }

  /** The first shutdown hook: nothing new starts from here on, and what was claimed but not sent is handed back. */
  async onModuleDestroy(): Promise<void> {
    this.stopped = true;
    // Buffered and never sent: due again at once for any dispatcher, this claim not counted as an attempt.
    const unsent = this.buffered.splice(0).map((r) => r.message_id);
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
