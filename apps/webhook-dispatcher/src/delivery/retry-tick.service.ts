import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import { RETAIN_CONFIG } from '@retain/platform';
import { DeliveryPump } from './delivery-pump.service';

/**
 * Delivery retries live in Postgres (next_attempt_at), not as hours-long delayed jobs in Redis. A
 * timer in every dispatcher wakes its pump, which claims due messages straight from Postgres (one
 * worker per attempt: the claim decides), so several dispatchers may tick at once and a Redis flush
 * loses nothing: the rows are still due.
 */
@Injectable()
export class RetryTickService implements OnModuleInit, OnApplicationShutdown {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly pump: DeliveryPump,
    @Inject(RETAIN_CONFIG) private readonly config: RetainConfig,
  ) {}

  onModuleInit(): void {
    this.timer = setInterval(() => this.pump.wake(), this.config.tickMs);
    this.timer.unref();
  }

  onApplicationShutdown(): void {
    if (this.timer) clearInterval(this.timer);
  }
}
