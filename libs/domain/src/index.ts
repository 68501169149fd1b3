export * from './statuses';
export * from './codes';
export * from './ids';
export * from './money';
export * from './card';
export * from './card-vault';
export * from './policy';
export * from './scrub';
