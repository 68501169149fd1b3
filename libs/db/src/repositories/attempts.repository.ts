import { IN_RETRY_STATUSES, type CardAttempt } from '@retain/domain';
import { In, type DataSource, type EntityManager } from 'typeorm';
import { AttemptEntity, TransactionEntity } from '../entities';

/** Something that runs SQL: the DataSource outside a transaction, an EntityManager inside one. */
type Sql = Pick<EntityManager, 'query'> | Pick<DataSource, 'query'>;

/** A send mark (last_sent_at) as set, and the one before it, as Postgres's text. */
export interface SentMark {
  marked: string;
  previous: string | null;
}

export interface AttemptRunRow {
  vid: string;
  state: string;
  prepared_at: Date | null;
  /** Earlier attempts of the same transaction settled as not charged (looked up before a new charge). */
  errored: { id: string; vid: string; processor_account_id: string | null }[];
}

export interface ReconcileRow {
  id: string;
  vid: string;
  merchant_id: string;
  state: string;
  prepared_at: Date | null;
  last_sent_at: Date | null;
  processed_at: Date | null;
  alerted_at: Date | null;
  transaction_status: string;
}

export interface LockedAttempt {
  attempt: AttemptEntity;
  txn: TransactionEntity;
}

interface CardHistoryRow {
  at: Date;
  amount_minor: string;
  state: string;
  response_code: string | null;
  merchant_advice_code: string | null;
  card_data_version: string | null;
  card_network: string | null;
  /** When the issuer decided: the attempt's charge (its in-flight mark), the original's decline. */
  decided_at: Date | null;
  forced_deposit: boolean;
}

const toCardAttempt = (r: CardHistoryRow): CardAttempt => ({
  at: new Date(r.at),
  amountMinor: BigInt(r.amount_minor),
  ...(r.state === 'original' ? { original: true } : {}),
  // An unknown attempt counts like one in flight: it may have reached the issuer.
  outcome:
    r.state === 'captured'
      ? 'approved'
      : r.state === 'declined' || r.state === 'original'
        ? 'declined'
        : r.state === 'pending' || r.state === 'unknown'
          ? 'pending'
          : 'error',
  responseCode: r.response_code,
  merchantAdviceCode: r.merchant_advice_code,
  cardDataVersion: r.card_data_version,
  network: r.card_network,
  // A forced deposit's capture is no issuer approval (it restarts no Visa count); a decline is
  // classified by the rules of its charge's time, not of its recording's (a lookup's, later).
  ...(r.forced_deposit ? { forcedDeposit: true } : {}),
  ...(r.decided_at ? { decidedAt: new Date(r.decided_at) } : {}),
});

/** Each column of an entity: its alias in a row read by lockMany, and its property. */
type ColumnAliases = readonly (readonly [alias: string, property: string])[];

let lockedColumns: { select: string; attempt: ColumnAliases; txn: ColumnAliases } | undefined;

/** lockMany's select list, from the entities' metadata (so a new column is read too), built once. */
function lockedRowColumns(m: EntityManager): NonNullable<typeof lockedColumns> {
  if (lockedColumns) return lockedColumns;
  const select: string[] = [];
  const of = (target: typeof AttemptEntity | typeof TransactionEntity, table: string): ColumnAliases =>
    m.connection.getMetadata(target).columns.map((c, i) => {
      select.push(`${table}."${c.databaseName}" AS ${table}${i}`);
      return [`${table}${i}`, c.propertyName] as const;
    });
  const attempt = of(AttemptEntity, 'a');
  const txn = of(TransactionEntity, 't');
  return (lockedColumns = { select: select.join(', '), attempt, txn });
}

/** An entity filled from a row's aliased columns. */
function entityOf<E extends object>(entity: E, columns: ColumnAliases, row: Record<string, unknown>): E {
  const target = entity as Record<string, unknown>;
  for (const [alias, property] of columns) target[property] = row[alias];
  return entity;
}

/** The advisory lock of one card at one merchant: one limit check at a time on it. */
export const cardLockKey = (merchantId: string, cardHmac: string): string => `retain:card:${merchantId}:${cardHmac}`;

/**
 * What binds one attempt of `transactionId` in a card's cardHistories entry: the card's attempts
 * but this one, and the original decline of this transaction only. A merchant's original decline
 * binds its own transaction on every payment method with that card; the merchant's other
 * transactions each answer to their own original decline (and to every attempt Retain made).
 */
export const historyOf = (
  history: readonly (CardAttempt & { id: string })[],
  attemptId: string,
  transactionId: string,
): (CardAttempt & { id: string })[] =>
  history.filter((h) => (h.original ? h.id === transactionId : h.id !== attemptId));

/** The key of a card's entry in cardHistories. */
export const cardHistoryKey = (merchantId: string, cardHmac: string): string => `${merchantId}:${cardHmac}`;

/**
 * The SQL of retry attempts (the retry worker's reads and writes). Reads of a merchant's card data
 * take the merchant id: the card history is per card per merchant (network-rules.md).
 */
export class AttemptsRepository {
  /** The attempt's state and its transaction's settled-as-error attempts, outside any transaction. */
  static async forRun(db: Sql, attemptId: string): Promise<AttemptRunRow | null> {
    const [row]: AttemptRunRow[] = await db.query(
      `SELECT p.vid, p.state, p.prepared_at,
              COALESCE((SELECT json_agg(json_build_object('id', e.id, 'vid', e.vid,
                                                          'processor_account_id', e.processor_account_id)
                                        ORDER BY e.retry_number)
                          FROM attempts e WHERE e.transaction_id = p.transaction_id AND e.state = 'error'),
                       '[]'::json) AS errored
         FROM attempts p WHERE p.id = $1`,
      [attemptId],
    );
    return row ?? null;
  }

  /**
   * Whether the transaction may not be charged anew: a stop requested, or its recovery ended (an
   * earlier attempt's late capture). Read now (no lock: right before a processor call).
   */
  static async noNewCharge(db: Sql, transactionId: string): Promise<boolean> {
    const [row]: { stopped: boolean }[] = await db.query(
      `SELECT stop_requested_at IS NOT NULL OR status <> ALL($2::text[]) AS stopped FROM transactions WHERE id = $1`,
      [transactionId, IN_RETRY_STATUSES],
    );
    return row?.stopped ?? false;
  }

  /** Locks the attempt and its transaction (one statement: both rows FOR UPDATE), as lockMany. */
  static async lock(m: EntityManager, attemptId: string): Promise<LockedAttempt | null> {
    const [locked] = await AttemptsRepository.lockMany(m, [attemptId]);
    return locked ?? null;
  }

  /** One limit check at a time per card and merchant (held until the caller's transaction ends). */
  static async lockCard(m: EntityManager, merchantId: string, cardHmac: string): Promise<void> {
    await m.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [cardLockKey(merchantId, cardHmac)]);
  }

  /**
   * lockCard without waiting: false when another limit check holds the card. For a second card
   * taken while the first one's lock is held (the account's other card): never a wait in a cycle.
   */
  static async tryLockCard(m: EntityManager, merchantId: string, cardHmac: string): Promise<boolean> {
    const [row]: { locked: boolean }[] = await m.query(
      `SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS locked`,
      [cardLockKey(merchantId, cardHmac)],
    );
    return row!.locked;
  }

  /**
   * Takes many advisory locks (cardLockKey, accountLockKey) in one statement, in one global order
   * (sorted: every account before every card, like the per-attempt path's account then card), so
   * two batches, or a batch and a single attempt, never wait on each other in a cycle.
   */
  static async lockKeys(m: EntityManager, keys: readonly string[]): Promise<void> {
    const sorted = [...new Set(keys)].sort();
    if (sorted.length === 0) return;
    await m.query(
      `SELECT count(pg_advisory_xact_lock(hashtextextended(u.k, 0)))
         FROM unnest($1::text[]) WITH ORDINALITY AS u(k, n)`,
      [sorted],
    );
  }

  /**
   * Locks many attempts and their transactions (one statement, rows FOR UPDATE in the
   * transactions' lock order: merchant, then merchant_txn_id). Attempts not found are left out.
   * Read in plain SQL and built into entities from TypeORM's column list (lockedRowColumns): the
   * values are pg's own (as TypeORM's), without its row-to-entity mapping of ~90 columns per attempt,
   * which was about a tenth of the retry worker's CPU.
   */
  static async lockMany(m: EntityManager, attemptIds: readonly string[]): Promise<LockedAttempt[]> {
    if (attemptIds.length === 0) return [];
    const { select, attempt, txn } = lockedRowColumns(m);
    const rows: Record<string, unknown>[] = await m.query(
      `SELECT ${select} FROM attempts a JOIN transactions t ON t.id = a.transaction_id
        WHERE a.id = ANY($1::uuid[]) ORDER BY t.merchant_id, t.merchant_txn_id, t.id FOR UPDATE`,
      [[...new Set(attemptIds)]],
    );
    return rows.map((row) => ({
      attempt: entityOf(new AttemptEntity(), attempt, row),
      txn: entityOf(new TransactionEntity(), txn, row),
    }));
  }

  /** Which of these transactions have attempts settled as not charged (state error). */
  static async withErroredAttempts(m: Sql, transactionIds: readonly string[]): Promise<Set<string>> {
    if (transactionIds.length === 0) return new Set();
    const rows: { transaction_id: string }[] = await m.query(
      `SELECT DISTINCT transaction_id FROM attempts WHERE transaction_id = ANY($1::uuid[]) AND state = 'error'`,
      [[...transactionIds]],
    );
    return new Set(rows.map((r) => r.transaction_id));
  }

  /**
   * cardHistory of many cards in one statement, by cardHistoryKey(merchantId, cardHmac); each
   * entry carries its attempt's id (the caller leaves out or updates its own attempts). Original
   * declines of every transaction on the card come with it, their transaction's id as `id`: the
   * caller keeps its own transaction's only (historyOf).
   */
  static async cardHistories(
    m: Sql,
    cards: readonly { merchantId: string; cardHmac: string }[],
  ): Promise<Map<string, (CardAttempt & { id: string })[]>> {
    const unique = new Map(cards.map((c) => [cardHistoryKey(c.merchantId, c.cardHmac), c]));
    const result = new Map<string, (CardAttempt & { id: string })[]>([...unique.keys()].map((k) => [k, []]));
    if (unique.size === 0) return result;
    const rows: (CardHistoryRow & { id: string; merchant_id: string; card_hmac: string })[] = await m.query(
      `SELECT a.id, a.merchant_id, a.card_hmac, COALESCE(a.processed_at, a.prepared_at) AS at, a.amount_minor, a.state,
              a.response_code, a.merchant_advice_code, a.card_data_version, a.card_network,
              LEAST(a.prepared_at, a.processed_at) AS decided_at, a.forced_deposit
         FROM unnest($1::uuid[], $2::char(64)[]) AS c(merchant_id, card_hmac)
         JOIN attempts a ON a.merchant_id = c.merchant_id AND a.card_hmac = c.card_hmac
        WHERE COALESCE(a.processed_at, a.prepared_at) IS NOT NULL
          AND (COALESCE(a.processed_at, a.prepared_at) > now() - interval '31 days'
               OR (a.state = 'declined' AND a.auth_code_description = 'Hard Failure'))
       UNION ALL
       SELECT o.transaction_id, o.merchant_id, o.card_hmac, o.at, o.amount_minor, 'original', o.response_code,
              o.merchant_advice_code, o.card_data_version, NULL, o.at, false
         FROM unnest($1::uuid[], $2::char(64)[]) AS c(merchant_id, card_hmac)
         JOIN original_declines o ON o.merchant_id = c.merchant_id AND o.card_hmac = c.card_hmac`,
      [[...unique.values()].map((c) => c.merchantId), [...unique.values()].map((c) => c.cardHmac)],
    );
    for (const r of rows) {
      result.get(cardHistoryKey(r.merchant_id, r.card_hmac))?.push({ ...toCardAttempt(r), id: r.id });
    }
    return result;
  }

  /**
   * markPrepared and the payment method shown (markAttemptPaymentMethod) of many attempts, one
   * statement. Only never-prepared pending attempts are marked; throws unless all of them were.
   */
  static async markPreparedMany(
    m: EntityManager,
    rows: readonly {
      id: string;
      at: Date;
      dataVersion: string | null;
      paymentMethodRef: string | null;
      paymentMethodView: Record<string, unknown>;
      /** The processor account the charge goes through (null: the app's processor). */
      processorAccountId: string | null;
    }[],
  ): Promise<void> {
    if (rows.length === 0) return;
    const [, updated]: [unknown, number] = await m.query(
      `UPDATE attempts a SET prepared_at = x.at, card_data_version = x.data_version,
              payment_method_ref = x.pm_ref, payment_method_view = x.pm_view, processor_account_id = x.account,
              updated_at = now()
         FROM jsonb_to_recordset($1::jsonb)
              AS x(id uuid, at timestamptz, data_version text, pm_ref uuid, pm_view jsonb, account uuid)
        WHERE a.id = ANY($2::uuid[]) AND a.id = x.id AND a.state = 'pending' AND a.prepared_at IS NULL`,
      [
        JSON.stringify(
          rows.map((r) => ({
            id: r.id,
            at: r.at.toISOString(),
            data_version: r.dataVersion,
            pm_ref: r.paymentMethodRef,
            pm_view: r.paymentMethodView,
            account: r.processorAccountId,
          })),
        ),
        rows.map((r) => r.id),
      ],
    );
    if (updated !== rows.length) throw new Error(`markPreparedMany: ${updated} of ${rows.length} attempts marked`);
  }

  /** Every attempt of these transactions (the network fees' input), by transaction id. */
  static async ofTransactions(
    m: EntityManager,
    transactionIds: readonly string[],
  ): Promise<Map<string, AttemptEntity[]>> {
    const result = new Map<string, AttemptEntity[]>(transactionIds.map((id) => [id, []]));
    if (transactionIds.length === 0) return result;
    const rows = await m
      .getRepository(AttemptEntity)
      .find({ where: { transactionId: In([...transactionIds]) }, order: { retryNumber: 'ASC' } });
    for (const a of rows) result.get(a.transactionId)?.push(a);
    return result;
  }

  /**
   * The card's history for the network limits (network-rules.config.ts): attempts of THIS merchant
   * on the card that went to the processor, recorded, in flight or unknown, in the last 31 days;
   * plus every blocking decline however old (card blocks do not lapse; they lift when the data changes);
   * plus `transactionId`'s own original decline where it binds the card (original_declines,
   * `original`): on whichever of the customer's payment methods carries this card.
   */
  static async cardHistory(
    m: Sql,
    merchantId: string,
    cardHmac: string,
    excludeId: string | null,
    transactionId: string | null,
  ): Promise<CardAttempt[]> {
    const rows: CardHistoryRow[] = await m.query(
      `SELECT COALESCE(processed_at, prepared_at) AS at, amount_minor, state, response_code, merchant_advice_code,
              card_data_version, card_network, LEAST(prepared_at, processed_at) AS decided_at, forced_deposit
         FROM attempts
        WHERE merchant_id = $1 AND card_hmac = $2 AND id IS DISTINCT FROM $3
          AND COALESCE(processed_at, prepared_at) IS NOT NULL
          AND (COALESCE(processed_at, prepared_at) > now() - interval '31 days'
               OR (state = 'declined' AND auth_code_description = 'Hard Failure'))
       UNION ALL
       SELECT at, amount_minor, 'original', response_code, merchant_advice_code, card_data_version, NULL, at, false
         FROM original_declines WHERE merchant_id = $1 AND card_hmac = $2 AND transaction_id = $4`,
      [merchantId, cardHmac, excludeId, transactionId],
    );
    return rows.map(toCardAttempt);
  }

  /**
   * The attempt goes to the processor (through `processorAccountId`, null: the app's processor):
   * from now on it may charge, and counts in the card's history.
   */
  static async markPrepared(
    m: EntityManager,
    attemptId: string,
    at: Date,
    dataVersion: string | null,
    processorAccountId: string | null,
  ): Promise<void> {
    await m.query(
      `UPDATE attempts SET prepared_at = $2, card_data_version = $3, processor_account_id = $4, updated_at = now()
        WHERE id = $1`,
      [attemptId, at, dataVersion, processorAccountId],
    );
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

  /**
   * Deletes the transaction's never-prepared pending attempts (made by the tick, never at the
   * processor) for a stop; returns how many. The caller holds the transaction's row lock, so no worker
   * can mark one in flight meanwhile (that mark is made under the same row's lock); one a worker has
   * locked already is skipped (SKIP LOCKED: never a wait), and that worker's prepare sees the stop.
   * The caller lowers the transaction's attempt_count by the count in its own write of the row.
   */
  static async dropUnstarted(m: EntityManager, transactionId: string): Promise<number> {
    const [, deleted]: [unknown[], number] = await m.query(
      `DELETE FROM attempts
        WHERE id IN (SELECT id FROM attempts
                      WHERE transaction_id = $1 AND state = 'pending' AND prepared_at IS NULL
                        FOR UPDATE SKIP LOCKED)
          AND state = 'pending' AND prepared_at IS NULL`,
      [transactionId],
    );
    return deleted;
  }

  /** The transaction waits for its next attempt until `at` (a network limit deferred it). */
  static async deferTransaction(m: EntityManager, transactionId: string, at: Date): Promise<void> {
    await m.query(`UPDATE transactions SET next_attempt_at = $2, updated_at = now() WHERE id = $1`, [
      transactionId,
      at,
    ]);
  }

  /**
   * A request goes to the processor again under the attempt's key (a rerun's charge, a lookup's
   * replay): stamped before it is sent, so the reconciliation's "not found" counts from it.
   */
  static async markSent(m: Sql, attemptId: string): Promise<void> {
    await m.query(`UPDATE attempts SET last_sent_at = now() WHERE id = $1`, [attemptId]);
  }

  /**
   * markSent, returning the mark it set and the one it replaced (for unmarkSent), as Postgres's text
   * (microseconds: a JavaScript Date would round them off and never match the mark again).
   */
  static async markSentReturning(m: Sql, attemptId: string): Promise<SentMark | null> {
    // The row locked first (a concurrent mark committed meanwhile is read, not an older snapshot).
    // TypeORM answers an UPDATE ... RETURNING on Postgres with [rows, affected count].
    const [rows]: [SentMark[], number] = await m.query(
      `UPDATE attempts a SET last_sent_at = now()
         FROM (SELECT id, last_sent_at FROM attempts WHERE id = $1 FOR UPDATE) old
        WHERE a.id = old.id
        RETURNING a.last_sent_at::text AS marked, old.last_sent_at::text AS previous`,
      [attemptId],
    );
    return rows[0] ?? null;
  }

  /**
   * Takes back a mark of markSentReturning whose request ran nothing (the processor replayed its stored
   * answer): the mark before it again, unless another send marked the attempt since.
   */
  static async unmarkSent(m: Sql, attemptId: string, mark: SentMark): Promise<void> {
    await m.query(
      `UPDATE attempts SET last_sent_at = $2::timestamptz WHERE id = $1 AND last_sent_at = $3::timestamptz`,
      [attemptId, mark.previous, mark.marked],
    );
  }

  static async setLookupAfter(m: Sql, attemptId: string, at: Date | null): Promise<void> {
    await m.query(`UPDATE attempts SET lookup_after = $2 WHERE id = $1`, [attemptId, at]);
  }

  /** Marks the alert raised; true only for the first caller (the alert is logged once per attempt). */
  static async markAlerted(m: Sql, attemptId: string): Promise<boolean> {
    // TypeORM answers an UPDATE ... RETURNING on Postgres with [rows, affected count].
    const [rows]: [unknown[], number] = await m.query(
      `UPDATE attempts SET alerted_at = now() WHERE id = $1 AND alerted_at IS NULL RETURNING id`,
      [attemptId],
    );
    return rows.length > 0;
  }

  /**
   * Attempts the reconciliation looks up now: every unknown one whose next lookup is due, and
   * errors watched for a late capture (their transaction ended Cancelled or Stopped, or another
   * attempt captured: a late capture then is a second charge of the customer, refunded).
   */
  static async dueForLookup(db: Sql, limit: number, lateWatchMs: number): Promise<ReconcileRow[]> {
    return db.query(
      `(SELECT a.id, a.vid, a.merchant_id, a.state, a.prepared_at, a.last_sent_at, a.processed_at, a.alerted_at,
               t.status AS transaction_status
          FROM attempts a JOIN transactions t ON t.id = a.transaction_id
         WHERE a.state = 'unknown' AND (a.lookup_after IS NULL OR a.lookup_after <= now())
         ORDER BY a.lookup_after NULLS FIRST LIMIT $1)
       UNION ALL
       (SELECT a.id, a.vid, a.merchant_id, a.state, a.prepared_at, a.last_sent_at, a.processed_at, a.alerted_at,
               t.status AS transaction_status
          FROM attempts a JOIN transactions t ON t.id = a.transaction_id
         WHERE a.state = 'error' AND a.processed_at > now() - ($2::double precision * interval '1 millisecond')
           AND (a.lookup_after IS NULL OR a.lookup_after <= now())
           AND t.status IN ('Cancelled', 'Stopped', 'Captured', 'Settled', 'Refund Requested', 'Partially Refunded', 'Refunded')
         ORDER BY a.lookup_after NULLS FIRST LIMIT $1)`,
      [limit, lateWatchMs],
    );
  }

  /**
   * Prepared attempts still pending `olderThanMs` after their in-flight mark: their job is over (it
   * failed for good, or vanished) without recording them (the retry worker's sweep makes them unknown).
   * Read through attempts_left_pending (migration LeftPendingAttempts).
   */
  static async leftPendingPrepared(db: Sql, olderThanMs: number, limit: number): Promise<string[]> {
    const rows: { id: string }[] = await db.query(
      `SELECT id FROM attempts
        WHERE state = 'pending' AND prepared_at IS NOT NULL
          AND prepared_at < now() - ($1::double precision * interval '1 millisecond')
        ORDER BY prepared_at LIMIT $2`,
      [olderThanMs, limit],
    );
    return rows.map((r) => r.id);
  }

  /**
   * Never-prepared pending attempts made more than `olderThanMs` ago whose retry.attempt job failed
   * for good and was not redriven (an open failed_jobs row names them): no job will run them any
   * more (the retry worker's sweep drops them and gives their transaction its schedule back). An id
   * of the payload that is not a uuid names no attempt.
   */
  static async leftPendingUnprepared(db: Sql, olderThanMs: number, limit: number): Promise<string[]> {
    const rows: { id: string }[] = await db.query(
      `SELECT DISTINCT a.id
         FROM failed_jobs f
         CROSS JOIN LATERAL jsonb_array_elements_text(
                CASE WHEN jsonb_typeof(f.payload -> 'attemptIds') = 'array' THEN f.payload -> 'attemptIds'
                     ELSE jsonb_build_array(f.payload -> 'attemptId') END) AS x(id)
         JOIN attempts a
           ON a.id = CASE WHEN x.id ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                          THEN x.id::uuid END
        WHERE f.queue = 'retry.attempt' AND f.redriven_at IS NULL
          AND a.state = 'pending' AND a.prepared_at IS NULL
          AND a.created_at < now() - ($1::double precision * interval '1 millisecond')
        LIMIT $2`,
      [olderThanMs, limit],
    );
    return rows.map((r) => r.id);
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
