import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

// The apps' built modules, loaded as `npm start` loads them: the Adyen SDK (a quarter of every app's
// module load) and the Stripe SDK (~100 ms of CPU) are required only when an account's adapter is built.
const dist = path.resolve(__dirname, '../../dist');
const loaded = (script: string): string[] => {
  const r = spawnSync(process.execPath, ['-e', script], { cwd: dist, encoding: 'utf8' });
  expect(r.status, r.stderr).toBe(0);
  return JSON.parse(r.stdout.trim().split('\n').pop()!) as string[];
};
const sdks = `JSON.stringify(['@adyen/api-library', 'stripe'].filter((m) => Object.keys(require.cache).some((k) => k.includes('/node_modules/' + m + '/'))))`;

describe('start-up imports', () => {
  it.each(['retry-worker', 'webhook-dispatcher', 'intake-api', 'submission-validator', 'refund-batcher'])(
    '%s loads without the Adyen and Stripe SDKs',
    (app) => {
      expect(loaded(`require('./apps/${app}/src/app.module.js'); console.log(${sdks})`)).toEqual([]);
    },
  );

  // terminus' @HealthCheck() requires @nestjs/swagger to decorate /readyz unless told not to (~200 ms of
  // CPU at every start); only the intake-api serves an OpenAPI document.
  it.each(['retry-worker', 'webhook-dispatcher', 'submission-validator', 'refund-batcher'])(
    '%s loads without @nestjs/swagger',
    (app) => {
      const swagger = `JSON.stringify(Object.keys(require.cache).filter((k) => k.includes('/node_modules/@nestjs/swagger/')).length)`;
      expect(loaded(`require('./apps/${app}/src/app.module.js'); console.log('[' + ${swagger} + ']')`)).toEqual([0]);
    },
  );

  it('an Adyen account adapter loads it, and works', () => {
    const script = `
      const p = require('./libs/processor/src/index.js');
      const a = p.accountAdapter({ processor: 'adyen', config: { api_key: 'k', merchant_account: 'M', raw_card_data: true } });
      console.log(JSON.stringify([a.name, ...JSON.parse(${sdks})]));`;
    expect(loaded(script)).toEqual(['adyen', '@adyen/api-library']);
  });

  it('a Stripe account adapter loads it, and works', () => {
    const script = `
      const p = require('./libs/processor/src/index.js');
      const a = p.accountAdapter({ processor: 'stripe', config: { secret_key: 'sk_test_x' } });
      console.log(JSON.stringify([a.name, ...JSON.parse(${sdks})]));`;
    expect(loaded(script)).toEqual(['stripe', 'stripe']);
  });
});
