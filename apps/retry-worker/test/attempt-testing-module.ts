import { getQueueToken } from '@nestjs/bullmq';
import { Test, type TestingModule } from '@nestjs/testing';
import type { RetainConfig } from '@retain/config';
import { AttemptScheduleRepository } from '@retain/db';
import { RETAIN_CONFIG, RetainMetrics } from '@retain/platform';
import { TRANSACTION_PROCESSORS, fixedProcessor, type PaymentProcessor } from '@retain/processor';
import { OutboxRelay, QueueName, type QueueRegistry } from '@retain/queues';
import { DataSource } from 'typeorm';
import { AttemptService } from '../src/attempts/attempt.service';
import { PaymentMethodsService } from '../src/attempts/payment-methods.service';
import { ReconcileService } from '../src/reconcile/reconcile.service';
import { AttemptSchedulerService } from '../src/scheduler/attempt-scheduler.service';
import { TickProcessor } from '../src/scheduler/tick.processor';

/**
 * The retry worker's attempt path as the app wires it (the attempt and payment-method services, the
 * reconciliation, the scheduler and its tick) on the real Postgres and Redis, `processor` charging for
 * every merchant: the service-level tests' one module.
 */
export function attemptTestingModule(
  db: DataSource,
  queues: QueueRegistry,
  config: RetainConfig,
  processor: PaymentProcessor,
  metrics: RetainMetrics = new RetainMetrics('retry-worker'),
): Promise<TestingModule> {
  return Test.createTestingModule({
    providers: [
      PaymentMethodsService,
      AttemptService,
      AttemptSchedulerService,
      AttemptScheduleRepository,
      ReconcileService,
      TickProcessor,
      { provide: DataSource, useValue: db },
      { provide: RETAIN_CONFIG, useValue: config },
      { provide: RetainMetrics, useValue: metrics },
      { provide: OutboxRelay, useValue: new OutboxRelay(db, queues) },
      { provide: getQueueToken(QueueName.RetryTick), useValue: queues.get(QueueName.RetryTick) },
      { provide: TRANSACTION_PROCESSORS, useValue: fixedProcessor(processor) },
    ],
  }).compile();
}
