import { AdyenProcessor, type AdyenAccountConfig, type AdyenAdapterOptions } from './adyen.processor';
import type { PaymentInstrument, PaymentProcessor } from './processor.port';
import { StripeProcessor, type StripeAccountConfig, type StripeAdapterOptions } from './stripe.processor';

/**
 * Merchants' processor accounts (decisions §13): what the config file of `processor set` may hold,
 * what `processor list` shows (never a secret), and the adapter of an account.
 */
export const ACCOUNT_PROCESSORS = ['sandbox', 'stripe', 'adyen'] as const;
export type AccountProcessor = (typeof ACCOUNT_PROCESSORS)[number];

export type AccountConfig =
  | { processor: 'sandbox'; config: { raw_card_data?: boolean } }
  | { processor: 'stripe'; config: StripeAccountConfig }
  | { processor: 'adyen'; config: AdyenAccountConfig };

/** A stored account, as the repository gives it back (config opened). */
export type ProcessorAccount = AccountConfig & {
  id: string;
  merchantId: string;
  /** '' for the merchant's default account. */
  divisionNumber: string;
  updatedAt: Date;
};

export class AccountConfigError extends Error {}

const FIELDS: Record<AccountProcessor, { required: string[]; optional: string[]; urls: string[] }> = {
  sandbox: { required: [], optional: ['raw_card_data'], urls: [] },
  stripe: { required: ['secret_key'], optional: ['api_base', 'raw_card_data', 'mit_exemption'], urls: ['api_base'] },
  adyen: {
    required: ['api_key', 'merchant_account'],
    optional: ['checkout_url', 'raw_card_data', 'hmac_key'],
    urls: ['checkout_url'],
  },
};

/**
 * A Stripe secret (`sk_`) or restricted (`rk_`) key (decisions §13: `"secret_key":"sk_..."`): any
 * key of letters, digits and underscores after the prefix, at least one a letter or digit, at most
 * 255 characters (Stripe's own keys are `sk_test_…` / `rk_live_…`; fakes and proxies use others, such
 * as `sk_test_e2e_fake`). Publishable `pk_` keys, spaces, other characters and bare prefixes are refused.
 */
const STRIPE_SECRET_KEY = /^(?=.{4,255}$)(sk|rk)_[A-Za-z0-9_]*[A-Za-z0-9][A-Za-z0-9_]*$/;

/**
 * An Adyen webhook HMAC key: hex, as the Customer Area shows it (64 digits for its 32-byte keys; any
 * even number of 32 to 256 digits accepted).
 */
const ADYEN_HMAC_KEY = /^(?:[0-9A-Fa-f]{2}){16,128}$/;

/** Validates a config file's JSON. Error messages name fields, never their values. */
export function parseAccountConfig(processor: string, raw: unknown): AccountConfig {
  if (!(ACCOUNT_PROCESSORS as readonly string[]).includes(processor)) {
    throw new AccountConfigError(`unknown processor "${processor}"; known: ${ACCOUNT_PROCESSORS.join(', ')}`);
  }
  const p = processor as AccountProcessor;
  if (!raw || typeof raw !== 'object' || Array.isArray(raw))
    throw new AccountConfigError('config must be a JSON object');
  const o = raw as Record<string, unknown>;
  const spec = FIELDS[p];
  for (const k of Object.keys(o)) {
    if (!spec.required.includes(k) && !spec.optional.includes(k))
      throw new AccountConfigError(`unknown field "${k}" for ${p}`);
  }
  for (const k of spec.required) {
    if (typeof o[k] !== 'string' || !(o[k] as string).trim())
      throw new AccountConfigError(`"${k}" is required (a string)`);
  }
  for (const k of spec.urls) {
    if (o[k] === undefined) continue;
    let u: URL | null = null;
    try {
      u = new URL(String(o[k]));
    } catch {
      u = null;
    }
    if (!u || (u.protocol !== 'https:' && u.protocol !== 'http:'))
      throw new AccountConfigError(`"${k}" must be an http(s) URL`);
    // The URL is shown (`processor set`, `processor list`): credentials in it would be a secret shown.
    if (u.username || u.password) throw new AccountConfigError(`"${k}" must not carry a user name or password`);
  }
  if (o.raw_card_data !== undefined && typeof o.raw_card_data !== 'boolean') {
    throw new AccountConfigError('"raw_card_data" must be true or false');
  }
  if (o.mit_exemption !== undefined && typeof o.mit_exemption !== 'boolean') {
    throw new AccountConfigError('"mit_exemption" must be true or false');
  }
  if (o.hmac_key !== undefined && (typeof o.hmac_key !== 'string' || !ADYEN_HMAC_KEY.test(o.hmac_key))) {
    throw new AccountConfigError('"hmac_key" must be the webhook\'s HMAC key in hex (an even number of hex digits)');
  }
  if (p === 'stripe' && !STRIPE_SECRET_KEY.test(o.secret_key as string)) {
    throw new AccountConfigError('"secret_key" must be a Stripe secret or restricted key (sk_... / rk_...)');
  }
  return { processor: p, config: o } as AccountConfig;
}

/** The account as `processor set` / `processor list` print it: no secret, not even a part of one. */
export function accountView(a: AccountConfig & { divisionNumber: string; updatedAt?: Date }): Record<string, unknown> {
  const c = a.config as Record<string, unknown>;
  return {
    processor: a.processor,
    division_number: a.divisionNumber || null,
    raw_card_data: c.raw_card_data === true,
    ...(c.mit_exemption === true ? { mit_exemption: true } : {}),
    ...(c.api_base ? { api_base: c.api_base } : {}),
    ...(c.merchant_account ? { merchant_account: c.merchant_account } : {}),
    ...(c.checkout_url ? { checkout_url: c.checkout_url } : {}),
    ...(a.updatedAt ? { updated_at: a.updatedAt.toISOString() } : {}),
  };
}

/**
 * Whether an account can charge an instrument (§13): a clear card number only where the account
 * allows raw card data. The review rejects the transaction with RET011 otherwise.
 */
export function accountAccepts(a: AccountConfig | null, instrument: Pick<PaymentInstrument, 'kind'>): boolean {
  if (!a || a.processor === 'sandbox') return true;
  return instrument.kind !== 'pan' || a.config.raw_card_data === true;
}

/** What a payment method is charged as: a card number, or a token (a network token: its number). */
export type ChargeableInstrument = { kind: 'pan' } | { kind: 'token'; token: string; isNetworkToken: boolean };

export type InstrumentCheck =
  /** `pan`: the card number a de-tokenized token stands for (null: a card number, or a token only checked). */
  | { ok: true; pan: string | null }
  /** `raw_card_data`: a card number for a tokens-only account; `token`: a token the processor cannot charge. */
  | { ok: false; reason: 'raw_card_data' | 'token' | 'token_length'; message: string };

/**
 * Whether a processor account (null: the app's processor) and its adapter can charge a payment method
 * (§13): a card number only where the account allows raw card data; a token only when it fits the
 * processor's id length and the processor knows it (Stripe, Adyen: has the form of one of their saved
 * payment methods, checkToken; others: de-tokenizes, the sandbox's from its own table, no network
 * call). The one rule for a submitted payment method (the review: RET011) and for the account's other
 * payment methods a transaction may fall back to (the review's fallback, the retry worker's): a
 * payment method remembered under one division's account is no alternative in a division whose
 * account cannot charge it.
 */
export async function checkInstrument(
  account: AccountConfig | null,
  processor: PaymentProcessor,
  instrument: ChargeableInstrument,
): Promise<InstrumentCheck> {
  if (instrument.kind === 'pan') {
    return accountAccepts(account, instrument)
      ? { ok: true, pan: null }
      : {
          ok: false,
          reason: 'raw_card_data',
          message: "The merchant's processor account takes tokenized payment methods only",
        };
  }
  const max = processor.limits.maxPaymentMethodIdLength;
  if (instrument.token.length > max) {
    return { ok: false, reason: 'token_length', message: `payment_method.id longer than ${max} characters` };
  }
  if (processor.checkToken) {
    const checked = processor.checkToken(instrument.token, { isNetworkToken: instrument.isNetworkToken });
    return checked.ok ? { ok: true, pan: null } : { ok: false, reason: 'token', message: checked.message };
  }
  const r = await processor.detokenize(instrument.token);
  return r.ok ? { ok: true, pan: r.pan } : { ok: false, reason: 'token', message: r.message };
}

export interface AccountAdapterOptions {
  stripe?: StripeAdapterOptions;
  adyen?: AdyenAdapterOptions;
}

/** The adapter of a Stripe or Adyen account (sandbox accounts use the app's sandbox processor). */
export function accountAdapter(a: AccountConfig, options: AccountAdapterOptions = {}): PaymentProcessor | null {
  switch (a.processor) {
    case 'stripe':
      return new StripeProcessor(a.config, { ...options.stripe, logContext: accountLogContext(a) });
    case 'adyen':
      return new AdyenProcessor(a.config, options.adyen);
    case 'sandbox':
      return null;
  }
}

/** What names a stored account in an adapter's warnings (never its config). */
function accountLogContext(a: AccountConfig | ProcessorAccount): Record<string, unknown> | undefined {
  if (!('id' in a)) return undefined;
  return { account_id: a.id, merchant_id: a.merchantId, division_number: a.divisionNumber || null };
}

/** Where the accounts are read from (ProcessorAccountsRepository in the apps). */
export interface ProcessorAccountSource {
  /** The current account of the division, else the merchant's current default, else null. */
  forDivision(merchantId: string, divisionNumber: string | null): Promise<ProcessorAccount | null>;
  /** One account version by id, current or retired. */
  byId(id: string): Promise<ProcessorAccount | null>;
}

/**
 * The processor of a transaction (§13): its merchant's account for its `division_number`, else the
 * merchant's default account, else the app's processor (PROCESSOR). Adapters are kept per account
 * and rebuilt when the account changes.
 */
export class ProcessorResolver {
  private readonly cache = new Map<string, { stamp: number; processor: PaymentProcessor }>();

  constructor(
    private readonly accounts: ProcessorAccountSource,
    private readonly fallback: PaymentProcessor,
    private readonly options: AccountAdapterOptions = {},
  ) {}

  async account(merchantId: string, divisionNumber: string | null): Promise<ProcessorAccount | null> {
    return this.accounts.forDivision(merchantId, divisionNumber);
  }

  async forTransaction(merchantId: string, divisionNumber: string | null): Promise<PaymentProcessor> {
    return this.adapterOf(await this.accounts.forDivision(merchantId, divisionNumber));
  }

  async forAccount(accountId: string | null): Promise<PaymentProcessor> {
    if (accountId === null) return this.fallback;
    const cached = this.cache.get(accountId);
    // A version's config never changes (a change is a new version), so its adapter is kept.
    if (cached) return cached.processor;
    const account = await this.accounts.byId(accountId);
    if (!account) throw new Error(`processor account ${accountId} not found`);
    return this.adapterOf(account);
  }

  private adapterOf(account: ProcessorAccount | null): PaymentProcessor {
    if (!account) return this.fallback;
    const cached = this.cache.get(account.id);
    if (cached && cached.stamp === account.updatedAt.getTime()) return cached.processor;
    const processor = accountAdapter(account, this.options) ?? this.fallback;
    this.cache.set(account.id, { stamp: account.updatedAt.getTime(), processor });
    return processor;
  }
}

/** A stored account as the db repository returns it (config opened, not yet validated). */
export interface StoredAccountLike {
  id: string;
  merchantId: string;
  divisionNumber: string;
  processor: string;
  config: unknown;
  updatedAt: Date;
}

/**
 * The ProcessorAccountSource of a repository (ProcessorAccountsRepository of @retain/db): each
 * account's config is validated again as it is read.
 */
export function accountSourceOf(repo: {
  forDivision(merchantId: string, divisionNumber: string | null): Promise<StoredAccountLike | null>;
  byId(id: string): Promise<StoredAccountLike | null>;
}): ProcessorAccountSource {
  const validated = (a: StoredAccountLike | null): ProcessorAccount | null =>
    a
      ? {
          ...parseAccountConfig(a.processor, a.config),
          id: a.id,
          merchantId: a.merchantId,
          divisionNumber: a.divisionNumber,
          updatedAt: a.updatedAt,
        }
      : null;
  return {
    byId: async (id) => validated(await repo.byId(id)),
    forDivision: async (merchantId, divisionNumber) => validated(await repo.forDivision(merchantId, divisionNumber)),
  };
}

/**
 * The processor that charges and refunds a transaction (the apps: a ProcessorResolver). A new charge
 * goes through the merchant's current account, whose id the attempt records with its in-flight mark
 * (ProcessorAccountsRepository.currentIds); that charge, its lookups and its refund then go through
 * `forAccount` of the recorded id, whatever the merchant's accounts have become since.
 */
export interface TransactionProcessors {
  /** The processor of a new charge (or check) of the transaction: its merchant's current account's. */
  forTransaction(merchantId: string, divisionNumber: string | null): Promise<PaymentProcessor>;
  /**
   * The account forTransaction charges through (null: the app's processor), for checkInstrument.
   * Absent: the app's processor (`fixedProcessor`).
   */
  account?(merchantId: string, divisionNumber: string | null): Promise<AccountConfig | null>;
  /** The processor of an account version by id, current or retired; null: the app's processor. */
  forAccount(accountId: string | null): Promise<PaymentProcessor>;
}

/**
 * The processor of a capture (its refund, its settlement): the account the capturing attempt was
 * charged through (`{id: null}`: the app's processor), whatever the merchant's accounts have become
 * since; without a capturing attempt, the transaction's current account.
 */
export function processorOfCapture(
  processors: TransactionProcessors,
  capturedBy: { id: string | null } | null,
  merchantId: string,
  divisionNumber: string | null,
): Promise<PaymentProcessor> {
  return capturedBy ? processors.forAccount(capturedBy.id) : processors.forTransaction(merchantId, divisionNumber);
}

/**
 * DI token of the TransactionProcessors of the retry worker and the refund batcher. Tests provide
 * `fixedProcessor(p)` to charge everything through one controllable processor.
 */
export const TRANSACTION_PROCESSORS = Symbol('TRANSACTION_PROCESSORS');

/** Every transaction through one processor (tests, benches). */
export function fixedProcessor(processor: PaymentProcessor): TransactionProcessors {
  return { forTransaction: async () => processor, forAccount: async () => processor };
}
