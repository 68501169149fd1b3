import type { PaymentProcessor } from './processor.port';
import type { SandboxLedger } from './sandbox/sandbox-ledger';
import { SandboxProcessor } from './sandbox/sandbox.processor';

export interface ProcessorDeps {
  /** Where the sandbox keeps its operations (PgSandboxLedger in the apps). */
  ledger: SandboxLedger;
}

export const PROCESSOR_NAMES = ['sandbox'] as const;

/** The processor named by PROCESSOR. A ledger alone is accepted as the deps. */
export function createProcessor(name: string, deps: ProcessorDeps | SandboxLedger): PaymentProcessor {
  const ledger = 'ledger' in deps ? deps.ledger : deps;
  switch (name.trim().toLowerCase()) {
    case 'sandbox':
      return new SandboxProcessor(ledger);
    default:
      throw new Error(`Unknown payment processor "${name}" (PROCESSOR); known: ${PROCESSOR_NAMES.join(', ')}`);
  }
}
