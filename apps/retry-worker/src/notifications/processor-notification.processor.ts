import { WorkerHost } from '@nestjs/bullmq';
import { JobRunner, QueueProcessor } from '@retain/platform';
import { QueueName, type JobData } from '@retain/queues';
import type { Job } from 'bullmq';
import { ProcessorNotificationService } from './processor-notification.service';

/** Consumer of `processor.notification`: one stored processor notification per job (job id = outbox row id). */
@QueueProcessor(QueueName.ProcessorNotification)
export class ProcessorNotificationProcessor extends WorkerHost {
  constructor(
    private readonly notifications: ProcessorNotificationService,
    private readonly runner: JobRunner,
  ) {
    super();
  }

  async process(job: Job<JobData<'processor.notification'>>, token?: string): Promise<unknown> {
    return this.runner.run(
      QueueName.ProcessorNotification,
      job,
      () => this.notifications.handle(job.data.notificationId),
      { token },
    );
  }
}
