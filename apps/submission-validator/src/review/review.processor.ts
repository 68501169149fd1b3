import { WorkerHost } from '@nestjs/bullmq';
import { JobRunner, QueueProcessor } from '@retain/platform';
import { QueueName, type JobData } from '@retain/queues';
import type { Job } from 'bullmq';
import { ReviewService } from './review.service';

/** Consumer of `submission.review` jobs (one per accepted submission, from the outbox). */
@QueueProcessor(QueueName.SubmissionReview)
export class ReviewProcessor extends WorkerHost {
  constructor(
    private readonly reviews: ReviewService,
    private readonly runner: JobRunner,
  ) {
    super();
  }

  async process(job: Job<JobData<'submission.review'>>, token?: string): Promise<unknown> {
    return this.runner.run(QueueName.SubmissionReview, job, () => this.reviews.review(job.data.submissionId), {
      token,
    });
  }
}
