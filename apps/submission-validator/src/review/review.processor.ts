import { Processor, WorkerHost } from '@nestjs/bullmq';
import { jobLockMs } from '@retain/config';
import { JobRunner } from '@retain/platform';
import { QueueName, type JobData } from '@retain/queues';
import type { Job } from 'bullmq';
import { ReviewService } from './review.service';

/** Consumer of `submission.review` jobs (one per accepted submission, from the outbox). */
@Processor(QueueName.SubmissionReview, { concurrency: 4, lockDuration: jobLockMs(), stalledInterval: jobLockMs() })
export class ReviewProcessor extends WorkerHost {
  constructor(
    private readonly reviews: ReviewService,
    private readonly runner: JobRunner,
  ) {
    super();
  }

  async process(job: Job<JobData<'submission.review'>>): Promise<unknown> {
    return this.runner.run(QueueName.SubmissionReview, job, () => this.reviews.review(job.data.submissionId));
  }
}
