export * from './state-machine';
export * from './stop-closure';
export * from './transaction-events';
