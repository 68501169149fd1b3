export * from './bootstrap';
export * from './jobs';
export * from './logging';
export * from './metrics';
export * from './platform.module';
export * from './queues';
export * from './tokens';
export * from './unavailable';

export * from './processor.provider';
export * from './repositories.provider';
