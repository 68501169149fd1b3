import { Module, type DynamicModule } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import { PlatformModule, ProcessorProviders, registerQueues } from '@retain/platform';
import { RefundBatchProcessor } from './batch/refund-batch.processor';
import { RefundBatchService } from './batch/refund-batch.service';

/** refund-batcher: sends refunds to the processor in batches (decisions §8). */
@Module({})
export class RefundBatcherModule {
  static forRoot(config: RetainConfig): DynamicModule {
    return {
      module: RefundBatcherModule,
      imports: [PlatformModule.forApp('refund-batcher', config), registerQueues('refund-batcher')],
      providers: [...ProcessorProviders, RefundBatchService, RefundBatchProcessor],
    };
  }
}
