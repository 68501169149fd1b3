/**
 * The account updater port (decisions §15): asks the card networks' updater services (Visa Account
 * Updater, Mastercard Automatic Billing Updater, or a processor's wrapper of them) whether a card
 * has new data. The sandbox implements it; a real provider implements the same interface.
 */
export interface CardToUpdate {
  /** The full card number (never logged, never in a job payload). */
  pan: string;
  /** YYYYMM, when known. */
  expiration: string | null;
}

export type AccountUpdaterAnswer =
  /** New card data: the number (the same or a new one) and the expiry. */
  | { kind: 'updated'; pan: string; expiration: string }
  /** The issuer closed the account: the card must never be charged again. */
  | { kind: 'closed'; message: string }
  /** Nothing new is known about the card. */
  | { kind: 'no-change' };

export interface AccountUpdater {
  readonly name: string;
  lookup(card: CardToUpdate, now: Date): Promise<AccountUpdaterAnswer>;
}

export const ACCOUNT_UPDATER = Symbol('ACCOUNT_UPDATER');

/** No updater service connected: nothing new is ever known. */
export const NO_ACCOUNT_UPDATER: AccountUpdater = {
  name: 'none',
  lookup: () => Promise.resolve({ kind: 'no-change' }),
};
