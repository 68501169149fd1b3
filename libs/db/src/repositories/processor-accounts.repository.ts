import { open, seal, type DataKey } from '@retain/domain';
import type { DataSource, EntityManager } from 'typeorm';

/** A stored account with its config opened (the shape @retain/processor's ProcessorAccount takes). */
export interface StoredProcessorAccount {
  id: string;
  merchantId: string;
  divisionNumber: string;
  processor: 'sandbox' | 'stripe' | 'adyen';
  config: Record<string, unknown>;
  updatedAt: Date;
}

interface Row {
  id: string;
  merchant_id: string;
  division_number: string;
  processor: StoredProcessorAccount['processor'];
  config_enc: string;
  config_key_id: string;
  updated_at: Date;
}

const AAD = 'processor-account';

/**
 * Merchants' processor accounts (decisions §13). Configs are sealed with the card data keys; the
 * clear config only leaves this class toward an adapter, never toward a log or a job payload.
 */
export class ProcessorAccountsRepository {
  constructor(
    private readonly db: DataSource | EntityManager,
    private readonly keys: readonly DataKey[],
  ) {}

  /** Creates or replaces the account of a merchant's division ('' = the default account). */
  async set(
    merchantId: string,
    divisionNumber: string,
    processor: StoredProcessorAccount['processor'],
    config: Record<string, unknown>,
  ): Promise<StoredProcessorAccount> {
    const sealed = seal(this.keys, JSON.stringify(config), AAD);
    const [row]: Row[] = await this.db.query(
      `INSERT INTO processor_accounts (merchant_id, division_number, processor, raw_card_data, config_enc, config_key_id)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (merchant_id, division_number) DO UPDATE SET processor = EXCLUDED.processor,
         raw_card_data = EXCLUDED.raw_card_data, config_enc = EXCLUDED.config_enc,
         config_key_id = EXCLUDED.config_key_id, updated_at = clock_timestamp()
       RETURNING *`,
      [merchantId, divisionNumber, processor, config.raw_card_data === true, sealed.value, sealed.keyId],
    );
    return this.opened(row!);
  }

  async list(merchantId: string): Promise<StoredProcessorAccount[]> {
    const rows: Row[] = await this.db.query(
      `SELECT * FROM processor_accounts WHERE merchant_id = $1 ORDER BY division_number`,
      [merchantId],
    );
    return rows.map((r) => this.opened(r));
  }

  /** Removes one account; true when there was one. */
  async remove(merchantId: string, divisionNumber: string): Promise<boolean> {
    const [, count]: [unknown, number] = await this.db.query(
      `DELETE FROM processor_accounts WHERE merchant_id = $1 AND division_number = $2`,
      [merchantId, divisionNumber],
    );
    return count > 0;
  }

  /** The account of the division, else the merchant's default account, else null (decisions §13). */
  async forDivision(merchantId: string, divisionNumber: string | null): Promise<StoredProcessorAccount | null> {
    const rows: Row[] = await this.db.query(
      `SELECT * FROM processor_accounts WHERE merchant_id = $1 AND division_number IN ($2, '')
       ORDER BY division_number = '' LIMIT 1`,
      [merchantId, divisionNumber ?? ''],
    );
    return rows[0] ? this.opened(rows[0]) : null;
  }

  /** Re-seals every config under the current (first) key, after a key rotation. */
  async reseal(): Promise<number> {
    const current = this.keys[0]?.id;
    const rows: Row[] = await this.db.query(`SELECT * FROM processor_accounts WHERE config_key_id <> $1`, [current]);
    for (const r of rows) {
      const sealed = seal(this.keys, open(this.keys, { keyId: r.config_key_id, value: r.config_enc }, AAD), AAD);
      await this.db.query(`UPDATE processor_accounts SET config_enc = $2, config_key_id = $3 WHERE id = $1`, [
        r.id,
        sealed.value,
        sealed.keyId,
      ]);
    }
    return rows.length;
  }

  private opened(r: Row): StoredProcessorAccount {
    return {
      id: r.id,
      merchantId: r.merchant_id,
      divisionNumber: r.division_number,
      processor: r.processor,
      config: JSON.parse(open(this.keys, { keyId: r.config_key_id, value: r.config_enc }, AAD)) as Record<
        string,
        unknown
      >,
      updatedAt: new Date(r.updated_at),
    };
  }
}
