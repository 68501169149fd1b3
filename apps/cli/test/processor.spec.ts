import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '@retain/config';
import { ProcessorAccountsRepository } from '@retain/db';
import {
  AdyenProcessor,
  ProcessorResolver,
  SandboxProcessor,
  MemorySandboxLedger,
  StripeProcessor,
  accountAccepts,
  accountSourceOf,
} from '@retain/processor';
import { closeTestDb, createMerchant, testDb } from '@retain/testing';

const main = path.resolve(__dirname, '../../../dist/apps/cli/src/main.js');
const run = (args: string[], env: NodeJS.ProcessEnv = process.env) =>
  spawnSync(process.execPath, [main, ...args], { env, encoding: 'utf8' });
const cli = (...args: string[]): any => {
  const r = run(args);
  if (r.status !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout);
};
const cliError = (...args: string[]): { stderr: string; error: string } => {
  const r = run(args);
  expect(r.status).toBe(1);
  return { stderr: r.stderr, error: JSON.parse(r.stderr.trim().split('\n').pop()!).error };
};

const STRIPE_KEY = `sk_test_${randomBytes(12).toString('hex')}`;
const ADYEN_KEY = `AQE${randomBytes(16).toString('hex')}`;
let dir = '';
const file = (name: string, content: unknown): string => {
  const p = path.join(dir, name);
  writeFileSync(p, typeof content === 'string' ? content : JSON.stringify(content));
  return p;
};

describe('retain processor set|list|remove (decisions §13)', () => {
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'retain-processor-cli-'));
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await closeTestDb();
  });

  it('stores accounts per division, sealed, and never prints a secret', async () => {
    const m = await createMerchant();
    const stripe = file('stripe.json', { secret_key: STRIPE_KEY, api_base: 'http://127.0.0.1:12111' });
    const adyen = file('adyen.json', {
      api_key: ADYEN_KEY,
      merchant_account: 'ShopECOM',
      checkout_url: 'https://checkout-test.adyen.com/v71',
      raw_card_data: true,
    });
    const set = cli('processor', 'set', '--login', m.login, '--processor', 'stripe', '--config-file', stripe);
    expect(set).toMatchObject({
      login: m.login,
      processor: 'stripe',
      division_number: null,
      raw_card_data: false,
      api_base: 'http://127.0.0.1:12111',
    });
    cli('processor', 'set', '--login', m.login, '--processor', 'adyen', '--division', 'EU1', '--config-file', adyen);
    const listed = cli('processor', 'list', '--login', m.login);
    expect(listed.accounts).toMatchObject([
      { processor: 'stripe', division_number: null },
      { processor: 'adyen', division_number: 'EU1', merchant_account: 'ShopECOM', raw_card_data: true },
    ]);
    const printed = JSON.stringify([set, listed]);
    expect(printed).not.toContain(STRIPE_KEY);
    expect(printed).not.toContain(ADYEN_KEY);
    expect(printed).not.toMatch(/secret_key|api_key/);

    // At rest the keys are sealed with the card data keys.
    const rows = await (
      await testDb()
    ).query(`SELECT a.* FROM processor_accounts a JOIN merchants m ON m.id = a.merchant_id WHERE m.login = $1`, [
      m.login,
    ]);
    expect(rows).toHaveLength(2);
    expect(JSON.stringify(rows)).not.toContain(STRIPE_KEY);
    expect(JSON.stringify(rows)).not.toContain(ADYEN_KEY);
  });

  it('a transaction is charged by its division account, else the default, else PROCESSOR', async () => {
    const m = await createMerchant();
    const db = await testDb();
    const keys = loadConfig('cli').cardKeys;
    const [{ id }] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [m.login]);
    const sandbox = new SandboxProcessor(new MemorySandboxLedger());
    const resolver = new ProcessorResolver(accountSourceOf(new ProcessorAccountsRepository(db, keys)), sandbox);
    expect(await resolver.forTransaction(id, 'EU1')).toBe(sandbox);

    cli(
      'processor',
      'set',
      '--login',
      m.login,
      '--processor',
      'stripe',
      '--config-file',
      file('s2.json', { secret_key: STRIPE_KEY }),
    );
    cli(
      'processor',
      'set',
      '--login',
      m.login,
      '--processor',
      'adyen',
      '--division',
      'EU1',
      '--config-file',
      file('a2.json', { api_key: ADYEN_KEY, merchant_account: 'ShopECOM' }),
    );
    expect(await resolver.forTransaction(id, 'EU1')).toBeInstanceOf(AdyenProcessor);
    expect(await resolver.forTransaction(id, 'US1')).toBeInstanceOf(StripeProcessor);
    expect(await resolver.forTransaction(id, null)).toBeInstanceOf(StripeProcessor);

    // A clear card cannot be charged by a tokens-only account (the review's RET011).
    const eu = await resolver.account(id, 'EU1');
    expect(accountAccepts(eu, { kind: 'pan' })).toBe(false);
    expect(accountAccepts(eu, { kind: 'token' })).toBe(true);

    expect(cli('processor', 'remove', '--login', m.login, '--division', 'EU1')).toMatchObject({ removed: true });
    expect(await resolver.forTransaction(id, 'EU1')).toBeInstanceOf(StripeProcessor);
    cli('processor', 'remove', '--login', m.login);
    expect(await resolver.forTransaction(id, 'EU1')).toBe(sandbox);
    expect(cliError('processor', 'remove', '--login', m.login).error).toMatch(/no default account/);
    // Removed accounts are retired, not deleted: what they charged is still looked up and refunded there.
    expect(await resolver.forAccount(eu!.id)).toBeInstanceOf(AdyenProcessor);
    expect(cli('processor', 'list', '--login', m.login).accounts).toEqual([]);
  });

  it('accounts survive a card data key rotation', async () => {
    const m = await createMerchant();
    cli(
      'processor',
      'set',
      '--login',
      m.login,
      '--processor',
      'stripe',
      '--config-file',
      file('s3.json', { secret_key: STRIPE_KEY }),
    );
    const db = await testDb();
    const [{ id }] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [m.login]);
    const old = loadConfig('cli').cardKeys;
    const rotated = [{ id: `k${randomBytes(3).toString('hex')}`, key: randomBytes(32) }, ...old];
    const repo = new ProcessorAccountsRepository(db, rotated);
    expect((await repo.forDivision(id, null))!.config).toEqual({ secret_key: STRIPE_KEY });
    expect(await repo.reseal()).toBeGreaterThan(0);
    const [row] = await db.query(`SELECT config_key_id FROM processor_accounts WHERE merchant_id = $1`, [id]);
    expect(row.config_key_id).toBe(rotated[0]!.id);
    expect((await repo.forDivision(id, 'any'))!.config).toEqual({ secret_key: STRIPE_KEY });
  });

  it('accepts any Stripe secret or restricted key of safe characters (decisions §13: "sk_...")', async () => {
    const m = await createMerchant();
    // Keys a test against a fake Stripe or a proxy uses: not only sk|rk _ test|live _ alphanumerics.
    for (const key of ['sk_test_e2e_fake', 'sk_test_retain_e2e', 'rk_live_51Hx_ABC09', 'sk_fake0']) {
      const set = cli(
        'processor',
        'set',
        '--login',
        m.login,
        '--processor',
        'stripe',
        '--config-file',
        file(`ok-${randomBytes(3).toString('hex')}.json`, { secret_key: key }),
      );
      expect(set).toMatchObject({ processor: 'stripe', division_number: null });
      expect(JSON.stringify(set)).not.toContain(key);
    }
  });

  it('rejects bad configs without echoing them', async () => {
    const m = await createMerchant();
    const bad = (processor: string, content: unknown) =>
      cliError(
        'processor',
        'set',
        '--login',
        m.login,
        '--processor',
        processor,
        '--config-file',
        file(`bad-${randomBytes(3).toString('hex')}.json`, content),
      );
    expect(bad('stripe', { secret_key: 'pk_test_publishable' }).error).toMatch(/secret_key/);
    // Garbage stays refused, and the message never echoes the value.
    for (const garbage of [
      'sk_',
      'sk___',
      'sk_test key',
      'sk_test_ab\n',
      'sk_test_ä1',
      'Bearer sk_test_x',
      'hunter2',
    ]) {
      const r = bad('stripe', { secret_key: garbage });
      expect(r.error).toMatch(/secret_key/);
      if (garbage !== 'sk_') expect(r.stderr).not.toContain(garbage); // (the message names the sk_ prefix)
    }
    expect(bad('stripe', { secret_key: `sk_test_${'a'.repeat(300)}` }).error).toMatch(/secret_key/);
    expect(bad('adyen', { api_key: ADYEN_KEY }).error).toMatch(/merchant_account/);
    expect(bad('stripe', { secret_key: STRIPE_KEY, api_base: 'ftp://x' }).error).toMatch(/api_base/);
    expect(bad('stripe', { secret_key: STRIPE_KEY, raw_card_data: 'yes' }).error).toMatch(/raw_card_data/);
    expect(bad('braintree', {}).error).toMatch(/unknown processor/);
    const garbled = bad('stripe', `{"secret_key": "${STRIPE_KEY}",`);
    expect(garbled.error).toMatch(/JSON/);
    expect(garbled.stderr).not.toContain(STRIPE_KEY);
    expect(cliError('processor', 'list', '--login', 'no-such-merchant').error).toMatch(/no merchant/);
  });
});
