import { BullModule } from '@nestjs/bullmq';
import { Module, type DynamicModule } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import { PaymentProcessorProvider, PlatformModule } from '@retain/platform';
import { QueueName } from '@retain/queues';
import { RefundBatchProcessor } from './batch/refund-batch.processor';
import { RefundBatchService } from './batch/refund-batch.service';

/** refund-batcher: sends refunds to the processor in batches (decisions §8). */
@Module({})
export class RefundBatcherModule {
  static forRoot(config: RetainConfig): DynamicModule {
    return {
      module: RefundBatcherModule,
      imports: [
        PlatformModule.forApp('refund-batcher', config),
        BullModule.registerQueue({ name: QueueName.RefundBatch }),
      ],
      providers: [PaymentProcessorProvider, RefundBatchService, RefundBatchProcessor],
    };
  }
}
