import { open, seal, type DataKey } from '@retain/domain';
import type { DataSource, EntityManager } from 'typeorm';
import { CardKeysRepository } from './card-keys.repository';

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

/** The key of ProcessorAccountsRepository.currentIds' map. */
export const accountKey = (merchantId: string, divisionNumber: string | null): string =>
  `${merchantId}|${divisionNumber ?? ''}`;

/**
 * Merchants' processor accounts (decisions §13). Configs are sealed with the card data keys; the
 * clear config only leaves this class toward an adapter, never toward a log or a job payload.
 */
export class ProcessorAccountsRepository {
  constructor(
    private readonly db: DataSource | EntityManager,
    private readonly keys: readonly DataKey[],
  ) {}

  /**
   * Sets the account of a merchant's division ('' = the default account): the current one, if any,
   * is retired and a new version inserted (migration ProcessorAccountVersions: attempts charged
   * through the old one are still looked up and refunded there).
   */
  async set(
    merchantId: string,
    divisionNumber: string,
    processor: StoredProcessorAccount['processor'],
    config: Record<string, unknown>,
  ): Promise<StoredProcessorAccount> {
    const sealed = seal(this.keys, JSON.stringify(config), AAD);
    const [row]: Row[] = await this.db.transaction(async (m) => {
      await m.query(
        `UPDATE processor_accounts SET retired_at = clock_timestamp()
          WHERE merchant_id = $1 AND division_number = $2 AND retired_at IS NULL`,
        [merchantId, divisionNumber],
      );
      return m.query(
        `INSERT INTO processor_accounts (merchant_id, division_number, processor, raw_card_data, config_enc, config_key_id)
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING *`,
        [merchantId, divisionNumber, processor, config.raw_card_data === true, sealed.value, sealed.keyId],
      );
    });
    return this.opened(row!);
  }

  /** The merchant's current accounts. */
  async list(merchantId: string): Promise<StoredProcessorAccount[]> {
    const rows: Row[] = await this.db.query(
      `SELECT * FROM processor_accounts WHERE merchant_id = $1 AND retired_at IS NULL ORDER BY division_number`,
      [merchantId],
    );
    return rows.map((r) => this.opened(r));
  }

  /**
   * Removes one account from use (retired: what it charged is still looked up and refunded
   * through it); true when there was one.
   */
  async remove(merchantId: string, divisionNumber: string): Promise<boolean> {
    const [, count]: [unknown, number] = await this.db.query(
      `UPDATE processor_accounts SET retired_at = clock_timestamp()
        WHERE merchant_id = $1 AND division_number = $2 AND retired_at IS NULL`,
      [merchantId, divisionNumber],
    );
    return count > 0;
  }

  /**
   * The current account of the division, else the merchant's current default account, else null
   * (decisions §13).
   */
  async forDivision(merchantId: string, divisionNumber: string | null): Promise<StoredProcessorAccount | null> {
    const rows: Row[] = await this.db.query(
      `SELECT * FROM processor_accounts WHERE merchant_id = $1 AND division_number IN ($2, '') AND retired_at IS NULL
       ORDER BY division_number = '' LIMIT 1`,
      [merchantId, divisionNumber ?? ''],
    );
    return rows[0] ? this.opened(rows[0]) : null;
  }

  /**
   * The current account new charges go through, per merchant and division (the division's, else
   * the default; absent: the app's processor), keyed by `accountKey`. One statement, on the caller's
   * connection (the attempts' prepare reads it in its transaction and records it with the in-flight mark).
   */
  static async currentIds(
    m: Pick<EntityManager, 'query'>,
    keys: readonly { merchantId: string; divisionNumber: string | null }[],
  ): Promise<Map<string, string>> {
    const found = new Map<string, string>();
    if (keys.length === 0) return found;
    const rows: { merchant_id: string; division: string; id: string }[] = await m.query(
      `SELECT DISTINCT ON (k.merchant_id, k.division) k.merchant_id, k.division, p.id
         FROM unnest($1::uuid[], $2::text[]) AS k(merchant_id, division)
         JOIN processor_accounts p ON p.merchant_id = k.merchant_id AND p.division_number IN (k.division, '')
                                  AND p.retired_at IS NULL
        ORDER BY k.merchant_id, k.division, p.division_number = ''`,
      [keys.map((k) => k.merchantId), keys.map((k) => k.divisionNumber ?? '')],
    );
    for (const r of rows) found.set(accountKey(r.merchant_id, r.division), r.id);
    return found;
  }

  /**
   * The ids of every version (current or retired: what they charged may still be notified) of every
   * merchant's accounts of `processor`, current ones first, newest first. A version's config never
   * changes (set inserts a new one; reseal keeps the clear config), so a caller may keep what it
   * opened by id (byIds) and open only the ids it has not seen.
   */
  async idsOf(processor: StoredProcessorAccount['processor']): Promise<string[]> {
    const rows: { id: string }[] = await this.db.query(
      `SELECT id FROM processor_accounts WHERE processor = $1 ORDER BY retired_at IS NOT NULL, updated_at DESC, id`,
      [processor],
    );
    return rows.map((r) => r.id);
  }

  /**
   * Account versions by id, opened (ids that name none are left out). A config that cannot be opened
   * (sealed under a key no longer configured) is left out too, reported to `unreadable` (never its
   * contents): one such row must not stop the others being read.
   */
  async byIds(
    ids: readonly string[],
    unreadable: (id: string, err: Error) => void = () => undefined,
  ): Promise<StoredProcessorAccount[]> {
    if (ids.length === 0) return [];
    const rows: Row[] = await this.db.query(`SELECT * FROM processor_accounts WHERE id = ANY($1::uuid[])`, [ids]);
    return rows.flatMap((r) => {
      try {
        return [this.opened(r)];
      } catch (err) {
        unreadable(r.id, err as Error);
        return [];
      }
    });
  }

  /** One account version by id, current or retired (what an attempt was charged through). */
  async byId(id: string): Promise<StoredProcessorAccount | null> {
    const rows: Row[] = await this.db.query(`SELECT * FROM processor_accounts WHERE id = $1`, [id]);
    return rows[0] ? this.opened(rows[0]) : null;
  }

  /**
   * Re-seals every config (retired versions too) under the current (first) key, after a key rotation;
   * returns how many were. Batched, compare-and-set, never waits for a locked row: CardKeysRepository
   * (the operator's `card-keys reseal` re-seals these with every other sealed value).
   */
  async reseal(): Promise<number> {
    const counts = await new CardKeysRepository(this.db, this.keys).reseal({ kinds: ['processor_accounts'] });
    return counts.processor_accounts.resealed;
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
