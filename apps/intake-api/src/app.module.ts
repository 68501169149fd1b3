import { Module, type DynamicModule } from '@nestjs/common';
import { APP_FILTER, APP_PIPE } from '@nestjs/core';
import type { RetainConfig } from '@retain/config';
import { PlatformModule } from '@retain/platform';
import { AnalyticsController } from './analytics/analytics.controller';
import { ExperimentsController } from './experiments/experiments.controller';
import { MerchantAuthGuard } from './auth/merchant-auth.guard';
import { ApiExceptionFilter } from './http/api-exception.filter';
import { SafeParamsPipe } from './http/safe-params.pipe';
import { KeysController } from './keys/keys.controller';
import { MerchantController, WebhookMessagesController } from './merchant/merchant.controller';
import { AdyenNotificationsController } from './processors/adyen-notifications.controller';
import { AdyenNotificationsService } from './processors/adyen-notifications.service';
import { RefundRequestService } from './refunds/refund-request.service';
import { RefundsController } from './refunds/refunds.controller';
import { SessionController } from './session/session.controller';
import { SubmissionService } from './transactions/submission.service';
import { TransactionsController } from './transactions/transactions.controller';

/** The merchants' HTTP API. */
@Module({})
export class IntakeApiModule {
  static forRoot(config: RetainConfig): DynamicModule {
    return {
      module: IntakeApiModule,
      imports: [PlatformModule.forApp('intake-api', config)],
      controllers: [
        TransactionsController,
        RefundsController,
        KeysController,
        SessionController,
        AnalyticsController,
        ExperimentsController,
        MerchantController,
        WebhookMessagesController,
        AdyenNotificationsController,
      ],
      providers: [
        SubmissionService,
        RefundRequestService,
        AdyenNotificationsService,
        MerchantAuthGuard,
        { provide: APP_FILTER, useClass: ApiExceptionFilter },
        { provide: APP_PIPE, useClass: SafeParamsPipe },
      ],
    };
  }
}
