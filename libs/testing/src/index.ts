export * from './apps';
export * from './fixtures';
export * from './receiver';
export * from './money-fixtures';
export * from './private-database';
