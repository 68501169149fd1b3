import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { WebhookMessagesRepository } from '@retain/db';
import { QUEUES } from '@retain/queues';
import { DeliveryService, LEASE_SECONDS } from './delivery.service';

/** Deliveries in flight per dispatcher: the webhook.deliver queue's worker concurrency. */
const IN_FLIGHT = QUEUES['webhook.deliver'].concurrency;
/** Messages claimed per statement. */
const CLAIM = 32;
/** Deliveries whose record has not committed yet, at most (memory and lease bound). */
const MAX_UNRECORDED = 4 * IN_FLIGHT;

/**
 * The dispatcher's pump (issue 14): pushes are rows in Postgres, so they are claimed from there in
 * batches (one UPDATE ... SKIP LOCKED for up to 32, leased like a single claim) and delivered with
 * up to IN_FLIGHT HTTP exchanges in the air; a slot frees when its exchange is over (its record
 * commits in a later group), and a freed slot claims more while the last claim came back full.
 * BullMQ's `webhook.deliver` jobs and the retry tick only wake it: a job carries no work a row
 * does not hold, so a lost or duplicated job changes nothing, and one row is claimed by one worker.
 */
@Injectable()
export class DeliveryPump implements OnApplicationShutdown {
  private readonly logger = new Logger(DeliveryPump.name);
  /** HTTP exchanges in the air (the slots). */
  private inFlight = 0;
  /** Deliveries not recorded yet (their HTTP exchange may be over): shutdown waits for these. */
  private unrecorded = 0;
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
          const want = Math.min(CLAIM, IN_FLIGHT - this.inFlight);
          const rows = await this.messages.claimNextDue(want, LEASE_SECONDS);
          this.more = rows.length >= want;
          for (const row of rows) this.start(row);
          if (!this.more) break;
        }
      } while (this.again && !this.stopped);
    } catch (err) {
      // Claimed rows stay leased and come due again; the next wake (a job, the tick) claims again.
      this.logger.warn({ err: (err as Error).message }, 'claiming pushes failed; retried on the next wake');
    }
  }

  private start(row: Parameters<DeliveryService['deliverClaimed']>[0]): void {
    this.inFlight++;
    this.unrecorded++;
    let sent = false;
    const freeSlot = (): void => {
      if (sent) return;
      sent = true;
      this.inFlight--;
      if (this.more || this.again) this.wake();
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
