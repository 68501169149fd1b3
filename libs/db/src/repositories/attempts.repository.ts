import type { CardAttempt } from '@retain/domain';
import type { DataSource, EntityManager } from 'typeorm';
import { AttemptEntity, TransactionEntity } from '../entities';

/** Something that runs SQL: the DataSource outside a transaction, an EntityManager inside one. */
type Sql = Pick<EntityManager, 'query'> | Pick<DataSource, 'query'>;

export interface AttemptRunRow {
  vid: string;
  state: string;
  prepared_at: Date | null;
  /** Earlier attempts of the same transaction settled as not charged (looked up before a new charge). */
  errored: { id: string; vid: string }[];
}

export interface ReconcileRow {
  id: string;
  vid: string;
  merchant_id: string;
  state: string;
  prepared_at: Date | null;
  processed_at: Date | null;
  alerted_at: Date | null;
  transaction_status: string;
}

/**
 * The SQL of retry attempts (the retry worker's reads and writes). Reads of a merchant's card data
 * take the merchant id: the card history is per card per merchant (network-rules.md).
 */
export class AttemptsRepository {
  /** The attempt's state and its transaction's settled-as-error attempts, outside any transaction. */
  static async forRun(db: Sql, attemptId: string): Promise<AttemptRunRow | null> {
    const [row]: AttemptRunRow[] = await db.query(
      `SELECT p.vid, p.state, p.prepared_at,
              COALESCE((SELECT json_agg(json_build_object('id', e.id, 'vid', e.vid) ORDER BY e.retry_number)
                          FROM attempts e WHERE e.transaction_id = p.transaction_id AND e.state = 'error'),
                       '[]'::json) AS errored
         FROM attempts p WHERE p.id = $1`,
      [attemptId],
    );
    return row ?? null;
  }

  /** Locks the attempt and its transaction (one statement: both rows FOR UPDATE). */
  static async lock(
    m: EntityManager,
    attemptId: string,
  ): Promise<{ attempt: AttemptEntity; txn: TransactionEntity } | null> {
    const attempt: (AttemptEntity & { lockedTxn?: TransactionEntity }) | null = await m
      .getRepository(AttemptEntity)
      .createQueryBuilder('a')
      .innerJoinAndMapOne('a.lockedTxn', TransactionEntity, 't', 't.id = a.transaction_id')
      .where('a.id = :attemptId', { attemptId })
      .setLock('pessimistic_write')
      .getOne();
    const txn = attempt?.lockedTxn;
    if (!attempt || !txn) return null;
    delete attempt.lockedTxn;
    return { attempt, txn };
  }

  /** One limit check at a time per card and merchant (held until the caller's transaction ends). */
  static async lockCard(m: EntityManager, merchantId: string, cardHmac: string): Promise<void> {
    await m.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [`retain:card:${merchantId}:${cardHmac}`]);
  }

  /**
   * The card's history for the network limits (network-rules.config.ts): attempts of THIS merchant
   * on the card that went to the processor, recorded, in flight or unknown, in the last 31 days;
   * plus every blocking decline however old (card blocks do not lapse; they lift when the data changes).
   */
  static async cardHistory(
    m: Sql,
    merchantId: string,
    cardHmac: string,
    excludeId: string | null,
  ): Promise<CardAttempt[]> {
    const rows: {
      at: Date;
      amount_minor: string;
      state: string;
      response_code: string | null;
      merchant_advice_code: string | null;
      card_data_version: string | null;
    }[] = await m.query(
      `SELECT COALESCE(processed_at, prepared_at) AS at, amount_minor, state, response_code, merchant_advice_code,
              card_data_version
         FROM attempts
        WHERE merchant_id = $1 AND card_hmac = $2 AND id IS DISTINCT FROM $3
          AND COALESCE(processed_at, prepared_at) IS NOT NULL
          AND (COALESCE(processed_at, prepared_at) > now() - interval '31 days'
               OR (state = 'declined' AND auth_code_description = 'Hard Failure'))`,
      [merchantId, cardHmac, excludeId],
    );
    return rows.map((r) => ({
      at: new Date(r.at),
      amountMinor: BigInt(r.amount_minor),
      // An unknown attempt counts like one in flight: it may have reached the issuer.
      outcome:
        r.state === 'captured'
          ? 'approved'
          : r.state === 'declined'
            ? 'declined'
            : r.state === 'pending' || r.state === 'unknown'
              ? 'pending'
              : 'error',
      responseCode: r.response_code,
      merchantAdviceCode: r.merchant_advice_code,
      cardDataVersion: r.card_data_version,
    }));
  }

  /** The attempt goes to the processor: from now on it may charge, and counts in the card's history. */
  static async markPrepared(m: EntityManager, attemptId: string, at: Date, dataVersion: string | null): Promise<void> {
    await m.query(`UPDATE attempts SET prepared_at = $2, card_data_version = $3, updated_at = now() WHERE id = $1`, [
      attemptId,
      at,
      dataVersion,
    ]);
  }

  /**
   * Deletes an attempt that never went to the processor (frees its retry number). The statement
   * itself refuses a prepared attempt: it may have charged, so it is resolved, never dropped.
   */
  static async dropNeverPrepared(m: EntityManager, attemptId: string, transactionId: string): Promise<void> {
    const [, deleted]: [unknown[], number] = await m.query(
      `DELETE FROM attempts WHERE id = $1 AND state = 'pending' AND prepared_at IS NULL`,
      [attemptId],
    );
    if (deleted !== 1) throw new Error('refused to drop an attempt that may have reached the processor');
    await m.query(`UPDATE transactions SET attempt_count = attempt_count - 1 WHERE id = $1`, [transactionId]);
  }

  /** The transaction waits for its next attempt until `at` (a network limit deferred it). */
  static async deferTransaction(m: EntityManager, transactionId: string, at: Date): Promise<void> {
    await m.query(`UPDATE transactions SET next_attempt_at = $2, updated_at = now() WHERE id = $1`, [
      transactionId,
      at,
    ]);
  }

  static async setLookupAfter(m: Sql, attemptId: string, at: Date | null): Promise<void> {
    await m.query(`UPDATE attempts SET lookup_after = $2 WHERE id = $1`, [attemptId, at]);
  }

  /** Marks the alert raised; true only for the first caller (the alert is logged once per attempt). */
  static async markAlerted(m: Sql, attemptId: string): Promise<boolean> {
    const rows: unknown[] = await m.query(
      `UPDATE attempts SET alerted_at = now() WHERE id = $1 AND alerted_at IS NULL RETURNING id`,
      [attemptId],
    );
    return rows.length > 0;
  }

  /**
   * Attempts the reconciliation looks up now: every unknown one whose next lookup is due, and
   * errors watched for a late capture (their transaction ended Cancelled or Stopped).
   */
  static async dueForLookup(db: Sql, limit: number, lateWatchMs: number): Promise<ReconcileRow[]> {
    return db.query(
      `(SELECT a.id, a.vid, a.merchant_id, a.state, a.prepared_at, a.processed_at, a.alerted_at,
               t.status AS transaction_status
          FROM attempts a JOIN transactions t ON t.id = a.transaction_id
         WHERE a.state = 'unknown' AND (a.lookup_after IS NULL OR a.lookup_after <= now())
         ORDER BY a.lookup_after NULLS FIRST LIMIT $1)
       UNION ALL
       (SELECT a.id, a.vid, a.merchant_id, a.state, a.prepared_at, a.processed_at, a.alerted_at,
               t.status AS transaction_status
          FROM attempts a JOIN transactions t ON t.id = a.transaction_id
         WHERE a.state = 'error' AND a.processed_at > now() - ($2::double precision * interval '1 millisecond')
           AND (a.lookup_after IS NULL OR a.lookup_after <= now()) AND t.status IN ('Cancelled', 'Stopped')
         ORDER BY a.lookup_after NULLS FIRST LIMIT $1)`,
      [limit, lateWatchMs],
    );
  }

  /** Unknown attempts older than `olderThanMs` (the operator alert's gauge). */
  static async countUnknownOlderThan(db: Sql, olderThanMs: number): Promise<number> {
    const [{ n }]: { n: number }[] = await db.query(
      `SELECT count(*)::int AS n FROM attempts
        WHERE state = 'unknown' AND prepared_at < now() - ($1::double precision * interval '1 millisecond')`,
      [olderThanMs],
    );
    return n;
  }
}
