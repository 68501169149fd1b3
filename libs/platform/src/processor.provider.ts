import { Logger, type Provider } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import { ProcessorAccountsRepository, type PaymentMethodRow } from '@retain/db';
import {
  ACCOUNT_UPDATER,
  NO_ACCOUNT_UPDATER,
  PAYMENT_PROCESSOR,
  SandboxAccountUpdater,
  PgSandboxLedger,
  ProcessorResolver,
  TRANSACTION_PROCESSORS,
  accountSourceOf,
  checkInstrument,
  createProcessor,
  type AccountConfig,
  type ChargeableInstrument,
  type PaymentProcessor,
} from '@retain/processor';
import { DataSource } from 'typeorm';
import { RETAIN_CONFIG } from './tokens';

/**
 * The payment processor behind its DI token (PAYMENT_PROCESSOR): the one named by PROCESSOR, the
 * sandbox keeping its ledger in Postgres. It charges the merchants without a processor account.
 */
export const PaymentProcessorProvider: Provider = {
  provide: PAYMENT_PROCESSOR,
  inject: [DataSource, RETAIN_CONFIG],
  useFactory: (db: DataSource, config: RetainConfig) => createProcessor(config.processor, new PgSandboxLedger(db)),
};

const stripeLogger = new Logger('StripeProcessor');

/** What a stored payment method is charged as: its token (pm_id), or its sealed card number. */
export function instrumentOf(
  pm: Pick<PaymentMethodRow, 'card_kind' | 'pm_id' | 'is_network_token'>,
): ChargeableInstrument {
  return pm.card_kind === 'token'
    ? { kind: 'token', token: pm.pm_id, isNetworkToken: pm.is_network_token === 1 }
    : { kind: 'pan' };
}

/**
 * decisions §13, §15: whether a transaction's processor account (the one its division_number picks;
 * null: the app's processor) can charge one of the account's stored payment methods, by the rule the
 * review applies to a submitted one (checkInstrument). The review's fallback and the retry worker's
 * (nextPaymentMethod) adopt only such a one: a token remembered under one division's account, or a
 * card number under an account taking raw card data, is no alternative where it cannot be charged.
 */
export function chargeableBy(
  account: AccountConfig | null,
  processor: PaymentProcessor,
): (pm: PaymentMethodRow) => Promise<boolean> {
  return async (pm) => (await checkInstrument(account, processor, instrumentOf(pm))).ok;
}

/**
 * The processor of each transaction (TRANSACTION_PROCESSORS, decisions §13): its merchant's account
 * for its division_number, else the merchant's default account, else PAYMENT_PROCESSOR. Tests
 * override the token with `fixedProcessor(...)`.
 */
export const TransactionProcessorsProvider: Provider = {
  provide: TRANSACTION_PROCESSORS,
  inject: [DataSource, RETAIN_CONFIG, PAYMENT_PROCESSOR],
  useFactory: (db: DataSource, config: RetainConfig, fallback: PaymentProcessor) =>
    new ProcessorResolver(accountSourceOf(new ProcessorAccountsRepository(db, config.cardKeys)), fallback, {
      stripe: {
        timeoutMs: config.processorTimeoutMs,
        warn: (fields, msg) => stripeLogger.warn(fields, msg),
      },
      adyen: { timeoutMs: config.processorTimeoutMs },
    }),
};

/**
 * The account updater (decisions §15): the sandbox's with PROCESSOR=sandbox (its answers are
 * recorded in the sandbox ledger, which the sandbox processor reads); none otherwise until a real
 * updater service is connected (every card: nothing new).
 */
export const AccountUpdaterProvider: Provider = {
  provide: ACCOUNT_UPDATER,
  inject: [DataSource, RETAIN_CONFIG],
  useFactory: (db: DataSource, config: RetainConfig) =>
    accountUpdaterConnected(config) ? new SandboxAccountUpdater(new PgSandboxLedger(db)) : NO_ACCOUNT_UPDATER,
};

/**
 * Whether an account updater answers (decisions §15: it runs for data-quality declines and expired
 * cards, for every merchant). A merchant's registered public key only decides whether the updated
 * full number is also offered to it (encrypted to that key); without one, masked values only.
 */
export function accountUpdaterConnected(config: Pick<RetainConfig, 'processor'>): boolean {
  return config.processor === 'sandbox';
}

/** The providers the retry worker and the refund batcher register. */
export const ProcessorProviders: Provider[] = [
  PaymentProcessorProvider,
  TransactionProcessorsProvider,
  AccountUpdaterProvider,
];
