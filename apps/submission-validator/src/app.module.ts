import { BullModule } from '@nestjs/bullmq';
import { Module, type DynamicModule } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import { PlatformModule } from '@retain/platform';
import { QueueName } from '@retain/queues';
import { ReviewProcessor } from './review/review.processor';
import { ReviewService } from './review/review.service';

/** submission-validator: the asynchronous post-submission review (decisions §6). */
@Module({})
export class SubmissionValidatorModule {
  static forRoot(config: RetainConfig): DynamicModule {
    return {
      module: SubmissionValidatorModule,
      imports: [
        PlatformModule.forApp('submission-validator', config),
        BullModule.registerQueue({ name: QueueName.SubmissionReview }),
      ],
      providers: [ReviewService, ReviewProcessor],
    };
  }
}
