import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn, UpdateDateColumn } from 'typeorm';

export interface StoredAccount {
  id: string;
  vid: string;
  external_id?: string | null;
  email?: string | null;
}
export interface StoredSubscription {
  id: string;
  starts?: string | null;
  affiliate?: string | null;
  sub_affiliate?: string | null;
}
export interface StoredAddress {
  line1?: string | null;
  line2?: string | null;
  line3?: string | null;
  city?: string | null;
  county?: string | null;
  district?: string | null;
  postal_code?: string | null;
  country?: string | null;
}
export interface StoredPaymentMethod {
  id: string;
  vid: string;
  account_holder?: string | null;
  billing_address?: StoredAddress | null;
  is_tokenized: boolean;
  primary: number;
  /** What responses show as credit_card.account: masked (first 6, last 4), a BIN, or null. */
  card_account_display?: string | null;
}

/** How the card arrived: clear number (now sealed), JWE awaiting review, masked + hash, or token. */
export type CardKind = 'clear' | 'jwe' | 'masked' | 'token';

/** A merchant-submitted failed transaction and its recovery state. */
@Entity('transactions')
export class TransactionEntity {
  @PrimaryGeneratedColumn('uuid') id: string;
  @Column({ type: 'varchar', length: 40 }) vid: string;
  @Column({ name: 'merchant_id', type: 'uuid' }) merchantId: string;
  @Column({ name: 'submission_id', type: 'uuid' }) submissionId: string;
  @Column({ name: 'merchant_txn_id', type: 'varchar', length: 128 }) merchantTxnId: string;
  @Column({ type: 'varchar', length: 32 }) status: string;
  @Column({ name: 'review_status', type: 'varchar', length: 16 }) reviewStatus: string;
  /** bigint comes back from pg as a string; convert with BigInt() before arithmetic. */
  @Column({ name: 'amount_minor', type: 'bigint' }) amountMinor: string;
  @Column({ type: 'char', length: 3 }) currency: string;
  @Column({ name: 'failed_at', type: 'timestamptz' }) failedAt: Date;
  @Column({ name: 'submitted_ts', type: 'timestamptz' }) submittedTs: Date;
  @Column({ name: 'status_changed_at', type: 'timestamptz' }) statusChangedAt: Date;
  @Column({ name: 'division_number', type: 'varchar', length: 128 }) divisionNumber: string;
  @Column({ name: 'auth_code', type: 'varchar', length: 64 }) authCode: string;
  /** decisions §16: Mastercard Merchant Advice Code of the original decline, when submitted. */
  @Column({ name: 'network_advice_code', type: 'varchar', length: 2, nullable: true }) networkAdviceCode: string | null;
  @Column({ name: 'avs_code', type: 'varchar', length: 8, nullable: true }) avsCode: string | null;
  @Column({ name: 'cvn_code', type: 'varchar', length: 8, nullable: true }) cvnCode: string | null;
  @Column({ name: 'auth_code_description', type: 'varchar', length: 16, nullable: true })
  authCodeDescription: string | null;
  @Column({ name: 'payment_network_transaction_id', type: 'varchar', length: 128, nullable: true })
  paymentNetworkTransactionId: string | null;
  @Column({ name: 'previous_billing_count', type: 'int', nullable: true }) previousBillingCount: number | null;
  @Column({ name: 'is_network_token', type: 'smallint', nullable: true }) isNetworkToken: number | null;
  @Column({ type: 'text', nullable: true }) cryptogram: string | null;
  @Column({ name: 'eci_indicator', type: 'varchar', length: 16, nullable: true }) eciIndicator: string | null;
  @Column({ name: 'billing_descriptor', type: 'varchar', length: 255, nullable: true })
  billingDescriptor: string | null;
  @Column({ name: 'processor_transaction_id', type: 'varchar', length: 128, nullable: true })
  processorTransactionId: string | null;
  @Column({ name: 'subscription_id', type: 'varchar', length: 128 }) subscriptionId: string;
  @Column({ name: 'account_id', type: 'varchar', length: 128 }) accountId: string;
  @Column({ type: 'jsonb' }) account: StoredAccount;
  @Column({ type: 'jsonb' }) subscription: StoredSubscription;
  @Column({ name: 'payment_method', type: 'jsonb' }) paymentMethod: StoredPaymentMethod;
  @Column({ type: 'jsonb' }) metadata: Record<string, string>;
  @Column({ name: 'card_kind', type: 'varchar', length: 8 }) cardKind: CardKind;
  /** Compact JWE as received, kept only until the post-submission review decrypts it. */
  @Column({ name: 'card_jwe', type: 'text', nullable: true }) cardJwe: string | null;
  @Column({ name: 'card_enc', type: 'text', nullable: true }) cardEnc: string | null;
  @Column({ name: 'card_key_id', type: 'varchar', length: 32, nullable: true }) cardKeyId: string | null;
  @Column({ name: 'card_hmac', type: 'char', length: 64, nullable: true }) cardHmac: string | null;
  /** Key id of card_hmac (CARD_FINGERPRINT_KEY, or `legacy` for the data-key derivation). */
  @Column({ name: 'card_hmac_key_id', type: 'varchar', length: 32, nullable: true }) cardHmacKeyId: string | null;
  @Column({ name: 'card_bin', type: 'varchar', length: 8, nullable: true }) cardBin: string | null;
  @Column({ name: 'card_last4', type: 'char', length: 4, nullable: true }) cardLast4: string | null;
  @Column({ name: 'card_network', type: 'varchar', length: 16, nullable: true }) cardNetwork: string | null;
  @Column({ name: 'account_hash', type: 'char', length: 40, nullable: true }) accountHash: string | null;
  @Column({ name: 'expiration_date', type: 'char', length: 6, nullable: true }) expirationDate: string | null;
  @Column({ name: 'attempt_count', type: 'int' }) attemptCount: number;
  @Column({ name: 'next_attempt_at', type: 'timestamptz', nullable: true }) nextAttemptAt: Date | null;
  /** Retry policy version planning this transaction (NULL: the UTC heuristics of before versions). */
  @Column({ name: 'policy_version', type: 'varchar', length: 64, nullable: true }) policyVersion: string | null;
  /** The policy experiment and arm this transaction was assigned at intake (issue 11), if any. */
  @Column({ name: 'experiment_id', type: 'varchar', length: 40, nullable: true }) experimentId: string | null;
  @Column({ name: 'experiment_arm', type: 'varchar', length: 64, nullable: true }) experimentArm: string | null;
  /** Why the next attempt was planned where it is (the policy's explanation). */
  @Column({ name: 'next_attempt_plan', type: 'jsonb', nullable: true }) nextAttemptPlan: Record<string, unknown> | null;
  @Column({ name: 'captured_amount_minor', type: 'bigint', nullable: true }) capturedAmountMinor: string | null;
  /**
   * A partial authorization (decisions §15): what the transaction's own capture was approved for, less
   * than asked. Set with that capture; a second capture (refunded at once) adds to capturedAmountMinor only.
   */
  @Column({ name: 'partial_amount_minor', type: 'bigint', nullable: true }) partialAmountMinor: string | null;
  /** Once the recovery ended: excess-reattempt fees its attempts paid, and a naive daily schedule's (USD minor). */
  @Column({ name: 'network_fees_minor', type: 'int', nullable: true }) networkFeesMinor: number | null;
  /** Forced deposit: one last capture without authorization is planned / was made (service-spec). */
  @Column({ name: 'forced_deposit_planned', type: 'boolean', default: false }) forcedDepositPlanned: boolean;
  @Column({ name: 'forced_deposit', type: 'boolean', default: false }) forcedDeposit: boolean;
  /** When the processor reported the capture settled (status Settled). */
  @Column({ name: 'settled_at', type: 'timestamptz', nullable: true }) settledAt: Date | null;
  @Column({ name: 'naive_network_fees_minor', type: 'int', nullable: true }) naiveNetworkFeesMinor: number | null;
  @Column({ name: 'stop_requested_at', type: 'timestamptz', nullable: true }) stopRequestedAt: Date | null;
  /**
   * The account's payment method this transaction charges now (payment_methods row): the submitted
   * one, or another of the account's after a fallback (decisions §15). Its card columns are copied
   * into this row's card columns, which every attempt reads. Null: rows from before the table.
   */
  @Column({ name: 'payment_method_ref', type: 'uuid', nullable: true }) paymentMethodRef: string | null;
  /** The account updater changed the card data of the payment method this transaction shows. */
  @Column({ name: 'account_updated', type: 'boolean', default: false }) accountUpdated: boolean;
  /** The updated card as a compact JWE to the merchant's updater key (extension), else null. */
  @Column({ name: 'account_update_jwe', type: 'text', nullable: true }) accountUpdateJwe: string | null;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' }) updatedAt: Date;
}
