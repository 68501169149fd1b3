import { randomBytes } from 'node:crypto';

/**
 * The URL of a database of its own, next to the run's (not created yet: `migrate` creates it), for
 * the specs of libs/db that need one: the migrations' round trip, or statistics no other file's
 * writes may reach (`dropDatabase` drops it). Test support: never built into dist/.
 */
export function scratchDatabaseUrl(tag: string): string {
  const url = new URL(process.env['DATABASE_URL']!);
  url.pathname = `/retain_${tag}_${randomBytes(4).toString('hex')}`;
  return url.toString();
}
