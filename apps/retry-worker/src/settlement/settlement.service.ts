import { Inject, Injectable, Logger, type OnApplicationShutdown, type OnModuleInit } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import { SettlementRepository, type AwaitingSettlementRow } from '@retain/db';
import { RETAIN_CONFIG } from '@retain/platform';
import { TRANSACTION_PROCESSORS, processorOfCapture, type TransactionProcessors } from '@retain/processor';
import { TransactionStatus, canTransition } from '@retain/recovery';
import { DataSource } from 'typeorm';

/** Captured transactions taken per batch; a pass takes batches while they come back full. */
const BATCH = 200;
/** A pass ends after this many rows or this long (the next interval goes on from there). */
const PASS_ROWS = 20_000;
const PASS_MS = 30_000;

/**
 * Settlement (issue 12): every SETTLEMENT_CHECK_INTERVAL, asks each captured transaction's
 * processor whether the capture has settled and moves the settled ones from `Captured` to
 * `Settled`. The processor answers on the time-scaled clock (the sandbox settles at the next UTC
 * midnight: with RETRY_TIME_SCALE, a scaled day). Adapters that do not report settlement
 * (`settlementOf` absent) leave their transactions `Captured`; those are put back a day
 * (SettlementRepository.putBack), so they take no place in the passes before. A pass goes through
 * every capture due for a check (each once: the rows it marked are not taken again), in batches,
 * within PASS_ROWS and PASS_MS. Several replicas may check at once: each takes its own rows (SKIP
 * LOCKED), and the move is guarded by the status.
 */
@Injectable()
export class SettlementService implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(SettlementService.name);
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private stopping = false;

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
    this.stopping = true;
    if (this.timer) clearInterval(this.timer);
  }

  /** One pass over the captured transactions due for a check; returns how many became Settled. */
  async check(): Promise<number> {
    if (this.running) return 0;
    this.running = true;
    let moved = 0;
    try {
      const started = Date.now();
      const passStart = await SettlementRepository.clock(this.db);
      let taken = 0;
      for (;;) {
        const rows = await SettlementRepository.takeForCheck(this.db, BATCH, passStart);
        const settled: string[] = [];
        const unsupported: string[] = [];
        for (const row of rows) {
          const answer = await this.settlementOf(row);
          if (answer === 'settled') settled.push(row.id);
          else if (answer === 'unsupported') unsupported.push(row.id);
        }
        moved += await SettlementRepository.markSettled(this.db, settled);
        await SettlementRepository.putBack(this.db, unsupported);
        taken += rows.length;
        if (rows.length < BATCH || taken >= PASS_ROWS || Date.now() - started >= PASS_MS || this.stopping) break;
      }
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'settlement check failed; retried next interval');
    } finally {
      this.running = false;
    }
    return moved;
  }

  /** The processor's answer; `unsupported`: its adapter does not report settlement. */
  private async settlementOf(row: AwaitingSettlementRow): Promise<'settled' | 'pending' | 'unsupported'> {
    if (!canTransition(TransactionStatus.Captured, 'settled', { unresolvedAttempts: 0 })) return 'pending';
    try {
      const processor = await processorOfCapture(
        this.processors,
        row.captured_by,
        row.merchant_id,
        row.division_number || null,
      );
      if (!processor.settlementOf) return 'unsupported';
      // The processor's clock runs like the schedule's: RETRY_TIME_SCALE times faster from the submission.
      const anchor = new Date(row.submitted_ts).getTime();
      const now = Date.now();
      const virtualNow = new Date(now <= anchor ? now : anchor + (now - anchor) * this.config.retryTimeScale);
      const answer = await processor.settlementOf(
        { processorTransactionId: row.processor_transaction_id, capturedAt: virtualOf(row, anchor, this.config) },
        virtualNow,
      );
      return answer;
    } catch (err) {
      this.logger.warn({ transaction: row.id, err: (err as Error).message }, 'settlement lookup failed');
      return 'pending';
    }
  }
}

/** The capture time on the same time-scaled clock. */
function virtualOf(row: AwaitingSettlementRow, anchor: number, config: RetainConfig): Date {
  const t = new Date(row.captured_at).getTime();
  return new Date(t <= anchor ? t : anchor + (t - anchor) * config.retryTimeScale);
}
