import { Module, type DynamicModule } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import { PlatformModule, registerQueues } from '@retain/platform';
import { DeliverProcessor } from './delivery/deliver.processor';
import { DeliveryPump } from './delivery/delivery-pump.service';
import { DeliveryService } from './delivery/delivery.service';
import { RetryTickService } from './delivery/retry-tick.service';

/** webhook-dispatcher: signed push delivery, retries, dead messages (decisions §9). */
@Module({})
export class WebhookDispatcherModule {
  static forRoot(config: RetainConfig): DynamicModule {
    return {
      module: WebhookDispatcherModule,
      imports: [PlatformModule.forApp('webhook-dispatcher', config), registerQueues('webhook-dispatcher')],
      providers: [DeliveryService, DeliveryPump, DeliverProcessor, RetryTickService],
    };
  }
}
