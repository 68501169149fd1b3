import { WorkerHost } from '@nestjs/bullmq';
import { JobRunner, QueueProcessor } from '@retain/platform';
import { QueueName, type JobData } from '@retain/queues';
import type { Job } from 'bullmq';
import { AttemptService } from './attempt.service';

/**
 * Consumer of `retry.attempt`: one job per slice of a tick's attempts (job id = its outbox row id),
 * or per attempt for a version-1 job queued before the slices.
 */
@QueueProcessor(QueueName.RetryAttempt)
export class AttemptProcessor extends WorkerHost {
  constructor(
    private readonly attempts: AttemptService,
    private readonly runner: JobRunner,
  ) {
    super();
  }

  async process(job: Job<JobData<'retry.attempt'>>, token?: string): Promise<unknown> {
    return this.runner.run(
      QueueName.RetryAttempt,
      job,
      () => this.attempts.runMany(job.data.v === 2 ? job.data.attemptIds : [job.data.attemptId]),
      { token },
    );
  }
}
