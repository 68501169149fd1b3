import type { DataSource, EntityManager } from 'typeorm';

type Sql = Pick<EntityManager, 'query'> | Pick<DataSource, 'query'>;

/** Scope of the counts across all merchants (a merchant's own scope is its id). */
export const GLOBAL_SCOPE = '';

export interface SlotCountRow {
  scope: string;
  decline_class: string;
  day_after_failure: number;
  local_hour: number;
  attempts: number;
  approvals: number;
}

/** What the adaptive retry policy reads about a transaction (libs/recovery policy-inputs.ts). */
export interface PolicyTransactionRow {
  id: string;
  merchant_id: string;
  policy_version: string | null;
  auth_code: string | null;
  account_id: string | null;
  /** The merchant's `timestamp` of the original decline, as sent (policy-inputs reads it with originalDeclineAt). */
  failed_at: Date;
  submitted_ts: Date;
  card_bin: string | null;
  card_network: string | null;
  expiration_date: string | null;
  /** 'clear', 'jwe' (a stored card number, which the account updater can renew) or 'token'. */
  card_kind: string | null;
  /** A token's last 4 are known only when the processor de-tokenized it (the updater can renew it then). */
  card_last4: string | null;
  country: string | null;
  postal_code: string | null;
  experiment_id: string | null;
  experiment_arm: string | null;
  network_advice_code: string | null;
  /**
   * Whether the transaction charges the card it was submitted with (its original decline's card):
   * the submitted payment method, or another carrying the same card. True for rows without one.
   */
  on_original_card: boolean;
}

/** An account's other transactions at the merchant: when they were charged (newest first), and their outcomes. */
export interface AccountHistory {
  paidAt: Date[];
  approvals: number;
  declines: number;
}

/**
 * The adaptive policy's evidence: attempts and approvals per slot, per merchant and across all
 * merchants, and what a transaction's planning reads (its account's earlier charges and outcomes).
 */
export class PolicyStatsRepository {
  /** The policy rows of transactions in one statement, by transaction id (each only with its own merchant's id). */
  static async transactions(
    m: Sql,
    refs: readonly { merchantId: string; transactionId: string }[],
  ): Promise<Map<string, PolicyTransactionRow>> {
    if (refs.length === 0) return new Map();
    const rows: PolicyTransactionRow[] = await m.query(
      `SELECT t.id, t.merchant_id, t.policy_version, t.auth_code, t.account_id, t.failed_at, t.submitted_ts,
              t.card_bin, t.card_network,
              t.expiration_date, t.card_kind, t.card_last4, t.payment_method->'billing_address'->>'country' AS country,
              t.payment_method->'billing_address'->>'postal_code' AS postal_code, t.experiment_id, t.experiment_arm,
              t.network_advice_code,
              (t.original_payment_method_ref IS NULL OR t.payment_method_ref IS NULL
                OR t.payment_method_ref = t.original_payment_method_ref
                OR (t.card_hmac IS NOT NULL AND t.card_hmac = o.card_hmac)) AS on_original_card
         FROM unnest($1::uuid[], $2::uuid[]) AS r(id, merchant_id)
         JOIN transactions t ON t.id = r.id AND t.merchant_id = r.merchant_id
         LEFT JOIN payment_methods o ON o.id = t.original_payment_method_ref`,
      [refs.map((r) => r.transactionId), refs.map((r) => r.merchantId)],
    );
    return new Map(rows.map((r) => [r.id, r]));
  }

  /** The merchant's counts and the global counts of one decline class (folded plus pending). */
  static async slots(m: Sql, merchantId: string, declineClass: string): Promise<SlotCountRow[]> {
    return m.query(
      `SELECT scope, decline_class, day_after_failure, local_hour, sum(attempts)::int AS attempts,
              sum(approvals)::int AS approvals
         FROM (SELECT scope, decline_class, day_after_failure, local_hour, attempts, approvals
                 FROM policy_slot_stats WHERE scope = ANY($1::text[]) AND decline_class = $2
               UNION ALL
               SELECT scope, decline_class, day_after_failure, local_hour, attempts, approvals
                 FROM policy_slot_pending WHERE scope = ANY($1::text[]) AND decline_class = $2) c
        GROUP BY scope, decline_class, day_after_failure, local_hour`,
      [[merchantId, GLOBAL_SCOPE], declineClass],
    );
  }

  /**
   * Counts decided attempts in their slots, each for its merchant and for all merchants, in one
   * statement: appended to policy_slot_pending (no shared row, so concurrent attempts never wait on
   * each other), folded into policy_slot_stats by the retry tick (`fold`).
   */
  static async countMany(
    m: Sql,
    items: readonly {
      merchantId: string;
      slot: { declineClass: string; dayAfterFailure: number; localHour: number };
      approved: boolean;
    }[],
  ): Promise<void> {
    if (items.length === 0) return;
    // One pending row per slot of the statement, its counts summed: a batch's attempts share few
    // slots (every attempt counts twice, for its merchant and for all), and the reads and the fold
    // sum the pending rows anyway.
    const rows = new Map<string, SlotCountRow>();
    for (const i of items) {
      const { declineClass, dayAfterFailure, localHour } = i.slot;
      for (const scope of [i.merchantId, GLOBAL_SCOPE]) {
        const key = `${scope}|${declineClass}|${dayAfterFailure}|${localHour}`;
        const row = rows.get(key) ?? {
          scope,
          decline_class: declineClass,
          day_after_failure: dayAfterFailure,
          local_hour: localHour,
          attempts: 0,
          approvals: 0,
        };
        row.attempts += 1;
        row.approvals += i.approved ? 1 : 0;
        rows.set(key, row);
      }
    }
    await m.query(
      `INSERT INTO policy_slot_pending (scope, decline_class, day_after_failure, local_hour, attempts, approvals)
       SELECT x.scope, x.decline_class, x.day_after_failure, x.local_hour, x.attempts, x.approvals
         FROM jsonb_to_recordset($1::jsonb)
           AS x(scope text, decline_class text, day_after_failure int, local_hour int, attempts int, approvals int)`,
      [JSON.stringify([...rows.values()])],
    );
  }

  /** Moves up to `limit` pending counts into policy_slot_stats; returns how many it moved. */
  static async fold(m: Sql, limit = 50_000): Promise<number> {
    const [{ n }] = (await m.query(`SELECT policy_slot_fold($1) AS n`, [limit])) as { n: number }[];
    return n;
  }

  /**
   * When each account's other transactions at this merchant were charged (newest first), and its
   * outcomes: many in one statement, in the order given.
   */
  static async accountHistories(
    m: Sql,
    items: readonly { merchantId: string; accountId: string; exceptTransactionId: string }[],
  ): Promise<AccountHistory[]> {
    if (items.length === 0) return [];
    const rows: { n: string; state: string; at: Date }[] = await m.query(
      `SELECT x.n, h.state, h.at
         FROM unnest($1::uuid[], $2::text[], $3::uuid[]) WITH ORDINALITY AS x(merchant_id, account_id, except_id, n)
         CROSS JOIN LATERAL (
           SELECT a.state, COALESCE(a.processed_at, a.scheduled_for) AS at
             FROM transactions t JOIN attempts a ON a.transaction_id = t.id
            WHERE t.merchant_id = x.merchant_id AND t.account_id = x.account_id AND t.id <> x.except_id
              AND a.state IN ('captured', 'declined')
            ORDER BY at DESC LIMIT 200) h
        ORDER BY x.n, h.at DESC`,
      [items.map((i) => i.merchantId), items.map((i) => i.accountId), items.map((i) => i.exceptTransactionId)],
    );
    const byItem = items.map(() => [] as { state: string; at: Date }[]);
    for (const r of rows) byItem[Number(r.n) - 1]!.push(r);
    return byItem.map((list) => {
      const paid = list.filter((r) => r.state === 'captured');
      return {
        paidAt: paid.slice(0, 24).map((r) => new Date(r.at)),
        approvals: paid.length,
        declines: list.length - paid.length,
      };
    });
  }
}
