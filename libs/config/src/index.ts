export * from './config';
