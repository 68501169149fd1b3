import { Processor, WorkerHost } from '@nestjs/bullmq';
import { jobLockMs } from '@retain/config';
import { JobRunner, outboxIdOf } from '@retain/platform';
import { QueueName, type JobData } from '@retain/queues';
import type { Job } from 'bullmq';
import { DeliveryService } from './delivery.service';

/** Consumer of `webhook.deliver`: one job per delivery attempt of a push. */
@Processor(QueueName.WebhookDeliver, { concurrency: 64, lockDuration: jobLockMs(), stalledInterval: jobLockMs() })
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
