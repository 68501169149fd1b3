import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn, UpdateDateColumn } from 'typeorm';

/**
 * pending: handed to the processor or about to be; unknown: no decision from the processor (looked
 * up until settled); error: settled as not charged. The rules live in libs/recovery.
 */
export type AttemptState = 'pending' | 'unknown' | 'captured' | 'declined' | 'error';

/** One retry attempt; shown through the API as a Transaction with its own vid. */
@Entity('attempts')
export class AttemptEntity {
  @PrimaryGeneratedColumn('uuid') id: string;
  @Column({ type: 'varchar', length: 40 }) vid: string;
  @Column({ name: 'retain_transaction_id', type: 'varchar', length: 40 }) retainTransactionId: string;
  @Column({ name: 'transaction_id', type: 'uuid' }) transactionId: string;
  @Column({ name: 'merchant_id', type: 'uuid' }) merchantId: string;
  @Column({ name: 'retry_number', type: 'int' }) retryNumber: number;
  @Column({ type: 'varchar', length: 16 }) state: AttemptState;
  @Column({ type: 'varchar', length: 32, nullable: true }) status: string | null;
  @Column({ name: 'scheduled_for', type: 'timestamptz' }) scheduledFor: Date;
  @Column({ name: 'amount_minor', type: 'bigint' }) amountMinor: string;
  /** Captured amount of a partial authorization (decisions §15); null: the whole amount when captured. */
  @Column({ name: 'partial_amount_minor', type: 'bigint', nullable: true }) partialAmountMinor: string | null;
  /** A forced deposit: a capture without authorization (service-spec `forced_deposit`). */
  @Column({ name: 'forced_deposit', type: 'boolean', default: false }) forcedDeposit: boolean;
  /** The excess-reattempt fee this attempt risks (USD minor units, its network's rate on its day). */
  @Column({ name: 'network_fee_risked_minor', type: 'int', nullable: true }) networkFeeRiskedMinor: number | null;
  @Column({ type: 'char', length: 3 }) currency: string;
  @Column({ name: 'card_hmac', type: 'char', length: 64, nullable: true }) cardHmac: string | null;
  @Column({ name: 'card_network', type: 'varchar', length: 16, nullable: true }) cardNetwork: string | null;
  @Column({ name: 'response_code', type: 'varchar', length: 16, nullable: true }) responseCode: string | null;
  @Column({ name: 'merchant_advice_code', type: 'varchar', length: 4, nullable: true })
  merchantAdviceCode: string | null;
  @Column({ name: 'auth_code_description', type: 'varchar', length: 16, nullable: true })
  authCodeDescription: string | null;
  @Column({ name: 'processor_transaction_id', type: 'varchar', length: 128, nullable: true })
  processorTransactionId: string | null;
  @Column({ type: 'text', nullable: true }) message: string | null;
  /** When the attempt passed the network-limit check and went to the processor (in flight until processed_at). */
  @Column({ name: 'prepared_at', type: 'timestamptz', nullable: true }) preparedAt: Date | null;
  /** Fingerprint of the card data sent (a hash of the expiry): card blocks lift when it changes. */
  @Column({ name: 'card_data_version', type: 'varchar', length: 64, nullable: true }) cardDataVersion: string | null;
  /** The account's payment method this attempt charged (payment_methods row), when known. */
  @Column({ name: 'payment_method_ref', type: 'uuid', nullable: true }) paymentMethodRef: string | null;
  /** The API's payment_method (masked) and is_network_token of the card charged, frozen when the attempt went out. */
  @Column({ name: 'payment_method_view', type: 'jsonb', nullable: true })
  paymentMethodView: Record<string, unknown> | null;
  /**
   * The processor account (processor_accounts row, retired or not) this attempt was charged through,
   * set with the in-flight mark; null: the app's PROCESSOR. Its lookups and its refund go there too.
   */
  @Column({ name: 'processor_account_id', type: 'uuid', nullable: true }) processorAccountId: string | null;
  /**
   * The latest time a request was sent again under its key after the first (a rerun's charge, a
   * lookup's replay); null: only the first, at prepared_at. The reconciliation's "not found" counts from it.
   */
  @Column({ name: 'last_sent_at', type: 'timestamptz', nullable: true }) lastSentAt: Date | null;
  @Column({ name: 'processed_at', type: 'timestamptz', nullable: true }) processedAt: Date | null;
  /** Next reconciliation lookup of an unknown attempt (or of an error watched for a late capture). */
  @Column({ name: 'lookup_after', type: 'timestamptz', nullable: true }) lookupAfter: Date | null;
  /** When the reconciliation raised its alert for this attempt (once). */
  @Column({ name: 'alerted_at', type: 'timestamptz', nullable: true }) alertedAt: Date | null;
  /** Why this attempt was planned where it is (copied from the transaction's next_attempt_plan). */
  @Column({ name: 'plan', type: 'jsonb', nullable: true }) plan: Record<string, unknown> | null;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' }) updatedAt: Date;
}
