import type { Provider } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import { PAYMENT_PROCESSOR, PgSandboxLedger, createProcessor } from '@retain/processor';
import { DataSource } from 'typeorm';
import { RETAIN_CONFIG } from './tokens';

/**
 * The payment processor behind its DI token (PAYMENT_PROCESSOR): the one named by PROCESSOR, the
 * sandbox keeping its ledger in Postgres. Tests override the token with a controllable processor.
 */
export const PaymentProcessorProvider: Provider = {
  provide: PAYMENT_PROCESSOR,
  inject: [DataSource, RETAIN_CONFIG],
  useFactory: (db: DataSource, config: RetainConfig) => createProcessor(config.processor, new PgSandboxLedger(db)),
};
