import { WorkerHost } from '@nestjs/bullmq';
import { JobRunner, QueueProcessor, outboxIdOf } from '@retain/platform';
import { QueueName, type JobData } from '@retain/queues';
import type { Job } from 'bullmq';
import { DeliveryService } from './delivery.service';

/** Consumer of `webhook.deliver`: one job per delivery attempt of a push. */
@QueueProcessor(QueueName.WebhookDeliver)
export class DeliverProcessor extends WorkerHost {
  constructor(
    private readonly delivery: DeliveryService,
    private readonly runner: JobRunner,
  ) {
    super();
  }

  async process(job: Job<JobData<'webhook.deliver'>>): Promise<unknown> {
    // The delivery completes the job's outbox row in the statement that records the attempt.
    return this.runner.run(
      QueueName.WebhookDeliver,
      job,
      () => this.delivery.deliver(job.data.messageId, outboxIdOf(job)),
      { handlerCompletesOutbox: true },
    );
  }
}
