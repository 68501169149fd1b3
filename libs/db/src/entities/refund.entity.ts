import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn, UpdateDateColumn } from 'typeorm';

/** kind 'refund': money back on a captured transaction; 'stop': a refund call on one still in retry. */
export type RefundKind = 'refund' | 'stop';

@Entity('refunds')
export class RefundEntity {
  @PrimaryGeneratedColumn('uuid') id: string;
  @Column({ type: 'varchar', length: 40 }) vid: string;
  @Column({ name: 'merchant_id', type: 'uuid' }) merchantId: string;
  @Column({ name: 'transaction_id', type: 'uuid' }) transactionId: string;
  @Column({ type: 'varchar', length: 8 }) kind: RefundKind;
  /** The attempt whose capture this refund returns when it is not the transaction's own (a late capture's). */
  @Column({ name: 'attempt_id', type: 'uuid', nullable: true }) attemptId: string | null;
  @Column({ name: 'amount_minor', type: 'bigint' }) amountMinor: string;
  @Column({ type: 'char', length: 3 }) currency: string;
  @Column({ type: 'varchar', length: 16 }) status: string;
  /** Transaction status to return to if the processor rejects the refund. */
  @Column({ name: 'previous_status', type: 'varchar', length: 32, nullable: true }) previousStatus: string | null;
  @Column({ name: 'requested_at', type: 'timestamptz' }) requestedAt: Date;
  @Column({ name: 'timestamp', type: 'timestamptz' }) timestamp: Date;
  @Column({ name: 'sent_at', type: 'timestamptz', nullable: true }) sentAt: Date | null;
  @Column({ name: 'processor_refund_id', type: 'varchar', length: 128, nullable: true })
  processorRefundId: string | null;
  @Column({ name: 'failure_message', type: 'text', nullable: true }) failureMessage: string | null;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' }) updatedAt: Date;
}
