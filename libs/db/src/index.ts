export * from './data-source';
export * from './entities';
export * from './repositories';
export * from './transaction-retry';
export * from './card-fingerprints';
export * from './postgres-settings';
