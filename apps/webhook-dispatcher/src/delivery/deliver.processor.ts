import { WorkerHost } from '@nestjs/bullmq';
import { JobRunner, QueueProcessor } from '@retain/platform';
import { QueueName, type JobData } from '@retain/queues';
import type { Job } from 'bullmq';
import { DeliveryPump } from './delivery-pump.service';

/**
 * Consumer of `webhook.deliver`: a job says "a push is waiting" and wakes the pump, which claims
 * due messages from Postgres in batches (the message named is among them). The job's outbox row is
 * completed by the runner: the message row itself is what makes the delivery happen.
 */
@QueueProcessor(QueueName.WebhookDeliver)
export class DeliverProcessor extends WorkerHost {
  constructor(
    private readonly pump: DeliveryPump,
    private readonly runner: JobRunner,
  ) {
    super();
  }

  async process(job: Job<JobData<'webhook.deliver'>>): Promise<unknown> {
    return this.runner.run(QueueName.WebhookDeliver, job, () => {
      this.pump.wake();
      return Promise.resolve('woken');
    });
  }
}
