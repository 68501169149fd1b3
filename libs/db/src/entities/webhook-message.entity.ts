import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn, UpdateDateColumn } from 'typeorm';

export type WebhookMessageStatus = 'pending' | 'delivered' | 'dead' | 'gone' | 'no_endpoint';

/** A push notification: the body is fixed when the event happens; message_id never changes. */
@Entity('webhook_messages')
export class WebhookMessageEntity {
  @PrimaryGeneratedColumn('uuid') id: string;
  @Column({ name: 'message_id', type: 'char', length: 27 }) messageId: string;
  @Column({ name: 'merchant_id', type: 'uuid' }) merchantId: string;
  @Column({ name: 'event_name', type: 'varchar', length: 32 }) eventName: string;
  @Column({ name: 'payload_id', type: 'varchar', length: 40 }) payloadId: string;
  @Column({ name: 'transaction_id', type: 'uuid', nullable: true }) transactionId: string | null;
  @Column({ type: 'jsonb' }) body: { header: Record<string, unknown>; content: unknown };
  @Column({ type: 'varchar', length: 16 }) status: WebhookMessageStatus;
  @Column({ name: 'attempt_count', type: 'int' }) attemptCount: number;
  /** How many times an operator replayed the message; part of the delivery job id. */
  @Column({ name: 'replay_count', type: 'int', default: 0 }) replayCount: number;
  @Column({ name: 'next_attempt_at', type: 'timestamptz', nullable: true }) nextAttemptAt: Date | null;
  @Column({ name: 'last_status_code', type: 'int', nullable: true }) lastStatusCode: number | null;
  @Column({ name: 'last_error', type: 'text', nullable: true }) lastError: string | null;
  @Column({ name: 'delivered_at', type: 'timestamptz', nullable: true }) deliveredAt: Date | null;
  @Column({ name: 'dead_at', type: 'timestamptz', nullable: true }) deadAt: Date | null;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' }) updatedAt: Date;
}

/** The delivery log: one row per HTTP attempt, readable from the CLI. */
@Entity('webhook_deliveries')
export class WebhookDeliveryEntity {
  @PrimaryGeneratedColumn({ type: 'bigint' }) id: string;
  @Column({ name: 'message_id', type: 'char', length: 27 }) messageId: string;
  @Column({ type: 'int' }) attempt: number;
  @Column({ name: 'attempted_at', type: 'timestamptz' }) attemptedAt: Date;
  @Column({ type: 'text' }) url: string;
  @Column({ name: 'status_code', type: 'int', nullable: true }) statusCode: number | null;
  @Column({ name: 'latency_ms', type: 'int' }) latencyMs: number;
  @Column({ type: 'text', nullable: true }) error: string | null;
}
