import { open, parseSealedText, seal, sealText, type DataKey, type Sealed } from '@retain/domain';
import type { DataSource } from 'typeorm';

type Sql = Pick<DataSource, 'query'>;

/**
 * Every value sealed with the card data keys (CARD_DATA_KEY), by kind: where it is stored, how its
 * key id is kept, and the AAD it was sealed with (libs/domain card-vault's callers). A kind whose
 * rows are crypto-shredded by the retention (`card_erased_at`) names that column: an erased row is
 * never read nor written.
 */
interface SealedKind {
  table: string;
  /** The sealed value's column. */
  value: string;
  /** Its key id column; null for a one-column sealText value (`sealed:<key id>:…`, or clear from before sealing). */
  keyId: string | null;
  aad: string;
  /** Set when the row's card data was erased (never taken). */
  erasedAt?: string;
}

export const SEALED_KINDS = {
  /** A clear (or JWE-decrypted) card number: the intake, the review, the account updater. */
  transaction_cards: {
    table: 'transactions',
    value: 'card_enc',
    keyId: 'card_key_id',
    aad: 'card',
    erasedAt: 'card_erased_at',
  },
  /** A network token's cryptogram sent with the transaction (the intake's sealText). */
  transaction_cryptograms: {
    table: 'transactions',
    value: 'cryptogram',
    keyId: null,
    aad: 'cryptogram',
    erasedAt: 'card_erased_at',
  },
  /** A customer's stored card number (decisions §15). */
  payment_method_cards: {
    table: 'payment_methods',
    value: 'card_enc',
    keyId: 'card_key_id',
    aad: 'card',
    erasedAt: 'card_erased_at',
  },
  /** A customer's stored network token cryptogram. */
  payment_method_cryptograms: {
    table: 'payment_methods',
    value: 'cryptogram_enc',
    keyId: 'cryptogram_key_id',
    aad: 'cryptogram',
    erasedAt: 'card_erased_at',
  },
  /** Merchants' webhook signing secrets. */
  webhook_secrets: {
    table: 'merchants',
    value: 'webhook_secret_enc',
    keyId: 'webhook_secret_key_id',
    aad: 'webhook-secret',
  },
  /** Processor account configs (API keys), every version, retired ones too. */
  processor_accounts: {
    table: 'processor_accounts',
    value: 'config_enc',
    keyId: 'config_key_id',
    aad: 'processor-account',
  },
} as const satisfies Record<string, SealedKind>;

export type SealedKindName = keyof typeof SEALED_KINDS;
export const SEALED_KIND_NAMES = Object.keys(SEALED_KINDS) as SealedKindName[];

/** The key id shown for a sealText column still holding a clear value (stored before it was sealed). */
export const CLEAR_KEY_ID = '(clear)';

/** Per kind: how many values each key id seals (CLEAR_KEY_ID: clear cryptograms of old rows). */
export type SealedCounts = Record<SealedKindName, Record<string, number>>;

export interface ResealCounts {
  /** Values now sealed under the current key. */
  resealed: number;
  /**
   * Values not re-sealed: the row was locked by the hot path through every retry, or its value
   * changed between the read and the write (still under an old key: the next run takes it).
   */
  busy: number;
  /** Values no configured key opens (key id named; never their contents): left as they are. */
  unreadable: number;
}

export interface ResealOptions {
  /** Rows read and written per statement (each write its own short transaction). */
  batch?: number;
  /** Only these kinds (default: all). */
  kinds?: readonly SealedKindName[];
  /** Waits (ms) before each retry of the rows skipped as busy. */
  retryDelaysMs?: readonly number[];
  /** Test hook: called between a batch's read and its write. */
  beforeWrite?: (kind: SealedKindName, ids: string[]) => Promise<void>;
}

interface Candidate {
  id: string;
  value: string;
  key_id: string | null;
}

const FIRST_ID = '00000000-0000-0000-0000-000000000000';

/** The key id of a kind's value (null: a clear sealText value). */
const keyIdExpr = (k: SealedKind, alias = ''): string =>
  k.keyId
    ? `${alias}${k.keyId}`
    : `CASE WHEN ${alias}${k.value} LIKE 'sealed:%' THEN split_part(${alias}${k.value}, ':', 2) END`;

/** A value the kind holds, not erased. */
const heldExpr = (k: SealedKind, alias = ''): string =>
  `${alias}${k.value} IS NOT NULL${k.erasedAt ? ` AND ${alias}${k.erasedAt} IS NULL` : ''}`;

/**
 * Re-seals every value sealed with the card data keys under the current (first) key, after a key was
 * prepended to CARD_DATA_KEY, so that an old key can be dropped; and counts what each key id still
 * seals. Safe while the apps run:
 * - each kind is walked by primary key, `batch` rows a statement: a plain read (no lock), the values
 *   opened and sealed again in memory, then one UPDATE of the batch that takes only rows it can lock
 *   at once (FOR UPDATE SKIP LOCKED: it never waits for an attempt, the review or the retention) and
 *   writes a row only while it still holds the very value read (compare and set): a value the hot path
 *   rewrote in between, or the retention erased, is left as it is now. Rows skipped so are retried
 *   after the walk (retryDelaysMs), then reported busy;
 * - a value already under the current key is never read (idempotent; an interrupted run is resumed
 *   by running it again), and an erased one (card_erased_at) never taken.
 * Nothing opened leaves this class: counts and key ids only.
 */
export class CardKeysRepository {
  constructor(
    private readonly db: Sql,
    private readonly keys: readonly DataKey[],
  ) {}

  /** How many values each key id seals, per kind. */
  async status(): Promise<SealedCounts> {
    const out = {} as SealedCounts;
    for (const name of SEALED_KIND_NAMES) {
      const k: SealedKind = SEALED_KINDS[name];
      const rows: { key_id: string | null; n: string }[] = await this.db.query(
        `SELECT ${keyIdExpr(k)} AS key_id, count(*) AS n FROM ${k.table} WHERE ${heldExpr(k)} GROUP BY 1 ORDER BY 1`,
      );
      out[name] = Object.fromEntries(rows.map((r) => [r.key_id ?? CLEAR_KEY_ID, Number(r.n)]));
    }
    return out;
  }

  /**
   * Card fingerprints still derived from a data key (key id `legacy`: from before CARD_FINGERPRINT_KEY),
   * per table: dropping that data key loses no row, but starts those cards' network-limit history anew.
   */
  async legacyFingerprints(): Promise<{ transactions: number; payment_methods: number }> {
    const [row]: { transactions: string; payment_methods: string }[] = await this.db.query(
      `SELECT (SELECT count(*) FROM transactions WHERE card_hmac_key_id = 'legacy') AS transactions,
              (SELECT count(*) FROM payment_methods WHERE card_hmac_key_id = 'legacy') AS payment_methods`,
    );
    return { transactions: Number(row!.transactions), payment_methods: Number(row!.payment_methods) };
  }

  /** Re-seals, kind by kind, every value not under the current key. */
  async reseal(options: ResealOptions = {}): Promise<Record<SealedKindName, ResealCounts>> {
    const out = {} as Record<SealedKindName, ResealCounts>;
    for (const name of options.kinds ?? SEALED_KIND_NAMES) out[name] = await this.resealKind(name, options);
    return out;
  }

  private get current(): string {
    const id = this.keys[0]?.id;
    if (!id) throw new Error('no data key configured');
    return id;
  }

  private async resealKind(name: SealedKindName, options: ResealOptions): Promise<ResealCounts> {
    const k: SealedKind = SEALED_KINDS[name];
    const batch = options.batch ?? 500;
    const counts: ResealCounts = { resealed: 0, busy: 0, unreadable: 0 };
    let skipped: string[] = [];
    const notCurrent = `${heldExpr(k)} AND ${keyIdExpr(k)} IS DISTINCT FROM $2`;
    for (let after = FIRST_ID; ;) {
      const rows = await this.candidates(k, `id > $1 AND ${notCurrent} ORDER BY id LIMIT $3`, [
        after,
        this.current,
        batch,
      ]);
      if (rows.length === 0) break;
      skipped.push(...(await this.write(name, k, rows, counts, options)));
      after = rows[rows.length - 1]!.id;
      if (rows.length < batch) break;
    }
    // Rows busy or changed during the walk: read again (those now current or erased are gone) and retried.
    for (const delay of options.retryDelaysMs ?? [250, 1000, 2000]) {
      if (skipped.length === 0) break;
      await new Promise((r) => setTimeout(r, delay));
      const again = skipped;
      skipped = [];
      for (let i = 0; i < again.length; i += batch) {
        const rows = await this.candidates(k, `id = ANY($1::uuid[]) AND ${notCurrent} ORDER BY id`, [
          again.slice(i, i + batch),
          this.current,
        ]);
        skipped.push(...(await this.write(name, k, rows, counts, options)));
      }
    }
    counts.busy = skipped.length;
    return counts;
  }

  /** A kind's rows matching `where` (no lock): id, sealed value and its key id (null: a clear sealText value). */
  private candidates(k: SealedKind, where: string, params: unknown[]): Promise<Candidate[]> {
    return this.db.query(
      `SELECT id, ${k.value} AS value, ${keyIdExpr(k)} AS key_id FROM ${k.table} WHERE ${where}`,
      params,
    );
  }

  /** Seals the rows' values again and writes those still as read and not locked; returns the ids skipped. */
  private async write(
    name: SealedKindName,
    k: SealedKind,
    rows: Candidate[],
    counts: ResealCounts,
    options: ResealOptions,
  ): Promise<string[]> {
    const ids: string[] = [];
    const olds: string[] = [];
    const values: string[] = [];
    const keyIds: string[] = [];
    for (const r of rows) {
      let plain: string;
      try {
        plain = this.opened(k, r);
      } catch {
        // A key no longer configured (or a damaged value): left under its key id, counted.
        counts.unreadable += 1;
        continue;
      }
      const sealed = k.keyId ? seal(this.keys, plain, k.aad) : null;
      ids.push(r.id);
      olds.push(r.value);
      values.push(sealed ? sealed.value : sealText(this.keys, plain, k.aad));
      keyIds.push(sealed ? sealed.keyId : this.current);
    }
    if (ids.length === 0) return [];
    await options.beforeWrite?.(name, ids);
    // TypeORM answers an UPDATE ... RETURNING on Postgres with [rows, affected count].
    const [written]: [{ id: string }[], number] = await this.db.query(
      `UPDATE ${k.table} t SET ${k.value} = v.value${k.keyId ? `, ${k.keyId} = v.key_id` : ''}
         FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[]) AS v(id, old, value, key_id)
        WHERE t.id = v.id AND t.${k.value} = v.old${k.erasedAt ? ` AND t.${k.erasedAt} IS NULL` : ''}
          AND t.id IN (SELECT id FROM ${k.table} WHERE id = ANY($1::uuid[]) FOR UPDATE SKIP LOCKED)
        RETURNING t.id`,
      [ids, olds, values, keyIds],
    );
    counts.resealed += written.length;
    const done = new Set(written.map((w) => w.id));
    return ids.filter((id) => !done.has(id));
  }

  private opened(k: SealedKind, r: Candidate): string {
    if (k.keyId) return open(this.keys, { keyId: r.key_id ?? '', value: r.value }, k.aad);
    const sealed: Sealed | null = parseSealedText(r.value);
    // A clear value from before sealing: sealed now.
    return sealed ? open(this.keys, sealed, k.aad) : r.value;
  }
}
