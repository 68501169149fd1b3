export * from './state-machine';
export * from './refund-outcome';
export * from './stop-closure';
export * from './transaction-events';
// The status and push names stay in libs/domain (pure); re-exported so a reader of the rules finds them here.
export { AuthCodeDescription, EventName, RefundStatus, TransactionStatus } from '@retain/domain';
export * from './payment-methods';
export * from './policy-inputs';
export * from './experiment-results';
export * from './network-fees';
