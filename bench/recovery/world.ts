// The plug-in contract of bench/recovery (issue 11): a population of failed transactions and the
// issuers' answers, written by anyone, so the retry policy can be tried on customers this project
// did not model. A world module's default export implements RecoveryWorld:
//   node bench/run-ts.mjs bench/recovery/recovery.bench.ts --world <file.ts> [--count N] [--seed S]
// The bench sees only what a merchant would submit and what the world's charge() answers.

/** A failed transaction as a merchant submits it (the spec's Transaction fields), plus the
 *  Mastercard advice code of the original decline (decisions §16), failed at `timestamp`. */
export interface SubmittedTransaction {
  id: string;
  amount: number | string;
  currency?: string;
  timestamp: string;
  status?: string;
  auth_code: string;
  network_advice_code?: string | null;
  division_number?: string;
  avs_code?: string;
  cvn_code?: string;
  previous_billing_count?: number;
  account?: { id?: string; external_id?: string | null; email?: string | null } | null;
  subscription?: { id?: string; starts?: string | null } | null;
  payment_method?: {
    id?: string;
    is_tokenized?: boolean;
    billing_address?: {
      line1?: string | null;
      city?: string | null;
      postal_code?: string | null;
      country?: string | null;
    } | null;
    credit_card?: { account?: string | null; expiration_date?: string | null } | null;
  } | null;
  metadata?: Record<string, unknown> | null;
}

export interface RecoveryWorld {
  /** The failed transactions, as a merchant would submit them (the spec's Transaction fields,
   *  plus network_advice_code), each with the time it failed in `timestamp`. */
  transactions(count: number, seed: number): SubmittedTransaction[];
  /** Outcome of charging `tx` at instant `at` (ms since epoch) as attempt number `n` (1-based). */
  charge(
    tx: SubmittedTransaction,
    at: number,
    n: number,
  ): { approved: boolean; auth_code: string; network_advice_code?: string };
}
