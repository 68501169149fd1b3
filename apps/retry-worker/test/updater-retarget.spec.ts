import { createHash } from 'node:crypto';
import { loadConfig } from '@retain/config';
import { PaymentMethodsRepository } from '@retain/db';
import { fixedProcessor, type AccountUpdater, type PaymentProcessor } from '@retain/processor';
import { rememberPaymentMethod } from '@retain/recovery';
import { closeTestDb, insertAttemptRow, insertMerchantRow, insertTransactionRow, testDb } from '@retain/testing';
import { exportJWK, generateKeyPair } from 'jose';
import type { DataSource } from 'typeorm';
import { afterAll, describe, expect, it } from 'vitest';
import { PaymentMethodsService } from '../src/attempts/payment-methods.service';

// decisions §15 and the network limits (counted per card fingerprint): when the account updater
// gives an expired card a new number before its attempt is charged, the attempt goes out on, and
// counts for, the new card.
describe('account updater: a new card number before the charge', () => {
  afterAll(() => closeTestDb());

  /** A merchant that registered an updater key (it gets new card numbers as a JWE; the updater runs for every merchant). */
  const merchantWithUpdaterKey = async (db: DataSource): Promise<string> => {
    const merchantId = await insertMerchantRow(db);
    const [{ login }] = await db.query(`SELECT login FROM merchants WHERE id = $1`, [merchantId]);
    const { publicKey } = await generateKeyPair('RSA-OAEP-256', { extractable: true });
    await PaymentMethodsRepository.setUpdaterKey(db, login, {
      jwk: { ...(await exportJWK(publicKey)) },
      alg: 'RSA-OAEP-256',
    });
    return merchantId;
  };

  /**
   * A transaction on 4111111111111111 whose card expired, its payment method remembered, an attempt not
   * yet sent, and the payment-methods service with an updater that renews it as 5555555555554444.
   */
  const expiredVisaRenewedAsMastercard = async (db: DataSource, merchantId: string) => {
    const config = loadConfig('retry-worker');
    const t = await insertTransactionRow(db, merchantId, { card: '4111111111111111' });
    const pmRef = await db.transaction((m) => rememberPaymentMethod(m, config.cardKeys, merchantId, t.id));
    // The card expired: the updater is asked before the attempt is charged.
    await db.query(`UPDATE transactions SET payment_method_ref = $2, expiration_date = '202001' WHERE id = $1`, [
      t.id,
      pmRef,
    ]);
    await db.query(`UPDATE payment_methods SET expiration_date = '202001' WHERE id = $1`, [pmRef]);
    const attempt = await insertAttemptRow(db, t, {});
    const updater: AccountUpdater = {
      name: 'stub',
      lookup: async () => ({ kind: 'updated', pan: '5555555555554444', expiration: '203012' }),
    };
    return { t, attempt, service: new PaymentMethodsService(db, config, updater) };
  };

  it("moves the attempt not yet sent to the new card's fingerprint", async () => {
    const db = await testDb();
    const { attempt, service } = await expiredVisaRenewedAsMastercard(db, await merchantWithUpdaterKey(db));
    const hmac = async () => {
      const [row] = await db.query(
        `SELECT t.card_hmac AS txn, a.card_hmac AS attempt, a.card_network AS network
           FROM attempts a JOIN transactions t ON t.id = a.transaction_id WHERE a.id = $1`,
        [attempt.id],
      );
      return row as { txn: string; attempt: string; network: string | null };
    };
    const before = await hmac();
    await service.refreshCard(attempt.id, null);
    const after = await hmac();
    expect(after.txn).not.toBe(before.txn);
    expect(after.attempt).toBe(after.txn);
  });

  it('a new number for a merchant without an updater key: no hash of it is shown (it would give the number back), and its network is the new card’s', async () => {
    // The session-25 card-data audit: the new number's SHA-1 was stored as `account_hash` and shown beside
    // 555555******4444 (about 10^5 Luhn candidates: the number, at once). A Visa reissued as a Mastercard
    // also kept Visa's network rules.
    const db = await testDb();
    const { t, attempt, service } = await expiredVisaRenewedAsMastercard(db, await insertMerchantRow(db));
    await service.refreshCard(attempt.id, null);
    const newHash = createHash('sha1').update('5555555555554444').digest('hex');
    const [row] = await db.query(
      `SELECT t.account_hash AS txn_hash, p.account_hash AS pm_hash, t.card_network AS txn_network,
              p.card_network AS pm_network, a.card_network AS attempt_network, t.card_last4
         FROM transactions t JOIN payment_methods p ON p.id = t.payment_method_ref
         JOIN attempts a ON a.transaction_id = t.id WHERE t.id = $1`,
      [t.id],
    );
    expect(row.card_last4).toBe('4444');
    expect([row.txn_hash, row.pm_hash]).not.toContain(newHash);
    expect([row.txn_network, row.pm_network, row.attempt_network]).toEqual(['mastercard', 'mastercard', 'mastercard']);
  });

  it("keeps the renewal when the merchant sends the data it replaced again; the merchant's new data still wins", async () => {
    const db = await testDb();
    const config = loadConfig('retry-worker');
    const merchantId = await merchantWithUpdaterKey(db);
    const first = await insertTransactionRow(db, merchantId, { card: '4000000000000341' });
    await db.query(`UPDATE transactions SET expiration_date = '202001' WHERE id = $1`, [first.id]);
    const pmRef = await db.transaction((m) => rememberPaymentMethod(m, config.cardKeys, merchantId, first.id));
    const updater: AccountUpdater = {
      name: 'stub',
      lookup: async () => ({ kind: 'updated', pan: '4000000000000341', expiration: '203001' }),
    };
    await new PaymentMethodsService(db, config, updater).refreshCard((await insertAttemptRow(db, first, {})).id, null);
    /** The merchant's next period for the same customer and payment_method.id, with `expiry`. */
    const next = async (expiry: string) => {
      const t = await insertTransactionRow(db, merchantId, { card: '4000000000000341' });
      await db.query(
        `UPDATE transactions n SET expiration_date = $2, account_id = f.account_id, account = f.account,
           payment_method = f.payment_method, submitted_ts = now()
           FROM transactions f WHERE n.id = $1 AND f.id = $3`,
        [t.id, expiry, first.id],
      );
      expect(await db.transaction((m) => rememberPaymentMethod(m, config.cardKeys, merchantId, t.id))).toBe(pmRef);
      const [pm] = await db.query(`SELECT expiration_date, account_updated FROM payment_methods WHERE id = $1`, [
        pmRef,
      ]);
      const [txn] = await db.query(
        `SELECT expiration_date, account_updated, payment_method_ref FROM transactions WHERE id = $1`,
        [t.id],
      );
      return { pm, txn };
    };
    // The data the updater replaced: stale, the renewed data stays and the new transaction charges it.
    expect(await next('202001')).toEqual({
      pm: { expiration_date: '203001', account_updated: true },
      txn: { expiration_date: '203001', account_updated: true, payment_method_ref: pmRef },
    });
    // Another expiry from the merchant is new data: it wins, as before.
    expect(await next('203512')).toEqual({
      pm: { expiration_date: '203512', account_updated: false },
      txn: { expiration_date: '203512', account_updated: false, payment_method_ref: pmRef },
    });
  });

  it.each([
    // The updater renewed only the expiry: the renewal stays, with the merchant's card number (the row's was erased).
    ['4000000000000341', '4000000000000341', '203001', { expiration_date: '203001', account_updated: true }],
    // It gave a new number, which the erasure took: the merchant's data wins, the renewal is gone with it.
    ['4111111111111111', '5555555555554444', '203012', { expiration_date: '202001', account_updated: false }],
  ])(
    'a payment method whose card data retention erased, sent again with the data the updater replaced (%s, updated to %s %s)',
    async (card, updatedPan, updatedExpiry, expected) => {
      const db = await testDb();
      const config = loadConfig('retry-worker');
      const merchantId = await merchantWithUpdaterKey(db);
      const first = await insertTransactionRow(db, merchantId, { card });
      const [{ card_hmac: merchantCard }] = await db
        .query(`UPDATE transactions SET expiration_date = '202001' WHERE id = $1 RETURNING card_hmac`, [first.id])
        .then(([rows]) => rows);
      const pmRef = await db.transaction((m) => rememberPaymentMethod(m, config.cardKeys, merchantId, first.id));
      const updater: AccountUpdater = {
        name: 'stub',
        lookup: async () => ({ kind: 'updated', pan: updatedPan, expiration: updatedExpiry }),
      };
      await new PaymentMethodsService(db, config, updater).refreshCard(
        (await insertAttemptRow(db, first, {})).id,
        null,
      );
      // Retention's erasure of the payment method (RetentionRepository.paymentMethodCardData's columns).
      await db.query(
        `UPDATE payment_methods SET card_enc = NULL, card_key_id = NULL, cryptogram_enc = NULL, cryptogram_key_id = NULL,
                account_update_jwe = NULL, account_hash = NULL, card_erased_at = now()
          WHERE id = $1`,
        [pmRef],
      );
      // The merchant's next period for the same customer and payment_method.id, with its card and 202001.
      const t = await insertTransactionRow(db, merchantId, { card });
      await db.query(
        `UPDATE transactions n SET expiration_date = '202001', account_id = f.account_id, account = f.account,
           payment_method = f.payment_method, submitted_ts = now()
           FROM transactions f WHERE n.id = $1 AND f.id = $2`,
        [t.id, first.id],
      );
      expect(await db.transaction((m) => rememberPaymentMethod(m, config.cardKeys, merchantId, t.id))).toBe(pmRef);
      const [pm] = await db.query(
        `SELECT expiration_date, account_updated, card_hmac, card_enc IS NOT NULL AS held, card_erased_at
           FROM payment_methods WHERE id = $1`,
        [pmRef],
      );
      const [txn] = await db.query(
        `SELECT expiration_date, account_updated, card_hmac, payment_method_ref FROM transactions WHERE id = $1`,
        [t.id],
      );
      // The merchant's card (its fingerprint), held again; the expiry and account_updated as `expected`.
      expect({ pm, txn }).toEqual({
        pm: { ...expected, card_hmac: merchantCard, held: true, card_erased_at: null },
        txn: { ...expected, card_hmac: merchantCard, payment_method_ref: pmRef },
      });
    },
  );

  /** An expired card's transaction turned into a token of `token` (as the review stores a de-tokenized one), remembered. */
  const expiredToken = async (db: DataSource, merchantId: string, token: string) => {
    const config = loadConfig('retry-worker');
    const t = await insertTransactionRow(db, merchantId, { card: '4000000000000341' });
    await db.query(
      `UPDATE transactions SET card_kind = 'token', card_enc = NULL, card_key_id = NULL, expiration_date = '202001',
         payment_method = jsonb_set(jsonb_set(payment_method, '{id}', to_jsonb($2::text)), '{is_tokenized}', 'true')
        WHERE id = $1`,
      [t.id, token],
    );
    const pmRef = await db.transaction((m) => rememberPaymentMethod(m, config.cardKeys, merchantId, t.id));
    await db.query(`UPDATE transactions SET payment_method_ref = $2 WHERE id = $1`, [t.id, pmRef]);
    return { t, pmRef, attempt: await insertAttemptRow(db, t, {}) };
  };

  it('renews a token the processor de-tokenizes: the token stays, with the new expiry only (a new number is not taken)', async () => {
    const db = await testDb();
    const config = loadConfig('retry-worker');
    const merchantId = await merchantWithUpdaterKey(db);
    const { t, pmRef, attempt } = await expiredToken(db, merchantId, 'tok_sandbox_0341');
    const asked: string[] = [];
    const updater: AccountUpdater = {
      name: 'stub',
      lookup: async (card) => {
        asked.push(card.pan);
        return { kind: 'updated', pan: '5555555555554444', expiration: '203012' };
      },
    };
    const processor = {
      detokenize: async () => ({ ok: true, pan: '4000000000000341' }),
    } as unknown as PaymentProcessor;
    await new PaymentMethodsService(db, config, updater, fixedProcessor(processor)).refreshCard(attempt.id, null);
    expect(asked).toEqual(['4000000000000341']);
    const [pm] = await db.query(`SELECT * FROM payment_methods WHERE id = $1`, [pmRef]);
    expect(pm).toMatchObject({
      pm_id: 'tok_sandbox_0341',
      card_kind: 'token',
      card_enc: null,
      card_last4: '0341',
      expiration_date: '203012',
      account_updated: true,
      // The merchant sent a token: no card number goes back to it, even encrypted to its key.
      account_update_jwe: null,
    });
    const [txn] = await db.query(`SELECT card_kind, card_enc, expiration_date FROM transactions WHERE id = $1`, [t.id]);
    expect(txn).toEqual({ card_kind: 'token', card_enc: null, expiration_date: '203012' });
  });

  it('never asks about a saved payment method of a processor that checks its tokens (Stripe, Adyen)', async () => {
    const db = await testDb();
    const config = loadConfig('retry-worker');
    const merchantId = await merchantWithUpdaterKey(db);
    const { pmRef, attempt } = await expiredToken(db, merchantId, 'pm_1Abc');
    let asked = 0;
    const updater: AccountUpdater = {
      name: 'stub',
      lookup: async () => {
        asked++;
        return { kind: 'closed', message: 'Account closed' };
      },
    };
    let detokenized = 0;
    const processor = {
      checkToken: () => ({ ok: true }),
      detokenize: async () => {
        detokenized++;
        return { ok: false, message: 'never' };
      },
    } as unknown as PaymentProcessor;
    await new PaymentMethodsService(db, config, updater, fixedProcessor(processor)).refreshCard(attempt.id, null);
    expect([asked, detokenized]).toEqual([0, 0]);
    const [pm] = await db.query(`SELECT ended_at, expiration_date FROM payment_methods WHERE id = $1`, [pmRef]);
    expect(pm).toEqual({ ended_at: null, expiration_date: '202001' });
  });

  it('is not asked after a 1A or 70 (authentication needed: no new card data makes a retry possible)', async () => {
    const db = await testDb();
    const config = loadConfig('retry-worker');
    const merchantId = await merchantWithUpdaterKey(db);
    let asked = 0;
    const updater: AccountUpdater = {
      name: 'stub',
      lookup: async () => {
        asked++;
        return { kind: 'updated', pan: '4111111111111111', expiration: '203012' };
      },
    };
    const service = new PaymentMethodsService(db, config, updater);
    for (const code of ['1A', '70', '54']) {
      const t = await insertTransactionRow(db, merchantId, { card: '4111111111111111' });
      const pmRef = await db.transaction((m) => rememberPaymentMethod(m, config.cardKeys, merchantId, t.id));
      await db.query(`UPDATE transactions SET payment_method_ref = $2 WHERE id = $1`, [t.id, pmRef]);
      const attempt = await insertAttemptRow(db, t, {});
      await service.refreshCard(attempt.id, {
        outcome: 'declined',
        responseCode: code,
        network: 'visa',
        merchantAdviceCode: null,
      } as never);
    }
    // Only the 54 (data quality) asks.
    expect(asked).toBe(1);
  });
});
