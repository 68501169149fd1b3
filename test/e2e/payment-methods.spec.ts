import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { compactDecrypt, exportSPKI, generateKeyPair, type CryptoKey } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RetentionRepository } from '@retain/db';
import {
  ApiClient,
  WebhookReceiver,
  closeTestDb,
  createMerchant,
  startApp,
  testDb,
  txn,
  uniqueId,
  usePrivateDatabase,
  waitFor,
  type AppName,
  type RunningApp,
  type TestMerchant,
} from '@retain/testing';

// Issue 12 parts 1-3 / decisions §15: a customer's other payment methods, the account updater with
// the merchant's public key, network tokens; through the real apps and the sandbox's cards.
const cliMain = path.resolve(__dirname, '../../dist/apps/cli/src/main.js');
const FINAL = ['Captured', 'Cancelled', 'Stopped'];
const CRYPTOGRAM = 'AgAAAAAABk4DWZ4C28yUQAAAAAA=';
// Every attempt stays in flight this long after the processor answered (TEST_PAUSE_AFTER_PROCESSOR_MS):
// two charges of one customer at once would overlap.
const PAUSE_MS = 400;

describe('payment methods of an account, account updater, network tokens (end to end)', () => {
  // A 26-second recovery window: no room for other files' due attempts or learned slot statistics.
  usePrivateDatabase('pmt');
  const apps = new Map<AppName, RunningApp>();
  let receiver: WebhookReceiver;
  let keyed: TestMerchant;
  let plain: TestMerchant;
  let keyedApi: ApiClient;
  let plainApi: ApiClient;
  let privateKey: CryptoKey;
  let dir = '';
  let pem = '';
  /** Registers the merchant's updater public key (PEM) through the CLI, as an operator does. */
  const setUpdaterKey = (login: string): void => {
    const r = spawnSync(
      process.execPath,
      [cliMain, 'merchant', 'set-updater-key', '--login', login, '--public-key-file', pem],
      { encoding: 'utf8' },
    );
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({
      login,
      updated_numbers: 'jwe',
      updater_key: { alg: 'RSA-OAEP-256', kty: 'RSA' },
    });
  };

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'retain-e2e-pm-'));
    receiver = await new WebhookReceiver().start();
    // 100,000: the 30-day window is 26 s of real time. At 1,000,000 (2.6 s) the updater case ended Cancelled
    // in full runs: its two attempts came ~0.9 s and ~1.5 s after submission alone, and a loaded run's
    // latency closed the window before the renewed card's attempt.
    const env = { RETRY_TIME_SCALE: '100000', TEST_PAUSE_AFTER_PROCESSOR_MS: String(PAUSE_MS) };
    for (const app of ['intake-api', 'submission-validator', 'retry-worker', 'webhook-dispatcher'] as AppName[]) {
      apps.set(app, await startApp(app, { env }));
    }
    keyed = await createMerchant(receiver.url);
    plain = await createMerchant(receiver.url);
    keyedApi = new ApiClient(apps.get('intake-api')!.url, keyed.api_key);
    plainApi = new ApiClient(apps.get('intake-api')!.url, plain.api_key);
    // The merchant's key pair: the operator only ever gets the public half (PEM), through the CLI.
    const pair = await generateKeyPair('RSA-OAEP-256', { modulusLength: 2048, extractable: true });
    privateKey = pair.privateKey;
    pem = path.join(dir, 'updater.pem');
    writeFileSync(pem, await exportSPKI(pair.publicKey));
    setUpdaterKey(keyed.login);
  });
  afterAll(async () => {
    for (const a of apps.values()) await a.stop();
    await receiver.stop();
    await closeTestDb();
    rmSync(dir, { recursive: true, force: true });
  });

  const related = async (api: ApiClient, id: string): Promise<any[]> =>
    (await api.request('GET', `/v1/retain/transactions/${id}?related=true`)).json.data;
  const untilFinal = async (api: ApiClient, id: string): Promise<any[]> => {
    // Generous: on a loaded two-core machine the updater case once took over a minute (a fresh-clone CI
    // run; 2 s alone). The tests check what happens, not how fast.
    await waitFor(async () => FINAL.includes((await related(api, id))[0]?.status), {
      timeoutMs: 140_000,
      what: `${id} final`,
    });
    return related(api, id);
  };
  const submit = async (api: ApiClient, t: Record<string, unknown>): Promise<string> => {
    const r = await api.submit([t]);
    expect(r.status, r.text).toBe(200);
    return t['id'] as string;
  };
  /** A transaction of `accountId` paid with `card` under payment method id `pmId`. */
  const ofAccount = (
    accountId: string,
    pmId: string,
    card: string,
    expiry = '202912',
    extra: Record<string, unknown> = {},
  ): Record<string, unknown> => {
    const t = txn({}, card);
    return {
      ...t,
      account: { id: accountId },
      payment_method: {
        ...(t['payment_method'] as object),
        id: pmId,
        credit_card: { account: card, expiration_date: expiry },
      },
      ...extra,
    };
  };
  const networkToken = (accountId: string, last4: string): Record<string, unknown> => {
    const t = txn();
    return {
      ...t,
      account: { id: accountId },
      is_network_token: 1,
      cryptogram: CRYPTOGRAM,
      eci_indicator: '05',
      payment_method: {
        ...(t['payment_method'] as object),
        id: `ntok_sandbox_${last4}`,
        is_tokenized: true,
        credit_card: { account: '400000', expiration_date: '202912' },
      },
    };
  };
  /** A transaction of `accountId` paid with the sandbox token `tok_sandbox_<last4>` (decisions §12), BIN and expiry beside it. */
  const tokenized = (
    accountId: string,
    last4: string,
    expiry: string,
    extra: Record<string, unknown> = {},
  ): Record<string, unknown> => {
    const t = txn();
    return {
      ...t,
      account: { id: accountId },
      payment_method: {
        ...(t['payment_method'] as object),
        id: `tok_sandbox_${last4}`,
        is_tokenized: true,
        credit_card: { account: '400000', expiration_date: expiry },
      },
      ...extra,
    };
  };
  /** A merchant of its own: a sandbox card's network-rule history (a 54 on its data) is per merchant. */
  const freshMerchant = async (withKey = false): Promise<{ api: ApiClient; login: string }> => {
    const m = await createMerchant(receiver.url);
    if (withKey) setUpdaterKey(m.login);
    return { api: new ApiClient(apps.get('intake-api')!.url, m.api_key), login: m.login };
  };
  const paymentMethodOf = async (id: string): Promise<any> =>
    (
      await (
        await testDb()
      ).query(
        `SELECT p.pm_id, p.card_kind, p.card_enc, p.expiration_date, p.account_updated, p.account_update_jwe,
                p.ended_at, p.ended_reason
           FROM payment_methods p JOIN transactions t ON t.payment_method_ref = p.id WHERE t.merchant_txn_id = $1`,
        [id],
      )
    )[0];
  const decrypt = async (jwe: string): Promise<unknown> =>
    JSON.parse(new TextDecoder().decode((await compactDecrypt(jwe, privateKey)).plaintext));

  it(
    '4000000000000341: the updater renews the expiry, the next attempt is approved, the JWE opens with the private key',
    { timeout: 150_000 },
    async () => {
      const id = await submit(keyedApi, ofAccount(uniqueId('acct'), uniqueId('pm'), '4000000000000341', '202701'));
      const [t, ...attempts] = await untilFinal(keyedApi, id);
      // On failure, what the recovery did instead: its attempts, and the plan it ended on.
      const story = JSON.stringify({
        status: t.status,
        auth_code_description: t.auth_code_description,
        attempts: attempts.map((a) => [a.auth_code, a.status, a.timestamp ?? a.created_at]),
        plan: (
          await (
            await testDb()
          ).query(
            `SELECT next_attempt_plan, status_changed_at, now() AS db_now FROM transactions WHERE merchant_txn_id = $1`,
            [id],
          )
        )[0],
      });
      expect(t.status, story).toBe('Captured');
      expect(attempts.map((a) => [a.auth_code, a.status])).toEqual([
        ['54', 'Failed'],
        ['00', 'Captured'],
      ]);
      const month = new Date().getUTCFullYear() * 100 + new Date().getUTCMonth() + 1;
      const renewed = String(Math.max(202701, month) + 300);
      for (const shown of [t.payment_method.credit_card, attempts[1].payment_method.credit_card]) {
        expect(shown).toMatchObject({ account: '400000******0341', expiration_date: renewed, account_updated: true });
        expect(await decrypt(shown.account_update_jwe)).toEqual({
          account: '4000000000000341',
          expiration_date: renewed,
        });
      }
      // The declined attempt shows the card as it was charged then.
      expect(attempts[0].payment_method.credit_card).toMatchObject({
        expiration_date: '202701',
        account_updated: false,
      });
      expect(attempts[0].payment_method.credit_card.account_update_jwe).toBeUndefined();
      // The push carries the JWE too, never the clear number.
      await waitFor(() => receiver.byEvent('retry succeeded').some((p) => p.body.header['transaction_id'] === id), {
        what: 'retry succeeded push',
      });
      const push = receiver.byEvent('retry succeeded').find((p) => p.body.header['transaction_id'] === id)!;
      const card = (push.body.content as any).payment_method.credit_card;
      expect(card.account_updated).toBe(true);
      expect(await decrypt(card.account_update_jwe)).toMatchObject({ account: '4000000000000341' });
      expect(JSON.stringify(push.body)).not.toContain('4000000000000341');
    },
  );

  it(
    'an expired card is renewed by the updater before it is charged: approved on the first attempt',
    { timeout: 150_000 },
    async () => {
      const id = await submit(keyedApi, ofAccount(uniqueId('acct'), uniqueId('pm'), '4000000000000341', '202501'));
      const [t, ...attempts] = await untilFinal(keyedApi, id);
      expect(t.status).toBe('Captured');
      // Three years after its expiry (decisions §15), a date in the future here.
      expect(attempts.map((a) => [a.auth_code, a.payment_method.credit_card.expiration_date])).toEqual([
        ['00', '202801'],
      ]);
      expect(t.payment_method.credit_card.account_updated).toBe(true);
    },
  );

  it(
    'an expired card of a merchant without an updater key is renewed too (decisions §15: the updater runs for every merchant)',
    { timeout: 150_000 },
    async () => {
      const id = await submit(plainApi, ofAccount(uniqueId('acct'), uniqueId('pm'), '4000000000000341', '202501'));
      const [t, ...attempts] = await untilFinal(plainApi, id);
      expect(t.status, JSON.stringify(attempts)).toBe('Captured');
      expect(attempts.map((a) => [a.auth_code, a.payment_method.credit_card.expiration_date])).toEqual([
        ['00', '202801'],
      ]);
      expect(t.payment_method.credit_card.account_update_jwe).toBeUndefined();
    },
  );

  it(
    'an expired card the account updater has nothing new for is never charged: Cancelled with a retry failed push',
    { timeout: 150_000 },
    async () => {
      const id = await submit(plainApi, ofAccount(uniqueId('acct'), uniqueId('pm'), '4111111111111111', '202501'));
      const [t, ...attempts] = await untilFinal(plainApi, id);
      // README, the retry policy: "a card past its expiry … nothing new → the account's next payment method, else stop".
      expect([t.status, attempts.map((a) => [a.auth_code, a.payment_method.credit_card.expiration_date])]).toEqual([
        'Cancelled',
        [],
      ]);
      await waitFor(() => receiver.byEvent('retry failed').some((p) => p.body.header['transaction_id'] === id), {
        what: `${id} retry failed push`,
      });
    },
  );

  it(
    'an expired card the account updater has nothing new for gives way to the account’s next payment method',
    { timeout: 150_000 },
    async () => {
      const account = uniqueId('acct');
      const backup = uniqueId('pm');
      expect(
        (await untilFinal(plainApi, await submit(plainApi, ofAccount(account, backup, '5555555555554444'))))[0].status,
      ).toBe('Captured');
      const id = await submit(plainApi, ofAccount(account, uniqueId('pm'), '4111111111111111', '202501'));
      const [t, ...attempts] = await untilFinal(plainApi, id);
      expect([
        t.status,
        attempts.map((a) => [a.payment_method.id, a.payment_method.credit_card.expiration_date]),
      ]).toEqual(['Captured', [[backup, '202912']]]);
    },
  );

  it(
    '4000000000000341 submitted with its own 54: the updater renews it before the first attempt, which is approved',
    { timeout: 150_000 },
    async () => {
      const account = uniqueId('acct');
      const pm = uniqueId('pm');
      const id = await submit(keyedApi, ofAccount(account, pm, '4000000000000341', '202701', { auth_code: '54' }));
      const [t, ...attempts] = await untilFinal(keyedApi, id);
      const month = new Date().getUTCFullYear() * 100 + new Date().getUTCMonth() + 1;
      const renewed = String(Math.max(202701, month) + 300);
      expect(t.status, JSON.stringify(attempts)).toBe('Captured');
      // decisions §15: no charge on the data the issuer declined; the first attempt goes out renewed.
      expect(attempts.map((a) => [a.auth_code, a.payment_method.credit_card.expiration_date])).toEqual([
        ['00', renewed],
      ]);
      // Planned, and explained, by the transaction's own policy like every attempt (README, the retry policy).
      expect(attempts[0].retry_plan).toMatchObject({
        rule: expect.any(String),
        policy_version: attempts[0].metadata['retain:policy_version'],
      });
      expect(t.payment_method.credit_card).toMatchObject({ expiration_date: renewed, account_updated: true });
      const [row] = await (
        await testDb()
      ).query(
        `SELECT p.ended_at FROM payment_methods p JOIN transactions t ON t.payment_method_ref = p.id
          WHERE t.merchant_txn_id = $1`,
        [id],
      );
      expect(row.ended_at).toBeNull();
    },
  );

  it(
    '4000000000000341 renewed by the updater, then the next period submitted with the data the merchant has (the old expiry): charged with the renewed data',
    { timeout: 300_000 },
    async () => {
      // A merchant of its own: the other cases' 54 on 4000000000000341 (202701) stays in this merchant's card
      // history otherwise, and the first transaction would never be attempted.
      const api = new ApiClient(apps.get('intake-api')!.url, (await createMerchant(receiver.url)).api_key);
      const account = uniqueId('acct');
      const pm = uniqueId('pm');
      const month = new Date().getUTCFullYear() * 100 + new Date().getUTCMonth() + 1;
      const renewed = String(Math.max(202701, month) + 300);
      const first = await submit(api, ofAccount(account, pm, '4000000000000341', '202701'));
      const [t1, ...a1] = await untilFinal(api, first);
      expect(t1.status, JSON.stringify(a1)).toBe('Captured');
      expect(t1.payment_method.credit_card).toMatchObject({ expiration_date: renewed, account_updated: true });
      // The merchant does not know of the renewal (no updater key: masked values only): it sends the card it has again.
      const id = await submit(api, ofAccount(account, pm, '4000000000000341', '202701'));
      const [t, ...attempts] = await untilFinal(api, id);
      // Stale data, not newer: the payment method keeps the updater's renewal and the transaction charges it.
      expect(
        [t.status, attempts.map((a) => [a.auth_code, a.payment_method.credit_card.expiration_date])],
        JSON.stringify(attempts),
      ).toEqual(['Captured', [['00', renewed]]]);
      expect(t.payment_method.credit_card).toMatchObject({ expiration_date: renewed, account_updated: true });
      const rows = await (
        await testDb()
      ).query(
        `SELECT p.expiration_date, p.account_updated, p.ended_at FROM payment_methods p
          JOIN transactions t ON t.payment_method_ref = p.id WHERE t.merchant_txn_id = $1`,
        [id],
      );
      expect(rows).toEqual([{ expiration_date: renewed, account_updated: true, ended_at: null }]);
    },
  );

  it(
    'a saved token whose hash retention erased is still the account’s next payment method (its token is no card data)',
    { timeout: 150_000 },
    async () => {
      const account = uniqueId('acct');
      // Year 1: the customer's token, sent with the merchant's account_hash, captured.
      const saved = tokenized(account, '1111', '202912');
      (saved['payment_method'] as { credit_card: Record<string, string> }).credit_card['account_hash'] =
        '9c0cb6dbe3e4e5da1c8d4bb6af5ae9b0e6f5d2a1';
      expect((await untilFinal(plainApi, await submit(plainApi, saved)))[0].status).toBe('Captured');
      // 200 days on, retention erases the hash of both (CARD_DATA_ERASE_AFTER 180d); the token stays.
      const db = await testDb();
      await db.query(
        `UPDATE transactions SET status_changed_at = now() - interval '200 days' WHERE merchant_txn_id = $1`,
        [saved['id']],
      );
      await db.query(
        `UPDATE payment_methods SET last_seen_at = now() - interval '200 days'
          WHERE id = (SELECT payment_method_ref FROM transactions WHERE merchant_txn_id = $1)`,
        [saved['id']],
      );
      const before = new Date(Date.now() - 180 * 86_400_000);
      await RetentionRepository.transactionCardData(db, before, 1000, new Date(Date.now() - 86_400_000));
      await RetentionRepository.paymentMethodCardData(db, before, 1000);
      const [pm] = await db.query(
        `SELECT account_hash, card_erased_at IS NOT NULL AS erased FROM payment_methods
          WHERE id = (SELECT payment_method_ref FROM transactions WHERE merchant_txn_id = $1)`,
        [saved['id']],
      );
      expect(pm).toEqual({ account_hash: null, erased: true });
      // Year 2: a card that expired (nothing to renew it) gives way to the saved token, as a token sent
      // without a hash would.
      const id = await submit(plainApi, ofAccount(account, uniqueId('pm'), '4111111111111111', '202501'));
      const [t, ...attempts] = await untilFinal(plainApi, id);
      expect([t.status, attempts.map((a) => a.payment_method.id)]).toEqual(['Captured', ['tok_sandbox_1111']]);
    },
  );

  it(
    '4000000000000341 renewed by the updater, its card data erased by retention, then the next year submitted with the old expiry: charged with the renewed expiry',
    { timeout: 300_000 },
    async () => {
      const api = new ApiClient(apps.get('intake-api')!.url, (await createMerchant(receiver.url)).api_key);
      const account = uniqueId('acct');
      const pm = uniqueId('pm');
      const month = new Date().getUTCFullYear() * 100 + new Date().getUTCMonth() + 1;
      const renewed = String(Math.max(202701, month) + 300);
      // Year 1: declined 54, renewed by the updater, captured on the renewed expiry.
      const first = await submit(api, ofAccount(account, pm, '4000000000000341', '202701'));
      const [t1, ...a1] = await untilFinal(api, first);
      expect(t1.status, JSON.stringify(a1)).toBe('Captured');
      const db = await testDb();
      const [{ pmRef }] = await db.query(
        `SELECT payment_method_ref AS "pmRef" FROM transactions WHERE merchant_txn_id = $1`,
        [first],
      );
      // 200 days on (the transaction ended, the payment method last seen, then), retention erases the card data
      // of both at its defaults (CARD_DATA_ERASE_AFTER 180d): the renewed expiry and the updater's fields stay.
      await db.query(
        `UPDATE transactions SET status_changed_at = now() - interval '200 days' WHERE merchant_txn_id = $1`,
        [first],
      );
      await db.query(`UPDATE payment_methods SET last_seen_at = now() - interval '200 days' WHERE id = $1`, [pmRef]);
      const before = new Date(Date.now() - 180 * 86_400_000);
      await RetentionRepository.transactionCardData(db, before, 1000, new Date(Date.now() - 86_400_000));
      await RetentionRepository.paymentMethodCardData(db, before, 1000);
      expect(
        (
          await db.query(
            `SELECT card_enc, card_erased_at IS NOT NULL AS erased, expiration_date, account_updated,
                    account_update_replaced->>'expiration_date' AS replaced
               FROM payment_methods WHERE id = $1`,
            [pmRef],
          )
        )[0],
      ).toEqual({ card_enc: null, erased: true, expiration_date: renewed, account_updated: true, replaced: '202701' });
      // Year 2: the merchant sends the card it has, the old expiry, for the same customer and payment method.
      const id = await submit(api, ofAccount(account, pm, '4000000000000341', '202701'));
      const [t, ...attempts] = await untilFinal(api, id);
      expect(
        [t.status, attempts.map((a) => [a.auth_code, a.payment_method.credit_card.expiration_date])],
        JSON.stringify(attempts),
      ).toEqual(['Captured', [['00', renewed]]]);
      expect(t.payment_method.credit_card).toMatchObject({ expiration_date: renewed, account_updated: true });
      // The payment method holds the merchant's card data again (its number was erased), with the renewed expiry.
      const [row] = await db.query(
        `SELECT card_enc IS NOT NULL AS held, card_erased_at, expiration_date, account_updated, ended_at
           FROM payment_methods WHERE id = $1`,
        [pmRef],
      );
      expect(row).toEqual({
        held: true,
        card_erased_at: null,
        expiration_date: renewed,
        account_updated: true,
        ended_at: null,
      });
    },
  );

  it('an original 41 is never followed by a charge of the same card under the account’s other payment method id', async () => {
    const account = uniqueId('acct');
    const card = '4111111111111111';
    const saved = uniqueId('pm');
    expect((await untilFinal(plainApi, await submit(plainApi, ofAccount(account, saved, card))))[0].status).toBe(
      'Captured',
    );
    // The same card number under another id: the fallback must not take `saved` (same card) after a 41.
    const id = await submit(plainApi, ofAccount(account, uniqueId('pm'), card, '202912', { auth_code: '41' }));
    const [t, ...attempts] = await untilFinal(plainApi, id);
    expect(attempts.map((a) => [a.auth_code, a.payment_method.id])).toEqual([]);
    expect(t.status).toBe('Cancelled');
  });

  it('an original 41 dated in the future still forbids a charge of the same card under the account’s other payment method id', async () => {
    const account = uniqueId('acct');
    const card = '4111111111111111';
    const saved = uniqueId('pm');
    expect((await untilFinal(plainApi, await submit(plainApi, ofAccount(account, saved, card))))[0].status).toBe(
      'Captured',
    );
    // The merchant's clock (or its data) 3 h ahead: the 41 is recorded at that time, after the fallback's
    // "may we charge now"; "none, ever" holds from the moment it is known.
    const timestamp = new Date(Date.now() + 3 * 3_600_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
    const id = await submit(
      plainApi,
      ofAccount(account, uniqueId('pm'), card, '202912', { auth_code: '41', timestamp }),
    );
    const [t, ...attempts] = await untilFinal(plainApi, id);
    expect([t.status, attempts.map((a) => [a.auth_code, a.payment_method.id])]).toEqual(['Cancelled', []]);
  });

  it('an original 1A on a Mastercard ends that payment method (no merchant-initiated retry can authenticate)', async () => {
    const account = uniqueId('acct');
    const backup = uniqueId('pm');
    expect(
      (await untilFinal(plainApi, await submit(plainApi, ofAccount(account, backup, '4111111111111111'))))[0].status,
    ).toBe('Captured');
    const mc = uniqueId('pm');
    const id = await submit(plainApi, ofAccount(account, mc, '5555555555554444', '202912', { auth_code: '1A' }));
    const [t, ...attempts] = await untilFinal(plainApi, id);
    expect([t.status, attempts.map((a) => a.payment_method.id)]).toEqual(['Captured', [backup]]);
    const [row] = await (
      await testDb()
    ).query(
      `SELECT p.ended_at FROM payment_methods p JOIN merchants m ON m.id = p.merchant_id
        WHERE m.login = $1 AND p.pm_id = $2`,
      [plain.login, mc],
    );
    expect(row.ended_at).not.toBeNull();
  });

  for (const code of ['1A', '70']) {
    it(`an original ${code} is never followed by a charge of the same card under the account’s other payment method id`, async () => {
      const account = uniqueId('acct');
      const saved = uniqueId('pm');
      expect(
        (await untilFinal(plainApi, await submit(plainApi, ofAccount(account, saved, '5555555555554444'))))[0].status,
      ).toBe('Captured');
      // README: authentication needed, "no merchant-initiated retry can pass it": the card, whatever its id.
      const id = await submit(
        plainApi,
        ofAccount(account, uniqueId('pm'), '5555555555554444', '202912', { auth_code: code }),
      );
      const [t, ...attempts] = await untilFinal(plainApi, id);
      expect([t.status, attempts.map((a) => [a.auth_code, a.payment_method.id])]).toEqual(['Cancelled', []]);
      await waitFor(() => receiver.byEvent('retry failed').some((p) => p.body.header['transaction_id'] === id), {
        what: `${id} retry failed push`,
      });
    });
  }

  it('4000000000000341 without a registered key: the updater still renews it (decisions §15), only masked values, no JWE', async () => {
    const id = await submit(plainApi, ofAccount(uniqueId('acct'), uniqueId('pm'), '4000000000000341', '202701'));
    const [t, ...attempts] = await untilFinal(plainApi, id);
    expect(t.status).toBe('Captured');
    expect(attempts.map((a) => a.auth_code)).toEqual(['54', '00']);
    expect(t.payment_method.credit_card).toMatchObject({
      account: '400000******0341',
      expiration_date: '203001',
      account_updated: true,
    });
    // The full updated number goes out only encrypted to a key the merchant registered.
    expect(t.payment_method.credit_card.account_update_jwe).toBeUndefined();
  });

  it('4000000000000259: the updater answers "account closed": no further attempt on the card', async () => {
    const id = await submit(keyedApi, ofAccount(uniqueId('acct'), uniqueId('pm'), '4000000000000259'));
    const [t, ...attempts] = await untilFinal(keyedApi, id);
    expect(t.status).toBe('Cancelled');
    expect(attempts.map((a) => a.auth_code)).toEqual(['54']);
    expect(t.payment_method.credit_card.account_updated).toBe(false);
    const db = await testDb();
    const [pm] = await db.query(
      `SELECT p.ended_reason FROM payment_methods p JOIN transactions t ON t.payment_method_ref = p.id
        WHERE t.merchant_txn_id = $1`,
      [id],
    );
    expect(pm.ended_reason).toMatch(/account closed/i);
  });

  it(
    'tok_sandbox_0341 (a sandbox token of 4000000000000341): the updater renews its expiry, the token is charged with it and approved',
    { timeout: 150_000 },
    async () => {
      // A merchant with an updater key: a token's update is still shown masked only (no card number to hand back).
      const { api } = await freshMerchant(true);
      const id = await submit(api, tokenized(uniqueId('acct'), '0341', '202701'));
      const [t, ...attempts] = await untilFinal(api, id);
      const month = new Date().getUTCFullYear() * 100 + new Date().getUTCMonth() + 1;
      const renewed = String(Math.max(202701, month) + 300);
      expect(t.status, JSON.stringify(attempts.map((a) => [a.auth_code, a.status]))).toBe('Captured');
      expect(attempts.map((a) => [a.auth_code, a.status, a.payment_method.id])).toEqual([
        ['54', 'Failed', 'tok_sandbox_0341'],
        ['00', 'Captured', 'tok_sandbox_0341'],
      ]);
      for (const shown of [t.payment_method, attempts[1].payment_method]) {
        expect(shown).toMatchObject({ id: 'tok_sandbox_0341', is_tokenized: true });
        expect(shown.credit_card).toMatchObject({ expiration_date: renewed, account_updated: true });
        expect(shown.credit_card.account_update_jwe).toBeUndefined();
      }
      expect(attempts[0].payment_method.credit_card).toMatchObject({
        expiration_date: '202701',
        account_updated: false,
      });
      // The token stays the instrument: no card number is stored for it.
      expect(await paymentMethodOf(id)).toMatchObject({
        pm_id: 'tok_sandbox_0341',
        card_kind: 'token',
        card_enc: null,
        expiration_date: renewed,
        account_updated: true,
        account_update_jwe: null,
        ended_at: null,
      });
    },
  );

  for (const [what, make] of [
    ['tok_sandbox_0341', (account: string) => tokenized(account, '0341', '')],
    ['ntok_sandbox_0341', (account: string) => networkToken(account, '0341')],
  ] as const) {
    it(
      `${what} sent without an expiry (optional for tokens): renewed by the updater, the next attempt goes out with it and is approved`,
      { timeout: 150_000 },
      async () => {
        const { api } = await freshMerchant();
        const t0 = make(uniqueId('acct'));
        const pm = t0['payment_method'] as Record<string, unknown>;
        const id = await submit(api, { ...t0, payment_method: { ...pm, credit_card: { account: '400000' } } });
        const [t, ...attempts] = await untilFinal(api, id);
        // The 54 blocks the token's data as sent (no expiry); the updater's expiry is new data (network-rules.md).
        expect([t.status, attempts.map((a) => [a.auth_code, a.payment_method.credit_card.expiration_date])]).toEqual([
          'Captured',
          [
            ['54', null],
            ['00', t.payment_method.credit_card.expiration_date],
          ],
        ]);
        expect(t.payment_method.credit_card).toMatchObject({
          account_updated: true,
          expiration_date: expect.any(String),
        });
      },
    );
  }

  it('tok_sandbox_0259: the updater answers "account closed": the token ends, no further attempt', async () => {
    const { api } = await freshMerchant();
    const id = await submit(api, tokenized(uniqueId('acct'), '0259', '202912'));
    const [t, ...attempts] = await untilFinal(api, id);
    expect(t.status).toBe('Cancelled');
    expect(attempts.map((a) => [a.auth_code, a.payment_method.id])).toEqual([['54', 'tok_sandbox_0259']]);
    expect(t.payment_method.credit_card.account_updated).toBe(false);
    const pm = await paymentMethodOf(id);
    expect(pm.ended_at).not.toBeNull();
    expect(pm.ended_reason).toMatch(/account closed/i);
  });

  it(
    'an expired tok_sandbox_0341 is renewed by the updater before it is charged: approved on the first attempt',
    { timeout: 150_000 },
    async () => {
      const { api } = await freshMerchant();
      const id = await submit(api, tokenized(uniqueId('acct'), '0341', '202501'));
      const [t, ...attempts] = await untilFinal(api, id);
      expect(t.status, JSON.stringify(attempts.map((a) => a.auth_code))).toBe('Captured');
      expect(attempts.map((a) => [a.auth_code, a.payment_method.credit_card.expiration_date])).toEqual([
        ['00', '202801'],
      ]);
      expect(t.payment_method.credit_card.account_updated).toBe(true);
    },
  );

  it(
    'tok_sandbox_0341 submitted with its own 54: the updater renews it before the first attempt, which is approved',
    { timeout: 150_000 },
    async () => {
      const { api } = await freshMerchant();
      const id = await submit(api, tokenized(uniqueId('acct'), '0341', '202701', { auth_code: '54' }));
      const [t, ...attempts] = await untilFinal(api, id);
      const month = new Date().getUTCFullYear() * 100 + new Date().getUTCMonth() + 1;
      const renewed = String(Math.max(202701, month) + 300);
      expect(t.status, JSON.stringify(attempts.map((a) => a.auth_code))).toBe('Captured');
      expect(attempts.map((a) => [a.auth_code, a.payment_method.credit_card.expiration_date])).toEqual([
        ['00', renewed],
      ]);
    },
  );

  it(
    'a network token ntok_sandbox_0341: the updater renews its expiry, the next attempt is approved',
    { timeout: 150_000 },
    async () => {
      const { api } = await freshMerchant();
      const t0 = networkToken(uniqueId('acct'), '0341');
      const id = await submit(api, {
        ...t0,
        payment_method: {
          ...(t0['payment_method'] as object),
          credit_card: { account: '400000', expiration_date: '202701' },
        },
      });
      const [t, ...attempts] = await untilFinal(api, id);
      const month = new Date().getUTCFullYear() * 100 + new Date().getUTCMonth() + 1;
      const renewed = String(Math.max(202701, month) + 300);
      expect(t.status, JSON.stringify(attempts.map((a) => a.auth_code))).toBe('Captured');
      expect(attempts.map((a) => [a.auth_code, a.is_network_token, a.payment_method.id])).toEqual([
        ['54', 1, 'ntok_sandbox_0341'],
        ['00', 1, 'ntok_sandbox_0341'],
      ]);
      expect(t.payment_method.credit_card).toMatchObject({ expiration_date: renewed, account_updated: true });
    },
  );

  it('4000000000000507 (46, Visa category 1) ends that card, not the transaction: the account’s other card is charged', async () => {
    const account = uniqueId('acct');
    const backup = uniqueId('pm');
    const first = await submit(plainApi, ofAccount(account, backup, '5555555555554444'));
    expect((await untilFinal(plainApi, first))[0].status).toBe('Captured');
    const closed = uniqueId('pm');
    const id = await submit(plainApi, ofAccount(account, closed, '4000000000000507'));
    const [t, ...attempts] = await untilFinal(plainApi, id);
    expect(t.status).toBe('Captured');
    expect(attempts.map((a) => [a.auth_code, a.auth_code_description, a.payment_method.id])).toEqual([
      ['46', 'Hard Failure', closed],
      ['00', null, backup],
    ]);
    expect(attempts[0].payment_method.credit_card.account).toBe('400000******0507');
    expect(attempts[1].payment_method.credit_card.account).toBe('555555******4444');
  });

  it('a hard decline (41) on the primary card falls back to the account’s most recently seen card', async () => {
    const account = uniqueId('acct');
    const older = uniqueId('pm');
    const newer = uniqueId('pm');
    for (const [pm, card] of [
      [older, '5555555555554444'],
      [newer, '4111111111111111'],
    ] as const) {
      expect((await untilFinal(plainApi, await submit(plainApi, ofAccount(account, pm, card))))[0].status).toBe(
        'Captured',
      );
    }
    const lost = uniqueId('pm');
    const id = await submit(plainApi, ofAccount(account, lost, '4100000000000019'));
    const [t, ...attempts] = await untilFinal(plainApi, id);
    expect(t.status).toBe('Captured');
    expect(attempts.map((a) => a.payment_method.id)).toEqual([lost, newer]);
  });

  it('the primary payment method is tried before a more recently seen one', async () => {
    // A merchant of its own: an earlier test's 41 on 4100000000000019 bans that card for good for its
    // merchant (network-rules.md: category 1, "none, ever"), and this one needs the 41 to happen here.
    const plainApi = new ApiClient(apps.get('intake-api')!.url, (await createMerchant(receiver.url)).api_key);
    const account = uniqueId('acct');
    const primary = uniqueId('pm');
    const recent = uniqueId('pm');
    const withPrimary = (t: Record<string, unknown>, flag: number): Record<string, unknown> => ({
      ...t,
      payment_method: { ...(t['payment_method'] as object), primary: flag },
    });
    for (const [pm, card, flag] of [
      [primary, '5555555555554444', 1],
      [recent, '4111111111111111', 0],
    ] as const) {
      const id = await submit(plainApi, withPrimary(ofAccount(account, pm, card), flag));
      expect((await untilFinal(plainApi, id))[0].status).toBe('Captured');
    }
    const lost = uniqueId('pm');
    const id = await submit(plainApi, withPrimary(ofAccount(account, lost, '4100000000000019', '202811'), 0));
    const [t, ...attempts] = await untilFinal(plainApi, id);
    expect(t.status).toBe('Captured');
    expect(attempts.map((a) => [a.payment_method.id, a.payment_method.primary])).toEqual([
      [lost, 0],
      [primary, 1],
    ]);
  });

  it('an original auth_code that is never retried moves to the account’s other card at review', async () => {
    const account = uniqueId('acct');
    const backup = uniqueId('pm');
    expect(
      (await untilFinal(plainApi, await submit(plainApi, ofAccount(account, backup, '4111111111111111'))))[0].status,
    ).toBe('Captured');
    const id = await submit(
      plainApi,
      ofAccount(account, uniqueId('pm'), '4000000000000002', '202912', { auth_code: '41' }),
    );
    const [t, ...attempts] = await untilFinal(plainApi, id);
    expect(t.status).toBe('Captured');
    expect(attempts.map((a) => [a.auth_code, a.payment_method.id])).toEqual([['00', backup]]);
    expect(attempts[0].retry_plan).toMatchObject({
      rule: expect.any(String),
      policy_version: attempts[0].metadata['retain:policy_version'],
    });
  });

  // README, the retry policy: 13, 62, … and the hard codes stop at once, "the account's next payment method, else
  // Cancelled"; the original decline belongs to the submitted card, not to the one moved to.
  for (const code of ['62', '13', '12', 'R0']) {
    it(`an original ${code} (never recovers) moves to the account’s other card at review, which is charged`, async () => {
      const account = uniqueId('acct');
      const backup = uniqueId('pm');
      expect(
        (await untilFinal(plainApi, await submit(plainApi, ofAccount(account, backup, '4111111111111111'))))[0].status,
      ).toBe('Captured');
      const id = await submit(
        plainApi,
        ofAccount(account, uniqueId('pm'), '5555555555554444', '202912', { auth_code: code }),
      );
      const [t, ...attempts] = await untilFinal(plainApi, id);
      expect([t.status, attempts.map((a) => [a.auth_code, a.payment_method.id])]).toEqual([
        'Captured',
        [['00', backup]],
      ]);
    });
  }

  it('after an original 62 moved to the account’s other card, that card’s own soft declines are retried as their class', async () => {
    const account = uniqueId('acct');
    const backup = uniqueId('pm');
    // 4000000000000077: 51 on a transaction's attempts 1-2, approved on its attempt 3.
    const first = await submit(plainApi, ofAccount(account, backup, '4000000000000077'));
    expect((await untilFinal(plainApi, first))[0].status).toBe('Captured');
    const id = await submit(
      plainApi,
      ofAccount(account, uniqueId('pm'), '5555555555554444', '202912', { auth_code: '62' }),
    );
    const [t, ...attempts] = await untilFinal(plainApi, id);
    expect([t.status, attempts.map((a) => [a.auth_code, a.payment_method.id])]).toEqual([
      'Captured',
      [
        ['51', backup],
        ['51', backup],
        ['00', backup],
      ],
    ]);
  });

  it('a network token is charged with its cryptogram and ECI as the card of its last 4 digits', async () => {
    const id = await submit(plainApi, networkToken(uniqueId('acct'), '1111'));
    const [t, ...attempts] = await untilFinal(plainApi, id);
    expect(t.status).toBe('Captured');
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({
      is_network_token: 1,
      eci_indicator: '05',
      payment_method: { id: 'ntok_sandbox_1111' },
    });
    // The cryptogram is a secret: never in a response or a push.
    expect(JSON.stringify([t, ...attempts])).not.toContain(CRYPTOGRAM);
    // Stored only sealed, in the payment method (the transaction's clear copy from the intake is dropped at review).
    const db = await testDb();
    const [row] = await db.query(
      `SELECT t.cryptogram, p.cryptogram_enc FROM transactions t JOIN payment_methods p ON p.id = t.payment_method_ref
        WHERE t.merchant_txn_id = $1`,
      [id],
    );
    expect(row.cryptogram).toBeNull();
    expect(row.cryptogram_enc).toMatch(/\./);
    expect(row.cryptogram_enc).not.toContain(CRYPTOGRAM);
  });

  it('a 46 on a network token ends that token and falls back to the account’s other payment method', async () => {
    // Another merchant than the 0507 card's test: network limits count per card per merchant, and a
    // token shares its card's history (the card ending 0507 is blocked for good at that merchant).
    const account = uniqueId('acct');
    const card = uniqueId('pm');
    const first = await submit(keyedApi, ofAccount(account, card, '4111111111111111'));
    expect((await untilFinal(keyedApi, first))[0].status).toBe('Captured');
    const id = await submit(keyedApi, networkToken(account, '0507'));
    const [t, ...attempts] = await untilFinal(keyedApi, id);
    expect(t.status).toBe('Captured');
    expect(attempts.map((a) => [a.auth_code, a.payment_method.id, a.is_network_token])).toEqual([
      ['46', 'ntok_sandbox_0507', 1],
      ['00', card, null],
    ]);
    const db = await testDb();
    const [token] = await db.query(
      `SELECT p.ended_at IS NOT NULL AS ended FROM payment_methods p JOIN merchants m ON m.id = p.merchant_id
        WHERE m.login = $1 AND p.account_id = $2 AND p.pm_id = 'ntok_sandbox_0507'`,
      [keyed.login, account],
    );
    expect(token.ended).toBe(true);
  });

  it('never charges one customer for two transactions at the same time', async () => {
    const account = uniqueId('acct');
    const cards = ['4111111111111111', '5555555555554444', '4111111111111111', '5555555555554444'];
    const batch = cards.map((c) =>
      ofAccount(account, uniqueId('pm'), c, '202912', { subscription: { id: uniqueId('sub') } }),
    );
    const r = await plainApi.submit(batch);
    expect(r.status, r.text).toBe(200);
    for (const t of batch) expect((await untilFinal(plainApi, t['id'] as string))[0].status).toBe('Captured');
    const db = await testDb();
    const spans: { prepared_at: Date; processed_at: Date }[] = await db.query(
      `SELECT a.prepared_at, a.processed_at FROM attempts a JOIN transactions t ON t.id = a.transaction_id
        JOIN merchants m ON m.id = t.merchant_id WHERE m.login = $1 AND t.account_id = $2 ORDER BY a.prepared_at`,
      [plain.login, account],
    );
    expect(spans).toHaveLength(4);
    // Each charge of the customer starts after the previous one was recorded (paused PAUSE_MS after the processor).
    for (let i = 1; i < spans.length; i++) {
      expect(new Date(spans[i]!.prepared_at).getTime()).toBeGreaterThanOrEqual(
        new Date(spans[i - 1]!.processed_at).getTime(),
      );
    }
  });

  it('never writes a card number, a cryptogram or an updated card to any log or job payload', async () => {
    const logs = [...apps.values()].map((a) => a.logs()).join('\n');
    expect(logs.length).toBeGreaterThan(1000);
    for (const secret of [CRYPTOGRAM, '4000000000000341', '4000000000000259', '4000000000000507', '4111111111111111']) {
      expect(logs.includes(secret), `a log contains ${secret.slice(0, 6)}…`).toBe(false);
    }
    const db = await testDb();
    const [{ n }] = await db.query(`SELECT count(*)::int AS n FROM outbox WHERE payload::text LIKE $1`, [
      `%${CRYPTOGRAM}%`,
    ]);
    expect(n).toBe(0);
  });
});
