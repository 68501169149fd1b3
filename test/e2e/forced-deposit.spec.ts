import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApiClient,
  closeTestDb,
  createMerchant,
  startApp,
  txn,
  waitFor,
  type RunningApp,
  type TestMerchant,
  usePrivateDatabase,
} from '@retain/testing';

const ENV = { RETRY_TIME_SCALE: '1000000', JOB_LOCK_MS: '2000' };
/** Declined 05 on every attempt: a soft decline whose schedule runs out. */
const ALWAYS_05 = '4000000000000002';
const cliMain = path.resolve(__dirname, '../../dist/apps/cli/src/main.js');

// service-spec `forced_deposit` / `previous_billing_count` -1: off by default per merchant; a
// merchant who turns it on gets one last capture without authorization when a recovery would end
// after soft declines, except for a transaction submitted with previous_billing_count -1.
describe('forced deposit through the real apps', () => {
  // Its own database and queues: a time-scaled recovery window has no room for other files' backlog.
  usePrivateDatabase('fdp');
  const apps: RunningApp[] = [];
  let url = '';

  beforeAll(async () => {
    apps.push(
      ...(await Promise.all([
        startApp('intake-api', { env: ENV }),
        startApp('submission-validator', { env: ENV }),
        startApp('retry-worker', { env: ENV }),
      ])),
    );
    url = apps[0]!.url;
  });
  afterAll(async () => {
    for (const a of apps) await a.stop();
    await closeTestDb();
  });

  const final = (api: ApiClient, id: string) =>
    waitFor(
      async () => {
        const rows = (await api.request('GET', `/v1/retain/transactions/${id}?related=true`)).json.data as any[];
        return ['Captured', 'Cancelled'].includes(rows?.[0]?.status) ? rows : null;
      },
      { timeoutMs: 60_000, what: `${id} final` },
    );
  const setForced = (m: TestMerchant, flag: '--on' | '--off') => {
    const r = spawnSync(process.execPath, [cliMain, 'merchant', 'set-forced-deposit', '--login', m.login, flag], {
      env: process.env,
      encoding: 'utf8',
    });
    expect(r.status).toBe(0);
    return JSON.parse(r.stdout);
  };

  it('is off by default: the recovery ends Cancelled', { timeout: 90_000 }, async () => {
    const m = await createMerchant();
    const api = new ApiClient(url, m.api_key);
    const t = txn({ auth_code: '05' }, ALWAYS_05);
    expect((await api.submit([t])).status).toBe(200);
    const [submitted, ...attempts] = await final(api, t['id'] as string);
    expect(submitted).toMatchObject({ status: 'Cancelled', forced_deposit: false });
    expect(attempts.every((a) => a.forced_deposit === false)).toBe(true);
  });

  it(
    'when on: one last capture without authorization, never with previous_billing_count -1',
    { timeout: 90_000 },
    async () => {
      const m = await createMerchant();
      expect(setForced(m, '--on')).toMatchObject({ login: m.login, forced_deposit: true });
      const api = new ApiClient(url, m.api_key);
      const t = txn({ auth_code: '05', previous_billing_count: 3 }, ALWAYS_05);
      expect((await api.submit([t])).status).toBe(200);
      const [submitted, ...attempts] = await final(api, t['id'] as string);
      expect(submitted).toMatchObject({ status: 'Captured', forced_deposit: true });
      const last = attempts[attempts.length - 1];
      expect(last).toMatchObject({ status: 'Captured', forced_deposit: true });
      expect(attempts.slice(0, -1).every((a) => a.status === 'Failed' && a.forced_deposit === false)).toBe(true);

      // Another merchant's card history is its own: a fresh merchant for the opted-out transaction.
      const m2 = await createMerchant();
      setForced(m2, '--on');
      const api2 = new ApiClient(url, m2.api_key);
      const optedOut = txn({ auth_code: '05', previous_billing_count: -1 }, ALWAYS_05);
      expect((await api2.submit([optedOut])).status).toBe(200);
      const [o, ...oAttempts] = await final(api2, optedOut['id'] as string);
      expect(o).toMatchObject({ status: 'Cancelled', forced_deposit: false });
      expect(oAttempts.every((a) => a.forced_deposit === false)).toBe(true);
    },
  );
});
