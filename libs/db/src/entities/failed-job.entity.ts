import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * A job that failed for good (out of BullMQ attempts, or unrecoverable), recorded by the workers'
 * shared failed handler or the outbox sweeper. Open while `redriven_at` is null; `retain jobs
 * redrive` puts it back. The payload holds ids and a version only; the error is scrubbed.
 */
@Entity('failed_jobs')
export class FailedJobEntity {
  @PrimaryColumn({ type: 'varchar', length: 64 }) queue: string;
  @PrimaryColumn({ name: 'job_id', type: 'varchar', length: 255 }) jobId: string;
  @Column({ name: 'job_name', type: 'varchar', length: 64 }) jobName: string;
  @Column({ type: 'jsonb' }) payload: unknown;
  @Column({ name: 'outbox_id', type: 'uuid', nullable: true }) outboxId: string | null;
  @Column({ type: 'int' }) attempts: number;
  @Column({ name: 'last_error', type: 'text' }) lastError: string;
  @Column({ name: 'failed_at', type: 'timestamptz' }) failedAt: Date;
  @Column({ name: 'failure_count', type: 'int' }) failureCount: number;
  @Column({ name: 'redriven_at', type: 'timestamptz', nullable: true }) redrivenAt: Date | null;
  @Column({ name: 'redrive_count', type: 'int' }) redriveCount: number;
}
