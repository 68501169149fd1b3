import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';

/**
 * A job announced in the same database transaction as the state change it follows. The relay
 * enqueues it with jobId = id; the consumer marks it completed; the sweeper re-enqueues what
 * Redis lost (decisions: Postgres is the source of truth, Redis carries work).
 */
@Entity('outbox')
export class OutboxEntity {
  @PrimaryGeneratedColumn('uuid') id: string;
  @Column({ type: 'varchar', length: 64 }) queue: string;
  @Column({ name: 'job_name', type: 'varchar', length: 64 }) jobName: string;
  @Column({ type: 'jsonb' }) payload: Record<string, unknown>;
  @Column({ name: 'published_at', type: 'timestamptz', nullable: true }) publishedAt: Date | null;
  @Column({ name: 'completed_at', type: 'timestamptz', nullable: true }) completedAt: Date | null;
  /** Its job failed for good (see failed_jobs): the sweeper leaves it until a redrive clears this. */
  @Column({ name: 'failed_at', type: 'timestamptz', nullable: true }) failedAt: Date | null;
  @Column({ name: 'publish_count', type: 'int' }) publishCount: number;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
}
