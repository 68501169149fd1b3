import { Module, type DynamicModule } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import { PaymentProcessorProvider, PlatformModule, registerQueues } from '@retain/platform';
import { ReviewProcessor } from './review/review.processor';
import { ReviewService } from './review/review.service';

/** submission-validator: the asynchronous post-submission review (decisions §6). */
@Module({})
export class SubmissionValidatorModule {
  static forRoot(config: RetainConfig): DynamicModule {
    return {
      module: SubmissionValidatorModule,
      imports: [PlatformModule.forApp('submission-validator', config), registerQueues('submission-validator')],
      providers: [PaymentProcessorProvider, ReviewService, ReviewProcessor],
    };
  }
}
