import { Module, type DynamicModule } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import { PlatformModule, ProcessorProviders, registerQueues } from '@retain/platform';
import { AttemptProcessor } from './attempts/attempt.processor';
import { AttemptService } from './attempts/attempt.service';
import { PaymentMethodsService } from './attempts/payment-methods.service';
import { ProcessorNotificationProcessor } from './notifications/processor-notification.processor';
import { ProcessorNotificationService } from './notifications/processor-notification.service';
import { ReconcileService } from './reconcile/reconcile.service';
import { RetentionService } from './retention/retention.service';
import { SettlementService } from './settlement/settlement.service';
import { AttemptSchedulerService } from './scheduler/attempt-scheduler.service';
import { TickProcessor } from './scheduler/tick.processor';

/**
 * retry-worker: the scheduler tick and the attempt processor (decisions §7, network-rules.md), the
 * reconciliation, the settlement check and the retention sweep.
 */
@Module({})
export class RetryWorkerModule {
  static forRoot(config: RetainConfig): DynamicModule {
    return {
      module: RetryWorkerModule,
      imports: [PlatformModule.forApp('retry-worker', config), registerQueues('retry-worker')],
      providers: [
        ...ProcessorProviders,
        AttemptSchedulerService,
        TickProcessor,
        PaymentMethodsService,
        AttemptService,
        ReconcileService,
        SettlementService,
        RetentionService,
        AttemptProcessor,
        ProcessorNotificationService,
        ProcessorNotificationProcessor,
      ],
    };
  }
}
