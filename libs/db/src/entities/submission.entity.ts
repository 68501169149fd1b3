import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';

/** One POST /retain/transactions call that saved something (dryrun calls leave no row). */
@Entity('submissions')
export class SubmissionEntity {
  @PrimaryGeneratedColumn('uuid') id: string;
  @Column({ name: 'merchant_id', type: 'uuid' }) merchantId: string;
  @Column({ name: 'request_id', type: 'char', length: 32 }) requestId: string;
  @Column({ name: 'received_count', type: 'int' }) receivedCount: number;
  @Column({ name: 'accepted_count', type: 'int' }) acceptedCount: number;
  @Column({ name: 'rejected_count', type: 'int' }) rejectedCount: number;
  @Column({ name: 'reviewed_at', type: 'timestamptz', nullable: true }) reviewedAt: Date | null;
  @Column({ name: 'review_error_count', type: 'int', nullable: true }) reviewErrorCount: number | null;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
}
