import { describe, expect, it } from 'vitest';
import { freePort } from '@retain/testing';

// `npm run retain -- …` (tools/cli.mjs) without DATABASE_URL uses the database `npm start` uses: the
// default when it answers, else the embedded PostgreSQL `npm start` started (never a new one).
describe('the CLI database', () => {
  it('is the default when it answers, else the embedded one when that answers, else the default', async () => {
    const { cliDatabaseUrl } = await import('../../tools/infra.mjs');
    const answers = process.env['DATABASE_URL']!;
    const silent = `postgres://postgres@127.0.0.1:${await freePort()}/retain`;
    const silentToo = `postgres://postgres:postgres@127.0.0.1:${await freePort()}/retain`;
    expect(await cliDatabaseUrl(answers, silent)).toEqual({ databaseUrl: answers, embedded: false });
    expect(await cliDatabaseUrl(silent, answers)).toEqual({ databaseUrl: answers, embedded: true });
    expect(await cliDatabaseUrl(silent, silentToo)).toEqual({ databaseUrl: silent, embedded: false });
  });
});
