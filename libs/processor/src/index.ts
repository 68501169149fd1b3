export * from './processor.port';
export * from './card-network';
export * from './processor.factory';
export * from './sandbox/sandbox-ledger';
export * from './sandbox/sandbox-model';
export * from './sandbox/sandbox.processor';
