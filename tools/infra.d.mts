export declare const root: string;
export declare function ensureBuilt(opts?: { force?: boolean }): void;
export declare function freePort(): Promise<number>;
