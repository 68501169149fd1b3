import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn, UpdateDateColumn } from 'typeorm';

@Entity('merchants')
export class MerchantEntity {
  @PrimaryGeneratedColumn('uuid') id: string;
  @Column({ name: 'merchant_vid', type: 'varchar', length: 40 }) merchantVid: string;
  @Column({ type: 'varchar', length: 128 }) login: string;
  @Column({ name: 'webhook_url', type: 'text', nullable: true }) webhookUrl: string | null;
  /** The signing secret sealed with the card-data key (it must be readable to sign). */
  @Column({ name: 'webhook_secret_enc', type: 'text', nullable: true }) webhookSecretEnc: string | null;
  @Column({ name: 'webhook_secret_key_id', type: 'varchar', length: 32, nullable: true })
  webhookSecretKeyId: string | null;
  /**
   * The merchant's public key (JWK) for the account updater: updated card numbers are offered back
   * only as a JWE encrypted to it. Registering it enables the updater (service-spec: "Enabling it
   * needs a public encryption key supplied to the service operator").
   */
  @Column({ name: 'updater_public_key', type: 'jsonb', nullable: true }) updaterPublicKey: {
    [k: string]: string;
  } | null;
  /** JWE key management algorithm for that key: RSA-OAEP-256 or ECDH-ES. */
  @Column({ name: 'updater_key_alg', type: 'varchar', length: 32, nullable: true }) updaterKeyAlg: string | null;
  @Column({ name: 'disabled_at', type: 'timestamptz', nullable: true }) disabledAt: Date | null;
  /** Forced deposit on (off by default): see ForcedDeposit migration and the README. */
  @Column({ name: 'forced_deposit', type: 'boolean', default: false }) forcedDeposit: boolean;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' }) updatedAt: Date;
}

@Entity('merchant_api_keys')
export class MerchantApiKeyEntity {
  @PrimaryGeneratedColumn('uuid') id: string;
  @Column({ name: 'merchant_id', type: 'uuid' }) merchantId: string;
  /** SHA-256 of the key: keys are 240-bit random, so a fast hash is safe and lookups stay O(1). */
  @Column({ name: 'key_hash', type: 'char', length: 64 }) keyHash: string;
  @Column({ name: 'key_hint', type: 'varchar', length: 16 }) keyHint: string;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
  @Column({ name: 'revoked_at', type: 'timestamptz', nullable: true }) revokedAt: Date | null;
}
