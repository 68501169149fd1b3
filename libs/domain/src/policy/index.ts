export * from './decline-classifier';
export * from './network-limits';
export * from './network-rules.config';
export * from './payday-calendar';
export * from './retry-schedule';
export * from './attempt-slots';
export * from './cardholder-time';
