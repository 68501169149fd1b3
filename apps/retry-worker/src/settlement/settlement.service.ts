import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import { SettlementRepository, type AwaitingSettlementRow } from '@retain/db';
import { RETAIN_CONFIG } from '@retain/platform';
import { TRANSACTION_PROCESSORS, processorOfCapture, type TransactionProcessors } from '@retain/processor';
import { TransactionStatus, canTransition } from '@retain/recovery';
import { DataSource } from 'typeorm';

/** Captured transactions checked per pass; a pass repeats while every row of the batch was due. */
const BATCH = 200;

/**
 * Settlement (issue 12): every SETTLEMENT_CHECK_INTERVAL, asks each captured transaction's
 * processor whether the capture has settled and moves the settled ones from `Captured` to
 * `Settled`. The processor answers on the time-scaled clock (the sandbox settles at the next UTC
 * midnight: with RETRY_TIME_SCALE, a scaled day). Adapters that do not report settlement
 * (`settlementOf` absent) leave their transactions `Captured`. Several replicas may check at once:
 * each takes its own rows (SKIP LOCKED), and the move is guarded by the status.
 */
@Injectable()
export class SettlementService implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(SettlementService.name);
  private timer: NodeJS.Timeout | undefined;
  private running = false;

  constructor(
    private readonly db: DataSource,
    @Inject(TRANSACTION_PROCESSORS) private readonly processors: TransactionProcessors,
    @Inject(RETAIN_CONFIG) private readonly config: RetainConfig,
  ) {}

  onModuleInit(): void {
    this.timer = setInterval(() => void this.check(), this.config.settlementCheckMs);
    this.timer.unref();
  }

  onApplicationShutdown(): void {
    if (this.timer) clearInterval(this.timer);
  }

  /** One pass over the captured transactions; returns how many became Settled. */
  async check(): Promise<number> {
    if (this.running) return 0;
    this.running = true;
    let moved = 0;
    try {
      const rows = await SettlementRepository.takeForCheck(this.db, BATCH);
      const settled: string[] = [];
      for (const row of rows) if (await this.isSettled(row)) settled.push(row.id);
      moved = await SettlementRepository.markSettled(this.db, settled);
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'settlement check failed; retried next interval');
    } finally {
      this.running = false;
    }
    return moved;
  }

  private async isSettled(row: AwaitingSettlementRow): Promise<boolean> {
    if (!canTransition(TransactionStatus.Captured, 'settled', { unresolvedAttempts: 0 })) return false;
    try {
      const processor = await processorOfCapture(
        this.processors,
        row.captured_by,
        row.merchant_id,
        row.division_number || null,
      );
      if (!processor.settlementOf) return false;
      // The processor's clock runs like the schedule's: RETRY_TIME_SCALE times faster from the submission.
      const anchor = new Date(row.submitted_ts).getTime();
      const now = Date.now();
      const virtualNow = new Date(now <= anchor ? now : anchor + (now - anchor) * this.config.retryTimeScale);
      const answer = await processor.settlementOf(
        { processorTransactionId: row.processor_transaction_id, capturedAt: virtualOf(row, anchor, this.config) },
        virtualNow,
      );
      return answer === 'settled';
    } catch (err) {
      this.logger.warn({ transaction: row.id, err: (err as Error).message }, 'settlement lookup failed');
      return false;
    }
  }
}

/** The capture time on the same time-scaled clock. */
function virtualOf(row: AwaitingSettlementRow, anchor: number, config: RetainConfig): Date {
  const t = new Date(row.captured_at).getTime();
  return new Date(t <= anchor ? t : anchor + (t - anchor) * config.retryTimeScale);
}
