import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '@retain/config';
import { CardKeysRepository, MerchantsRepository, ProcessorAccountsRepository } from '@retain/db';
import { open, openText, sealCardNumber, sealText, type DataKey } from '@retain/domain';
import { cryptogramOf, rememberPaymentMethod } from '@retain/recovery';
import {
  closeTestDb,
  createMerchant,
  insertTransactionRow,
  testDb,
  usePrivateDatabase,
  type TestMerchant,
} from '@retain/testing';
import type { DataSource } from 'typeorm';

const main = path.resolve(__dirname, '../../../dist/apps/cli/src/main.js');
const keyList = (keys: readonly DataKey[]): string => keys.map((k) => `${k.id}:${k.key.toString('base64')}`).join(',');
/** The CLI with CARD_DATA_KEY set to `keys` (read at call time: the private database's URL). */
const run = (keys: readonly DataKey[], ...args: string[]) =>
  spawnSync(process.execPath, [main, ...args], {
    env: { ...process.env, CARD_DATA_KEY: keyList(keys) },
    encoding: 'utf8',
  });
const cli = (keys: readonly DataKey[], ...args: string[]): any => {
  const r = run(keys, ...args);
  if (r.status !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout);
};

const PAN = '4111111111111111';
const PAN2 = '5555555555554444';
const CRYPTOGRAM = 'AgAAAAAAAIR8CQrXcIhbQAAAAAA=';
const STRIPE_KEY = `sk_test_${randomBytes(12).toString('hex')}`;

/** The values the apps read (card numbers, cryptograms, webhook secrets, processor configs), opened with `keys`. */
async function openAll(db: DataSource, keys: readonly DataKey[], m: TestMerchant, txnIds: string[]) {
  const txns: any[] = await db.query(`SELECT * FROM transactions WHERE id = ANY($1::uuid[]) ORDER BY id`, [txnIds]);
  const pms: any[] = await db.query(`SELECT * FROM payment_methods WHERE card_erased_at IS NULL ORDER BY id`);
  const merchant = (await new MerchantsRepository(db, keys).findByLogin(m.login))!;
  return {
    cards: txns.filter((t) => t.card_enc).map((t) => open(keys, { keyId: t.card_key_id, value: t.card_enc }, 'card')),
    cryptograms: txns.filter((t) => t.cryptogram).map((t) => openText(keys, t.cryptogram, 'cryptogram')),
    pmCards: pms.map((p) => open(keys, { keyId: p.card_key_id, value: p.card_enc }, 'card')),
    pmCryptograms: pms
      .filter((p) => p.cryptogram_enc)
      .map((p) => open(keys, { keyId: p.cryptogram_key_id, value: p.cryptogram_enc }, 'cryptogram')),
    webhookSecret: new MerchantsRepository(db, keys).webhookSecret(merchant),
    processorConfig: (await new ProcessorAccountsRepository(db, keys).forDivision(merchant.id, null))?.config,
  };
}

describe('retain card-keys status|reseal (CARD_DATA_KEY rotation)', () => {
  usePrivateDatabase('cardkeys');
  const old = loadConfig('cli').cardKeys; // the development key, id `dev`
  const next: DataKey = { id: `k${randomBytes(3).toString('hex')}`, key: randomBytes(32) };
  const rotated = [next, ...old];
  const newOnly = [next];
  let db: DataSource;
  let m: TestMerchant;
  let merchantId: string;
  const txnIds: string[] = [];
  let erasedId = '';

  beforeAll(async () => {
    db = await testDb();
    // Sealed under the old key, as the apps running before the rotation left them.
    m = await createMerchant();
    [{ id: merchantId }] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [m.login]);
    await new ProcessorAccountsRepository(db, old).set(merchantId, '', 'stripe', { secret_key: STRIPE_KEY });
    for (let i = 0; i < 5; i++) txnIds.push((await insertTransactionRow(db, merchantId)).id);
    // A network token's cryptogram sealed on the transaction, one stored in clear before sealing existed,
    // and one the review moved to the customer's payment method (rememberPaymentMethod takes it off the row).
    await db.query(`UPDATE transactions SET cryptogram = $2 WHERE id = $1`, [
      txnIds[0],
      sealText(old, CRYPTOGRAM, 'cryptogram'),
    ]);
    await db.query(`UPDATE transactions SET cryptogram = $2 WHERE id = $1`, [txnIds[2], CRYPTOGRAM]);
    await db.query(`UPDATE transactions SET cryptogram = $2 WHERE id = $1`, [
      txnIds[1],
      sealText(old, CRYPTOGRAM, 'cryptogram'),
    ]);
    await db.transaction((t) => rememberPaymentMethod(t, old, merchantId, txnIds[1]!));
    // An erased transaction (crypto-shredded by the retention): never read nor written.
    erasedId = (await insertTransactionRow(db, merchantId)).id;
    await db.query(`UPDATE transactions SET card_erased_at = now() WHERE id = $1`, [erasedId]);
  });
  afterAll(async () => {
    await closeTestDb();
  });

  it('before a re-seal, dropping the old key loses every value it sealed', async () => {
    await expect(openAll(db, newOnly, m, txnIds)).rejects.toThrow(/data key dev is not configured/);
    const status = cli(rotated, 'card-keys', 'status');
    expect(status.current_key_id).toBe(next.id);
    expect(status.sealed).toMatchObject({
      transaction_cards: { dev: 5 },
      transaction_cryptograms: { dev: 1, '(clear)': 1 },
      payment_method_cards: { dev: 1 },
      payment_method_cryptograms: { dev: 1 },
      webhook_secrets: { dev: 1 },
      processor_accounts: { dev: 1 },
    });
    expect(status.keys).toEqual([
      { key_id: next.id, configured: true, current: true, sealed: 0 },
      { key_id: 'dev', configured: true, current: false, sealed: 10 },
      { key_id: '(clear)', sealed: 1 },
    ]);
    expect(status.not_current).toBe(11);
    expect(status.droppable_key_ids).toEqual([]);
  });

  it('reseal re-seals everything under the new first key; the old key can then be dropped', async () => {
    const before = await openAll(db, old, m, txnIds);
    const [erasedBefore] = await db.query(`SELECT card_enc, card_key_id FROM transactions WHERE id = $1`, [erasedId]);
    const r = run(rotated, 'card-keys', 'reseal', '--batch', '2');
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.resealed).toEqual({
      transaction_cards: 5,
      transaction_cryptograms: 2,
      payment_method_cards: 1,
      payment_method_cryptograms: 1,
      webhook_secrets: 1,
      processor_accounts: 1,
    });
    expect(Object.values(out.busy)).toEqual([0, 0, 0, 0, 0, 0]);
    expect(Object.values(out.unreadable)).toEqual([0, 0, 0, 0, 0, 0]);
    expect(out.not_current).toBe(0);
    expect(out.droppable_key_ids).toEqual(['dev']);
    // Nothing secret printed.
    for (const secret of [PAN, CRYPTOGRAM, STRIPE_KEY, m.webhook_secret, next.key.toString('base64')])
      expect(r.stdout + r.stderr).not.toContain(secret);

    // The old key dropped: every value still opens, unchanged.
    expect(await openAll(db, newOnly, m, txnIds)).toEqual(before);
    expect(before.cards).toEqual([PAN, PAN, PAN, PAN, PAN]);
    expect(before.webhookSecret).toBe(m.webhook_secret);
    expect(before.processorConfig).toEqual({ secret_key: STRIPE_KEY });
    const [txn] = await db.query(`SELECT * FROM transactions WHERE id = $1`, [txnIds[1]]);
    // The retry worker's read of a network token's cryptogram, from the customer's payment method.
    const entity = { cryptogram: null, paymentMethodRef: txn.payment_method_ref, isNetworkToken: 1, merchantId };
    expect(await cryptogramOf(db, newOnly, entity as never)).toBe(CRYPTOGRAM);
    // The clear cryptogram is sealed now.
    const [clear] = await db.query(`SELECT cryptogram FROM transactions WHERE id = $1`, [txnIds[2]]);
    expect(clear.cryptogram).toMatch(new RegExp(`^sealed:${next.id}:`));
    // The erased row was not touched.
    expect(await db.query(`SELECT card_enc, card_key_id FROM transactions WHERE id = $1`, [erasedId])).toEqual([
      erasedBefore,
    ]);
    const status = cli(newOnly, 'card-keys', 'status');
    expect(status.keys).toEqual([{ key_id: next.id, configured: true, current: true, sealed: 11 }]);
    expect(status.not_current).toBe(0);

    // A second run re-seals nothing.
    const again = cli(rotated, 'card-keys', 'reseal');
    expect(Object.values(again.resealed)).toEqual([0, 0, 0, 0, 0, 0]);
  });

  it('a row the hot path holds locked is skipped, its update kept, and re-sealed by the next run', async () => {
    const a = (await insertTransactionRow(db, merchantId)).id;
    const b = (await insertTransactionRow(db, merchantId)).id;
    // An app still running with the old key list rewrites a's card (the account updater) under a lock.
    const q = db.createQueryRunner();
    await q.connect();
    await q.startTransaction();
    try {
      await q.query(`SELECT id FROM transactions WHERE id = $1 FOR UPDATE`, [a]);
      const c = sealCardNumber(old, PAN2);
      await q.query(`UPDATE transactions SET card_enc = $2, card_key_id = $3 WHERE id = $1`, [
        a,
        c.cardEnc,
        c.cardKeyId,
      ]);
      const out = cli(rotated, 'card-keys', 'reseal', '--batch', '1');
      expect(out.resealed.transaction_cards).toBe(1); // b
      expect(out.busy.transaction_cards).toBe(1); // a
      expect(out.not_current).toBe(1);
      expect(out.droppable_key_ids).toEqual([]);
      await q.commitTransaction();
    } finally {
      await q.release();
    }
    const card = async (id: string, keys: readonly DataKey[]) => {
      const [t] = await db.query(`SELECT card_enc, card_key_id FROM transactions WHERE id = $1`, [id]);
      return open(keys, { keyId: t.card_key_id, value: t.card_enc }, 'card');
    };
    expect(await card(a, old)).toBe(PAN2); // the concurrent update is not lost
    expect(cli(rotated, 'card-keys', 'reseal').resealed.transaction_cards).toBe(1);
    expect(await card(a, newOnly)).toBe(PAN2);
    expect(await card(b, newOnly)).toBe(PAN);
  });

  it('a value changed or erased between the read and the write is never overwritten', async () => {
    const changed = (await insertTransactionRow(db, merchantId)).id;
    const erased = (await insertTransactionRow(db, merchantId)).id;
    const repo = new CardKeysRepository(db, rotated);
    let raced = false;
    const counts = await repo.reseal({
      kinds: ['transaction_cards'],
      retryDelaysMs: [0],
      beforeWrite: async (_kind, ids) => {
        if (raced || !ids.includes(changed)) return;
        raced = true;
        // The review (or the updater) writes a new card; the retention erases another; both commit first.
        const c = sealCardNumber(old, PAN2);
        await db.query(`UPDATE transactions SET card_enc = $2, card_key_id = $3 WHERE id = $1`, [
          changed,
          c.cardEnc,
          c.cardKeyId,
        ]);
        await db.query(
          `UPDATE transactions SET card_enc = NULL, card_key_id = NULL, card_erased_at = now() WHERE id = $1`,
          [erased],
        );
      },
    });
    // Both skipped at the write; on the retry the changed one is re-sealed with its new card, the erased one is gone.
    expect(counts.transaction_cards).toEqual({ resealed: 1, busy: 0, unreadable: 0 });
    const rows: any[] = await db.query(
      `SELECT id, card_enc, card_key_id, card_erased_at FROM transactions WHERE id = ANY($1::uuid[])`,
      [[changed, erased]],
    );
    const byId = new Map(rows.map((r) => [r.id, r]));
    const c = byId.get(changed);
    expect(c.card_key_id).toBe(next.id);
    expect(open(newOnly, { keyId: c.card_key_id, value: c.card_enc }, 'card')).toBe(PAN2);
    expect(byId.get(erased)).toMatchObject({ card_enc: null, card_key_id: null });
    expect(byId.get(erased).card_erased_at).not.toBeNull();
  });

  it('refuses a bad --batch without touching anything', () => {
    for (const bad of ['0', '-1', 'x', '10001', '1.5']) {
      const r = run(rotated, 'card-keys', 'reseal', '--batch', bad);
      expect(r.status).toBe(1);
      expect(JSON.parse(r.stderr.trim()).error).toMatch(/--batch must be an integer from 1 to 10000/);
    }
  });
});
