export * from './merchants.repository';
export * from './transaction-view';
export * from './transactions.repository';
export * from './refunds.repository';
export * from './processor-accounts.repository';
export * from './attempts.repository';
export * from './processor-throttles.repository';
