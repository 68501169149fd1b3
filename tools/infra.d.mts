export declare const root: string;
export declare function ensureBuilt(opts?: { force?: boolean }): void;
export declare function freePort(): Promise<number>;
export declare const DEFAULT_DATABASE_URL: string;
export declare function embeddedDatabaseUrl(databaseUrl: string): string;
export declare function cliDatabaseUrl(
  databaseUrl: string,
  embeddedUrl?: string,
): Promise<{ databaseUrl: string; embedded: boolean }>;
