/** Injection tokens of the shared runtime. */
export const RETAIN_CONFIG = Symbol('RETAIN_CONFIG');
export const REDIS = Symbol('REDIS');
