import { createHash } from 'node:crypto';
import { newApiKey, newMerchantVid, newWebhookSecret, open, seal, type DataKey } from '@retain/domain';
import type { DataSource, EntityManager } from 'typeorm';
import { MerchantApiKeyEntity, MerchantEntity } from '../entities';

export const hashApiKey = (key: string): string => createHash('sha256').update(key).digest('hex');

export interface MerchantCredentials {
  merchant_vid: string;
  login: string;
  api_key?: string;
  webhook_secret?: string;
  webhook_url?: string | null;
  disabled?: boolean;
}

/** Merchants and their keys. The API key is returned once at creation or rotation, never stored. */
export class MerchantsRepository {
  constructor(
    private readonly db: DataSource,
    private readonly keys: readonly DataKey[],
  ) {}

  /** The merchant owning an API key, if the key is live. */
  async findByApiKey(apiKey: string): Promise<MerchantEntity | null> {
    const rows: MerchantEntity[] = await this.db
      .getRepository(MerchantEntity)
      .createQueryBuilder('m')
      .innerJoin(MerchantApiKeyEntity, 'k', 'k.merchant_id = m.id AND k.revoked_at IS NULL')
      .where('k.key_hash = :h', { h: hashApiKey(apiKey) })
      .getMany();
    return rows[0] ?? null;
  }

  findByLogin(login: string): Promise<MerchantEntity | null> {
    return this.db.getRepository(MerchantEntity).findOne({ where: { login } });
  }

  findById(id: string): Promise<MerchantEntity | null> {
    return this.db.getRepository(MerchantEntity).findOne({ where: { id } });
  }

  /** The webhook signing secret in clear, for the dispatcher only. */
  webhookSecret(m: MerchantEntity): string | null {
    if (!m.webhookSecretEnc || !m.webhookSecretKeyId) return null;
    return open(this.keys, { keyId: m.webhookSecretKeyId, value: m.webhookSecretEnc }, 'webhook-secret');
  }

  async create(login: string, webhookUrl: string | null): Promise<MerchantCredentials> {
    const apiKey = newApiKey();
    const secret = newWebhookSecret();
    const sealed = seal(this.keys, secret, 'webhook-secret');
    return this.db.transaction(async (m) => {
      const merchant = await m.getRepository(MerchantEntity).save(
        m.getRepository(MerchantEntity).create({
          merchantVid: newMerchantVid(),
          login,
          webhookUrl,
          webhookSecretEnc: sealed.value,
          webhookSecretKeyId: sealed.keyId,
          disabledAt: null,
        }),
      );
      await m.getRepository(MerchantApiKeyEntity).insert({
        merchantId: merchant.id,
        keyHash: hashApiKey(apiKey),
        keyHint: apiKey.slice(0, 8),
        revokedAt: null,
      });
      return {
        merchant_vid: merchant.merchantVid,
        login,
        api_key: apiKey,
        webhook_secret: secret,
      };
    });
  }

  /**
   * Sets the webhook URL (null removes it, undefined keeps it); with rotateSecret a new signing secret
   * is made and returned once. Returns the URL in force.
   */
  async setWebhook(login: string, url: string | null | undefined, rotateSecret = false): Promise<MerchantCredentials> {
    const merchant = await this.require(login);
    const patch: Partial<MerchantEntity> = url === undefined ? {} : { webhookUrl: url };
    let secret: string | undefined;
    if (rotateSecret) {
      secret = newWebhookSecret();
      const sealed = seal(this.keys, secret, 'webhook-secret');
      patch.webhookSecretEnc = sealed.value;
      patch.webhookSecretKeyId = sealed.keyId;
    }
    if (Object.keys(patch).length > 0) await this.db.getRepository(MerchantEntity).update({ id: merchant.id }, patch);
    return {
      merchant_vid: merchant.merchantVid,
      login,
      webhook_url: url === undefined ? merchant.webhookUrl : url,
      ...(secret ? { webhook_secret: secret } : {}),
    };
  }

  /** A new webhook signing secret (the URL is kept); returned once, stored only sealed. */
  async rotateWebhookSecret(login: string): Promise<MerchantCredentials> {
    const merchant = await this.require(login);
    const secret = newWebhookSecret();
    const sealed = seal(this.keys, secret, 'webhook-secret');
    await this.db
      .getRepository(MerchantEntity)
      .update({ id: merchant.id }, { webhookSecretEnc: sealed.value, webhookSecretKeyId: sealed.keyId });
    return { merchant_vid: merchant.merchantVid, login, webhook_url: merchant.webhookUrl, webhook_secret: secret };
  }

  /** Issues a new key; the old ones stop working unless keepOld (for a zero-downtime switch). */
  async rotateKey(login: string, keepOld = false): Promise<MerchantCredentials> {
    const merchant = await this.require(login);
    const apiKey = newApiKey();
    await this.db.transaction(async (m) => {
      if (!keepOld) {
        await m.query(`UPDATE merchant_api_keys SET revoked_at = now() WHERE merchant_id = $1 AND revoked_at IS NULL`, [
          merchant.id,
        ]);
      }
      await m.getRepository(MerchantApiKeyEntity).insert({
        merchantId: merchant.id,
        keyHash: hashApiKey(apiKey),
        keyHint: apiKey.slice(0, 8),
        revokedAt: null,
      });
      // A rotation is a credential change: portal sessions opened with an older key end with it
      // (decisions §14), also under keepOld, where only machine clients keep the old key a while.
      await m.query(`DELETE FROM portal_sessions WHERE merchant_id = $1`, [merchant.id]);
    });
    return { merchant_vid: merchant.merchantVid, login, api_key: apiKey };
  }

  async setDisabled(login: string, disabled: boolean): Promise<MerchantCredentials> {
    const merchant = await this.require(login);
    await this.db.transaction(async (m) => {
      await m.getRepository(MerchantEntity).update({ id: merchant.id }, { disabledAt: disabled ? new Date() : null });
      // A disabled merchant's sessions answer 403 RET403 like its key; enabling it again ends them, so
      // no session opened before the disabling comes back to life.
      if (!disabled) await m.query(`DELETE FROM portal_sessions WHERE merchant_id = $1`, [merchant.id]);
    });
    return { merchant_vid: merchant.merchantVid, login, disabled };
  }

  /** Whether the merchant turned forced deposit on (read in the caller's database transaction). */
  static async forcedDepositOn(m: Pick<EntityManager, 'query'>, merchantId: string): Promise<boolean> {
    const [row]: { forced_deposit: boolean }[] = await m.query(`SELECT forced_deposit FROM merchants WHERE id = $1`, [
      merchantId,
    ]);
    return row?.forced_deposit === true;
  }

  /** Turns forced deposit on or off for the merchant (service-spec `forced_deposit`; off by default). */
  async setForcedDeposit(
    login: string,
    on: boolean,
  ): Promise<{ merchant_vid: string; login: string; forced_deposit: boolean }> {
    const merchant = await this.require(login);
    await this.db.getRepository(MerchantEntity).update({ id: merchant.id }, { forcedDeposit: on });
    return { merchant_vid: merchant.merchantVid, login, forced_deposit: on };
  }

  private async require(login: string): Promise<MerchantEntity> {
    const m = await this.findByLogin(login);
    if (!m) throw new Error(`no merchant with login ${login}`);
    return m;
  }
}
