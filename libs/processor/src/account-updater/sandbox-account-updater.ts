import { createHash } from 'node:crypto';
import type { SandboxLedger } from '../sandbox/sandbox-ledger';
import type { AccountUpdater, AccountUpdaterAnswer, CardToUpdate } from './account-updater.port';

/** Sandbox card whose updater answer is a new expiry three years later (decisions §15). */
export const SANDBOX_UPDATER_NEW_EXPIRY_CARD = '4000000000000341';
/** Sandbox card whose updater answer is "account closed" (decisions §15). */
export const SANDBOX_UPDATER_CLOSED_CARD = '4000000000000259';

/** The sandbox ledger's record of an expiry its account updater issued for a card (no card number in it). */
export const sandboxUpdateKey = (pan: string, expiration: string): string =>
  `sbu_${createHash('sha256').update(`sandbox-updater:${pan}:${expiration}`).digest('hex').slice(0, 40)}`;

/**
 * The sandbox account updater: deterministic by card number. 4000000000000341 gets an expiry three
 * years after its current one (decisions §15), or three years after this month when that would still
 * be past (an expired card always comes back valid);
 * 4000000000000259 is closed; every other card has nothing new.
 */
export class SandboxAccountUpdater implements AccountUpdater {
  readonly name = 'sandbox';

  /** The sandbox's ledger: an issued expiry is recorded there so the sandbox processor approves it. */
  constructor(private readonly ledger: SandboxLedger) {}

  async lookup(card: CardToUpdate, now: Date): Promise<AccountUpdaterAnswer> {
    const pan = card.pan.replace(/[\s-]/g, '');
    if (pan === SANDBOX_UPDATER_CLOSED_CARD) return { kind: 'closed', message: 'Account closed' };
    if (pan !== SANDBOX_UPDATER_NEW_EXPIRY_CARD) return { kind: 'no-change' };
    const thisMonth = now.getUTCFullYear() * 100 + now.getUTCMonth() + 1;
    const current = /^\d{6}$/.test(card.expiration ?? '') ? Number(card.expiration) : thisMonth;
    const expiration = String(current + 300 >= thisMonth ? current + 300 : thisMonth + 300);
    await this.ledger.putIfAbsent(sandboxUpdateKey(pan, expiration), 'update', { expiration });
    return { kind: 'updated', pan, expiration };
  }
}
