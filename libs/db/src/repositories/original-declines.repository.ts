import type { EntityManager } from 'typeorm';

/** One merchant's original decline that binds its card (migration OriginalDeclines). */
export interface OriginalDecline {
  transactionId: string;
  merchantId: string;
  cardHmac: string;
  at: Date;
  amountMinor: string;
  responseCode: string;
  merchantAdviceCode: string | null;
  cardDataVersion: string | null;
}

/**
 * The merchant's own declines of submitted transactions that bind the card (a card block, a MAC
 * 24-30 delay): written by the review, read with the card's attempts by AttemptsRepository.cardHistory
 * / cardHistories, so every attempt of that transaction on the card, on any payment method, obeys them.
 */
export class OriginalDeclinesRepository {
  /** Records it (once per transaction: a review run again writes nothing new). */
  static async record(m: Pick<EntityManager, 'query'>, d: OriginalDecline): Promise<void> {
    await m.query(
      `INSERT INTO original_declines
         (transaction_id, merchant_id, card_hmac, at, amount_minor, response_code, merchant_advice_code, card_data_version)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
       ON CONFLICT (transaction_id) DO NOTHING`,
      [
        d.transactionId,
        d.merchantId,
        d.cardHmac,
        d.at,
        d.amountMinor,
        d.responseCode,
        d.merchantAdviceCode,
        d.cardDataVersion,
      ],
    );
  }

  /** The card data version the transaction's original decline was given with; undefined when none was recorded. */
  static async dataVersionOf(
    m: Pick<EntityManager, 'query'>,
    transactionId: string,
  ): Promise<string | null | undefined> {
    const [row]: { card_data_version: string | null }[] = await m.query(
      `SELECT card_data_version FROM original_declines WHERE transaction_id = $1`,
      [transactionId],
    );
    return row ? row.card_data_version : undefined;
  }
}
