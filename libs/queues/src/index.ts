export * from './connection-errors';
export * from './contracts';
export * from './outbox';
export * from './push-messages';
export * from './redis';
export * from './failed-jobs';
