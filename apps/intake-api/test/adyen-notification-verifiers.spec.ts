import { randomBytes } from 'node:crypto';
import { loadConfig } from '@retain/config';
import { ProcessorAccountsRepository } from '@retain/db';
import { seal } from '@retain/domain';
import { OutboxRelay, QueueRegistry, createRedis } from '@retain/queues';
import { closeTestDb, insertMerchantRow, testDb } from '@retain/testing';
import type { Redis } from 'ioredis';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// The notification bodies are built as Adyen documents them, by the wire fake's test support.
// eslint-disable-next-line @nx/enforce-module-boundaries -- test support of libs/processor, never built
import { adyenNotification } from '../../../libs/processor/test/adyen-fake';
import { AdyenNotificationsService } from '../src/processors/adyen-notifications.service';

// The notifications endpoint takes no credentials: a post must not open (decrypt) every Adyen
// account's sealed config again. Service level, real Postgres: the sealed configs a post reads are
// counted on the connection the service uses.
describe('Adyen notifications: the accounts’ keys', () => {
  const config = loadConfig('intake-api');
  let db: DataSource;
  let redis: Redis;
  let queues: QueueRegistry;
  let service: AdyenNotificationsService;
  let sealedRead = 0;
  const mine = new Set<string>();
  const code = `RetainVerifiers${Date.now()}`;
  const key = (n: number) => n.toString(16).padStart(64, '0');

  beforeAll(async () => {
    db = await testDb();
    redis = createRedis(config.redisUrl);
    queues = new QueueRegistry(redis, config.queuePrefix);
    // The service's connection, counting the sealed configs its statements bring back.
    const counting = new Proxy(db, {
      get(target, prop, receiver) {
        if (prop !== 'query') return Reflect.get(target, prop, receiver);
        return async (sql: string, params?: unknown[]) => {
          const rows = await target.query(sql, params);
          // Only this test's merchants' configs: other test files share the database.
          if (Array.isArray(rows))
            sealedRead += rows.filter(
              (r) => r && typeof r === 'object' && 'config_enc' in r && mine.has(r.merchant_id),
            ).length;
          return rows;
        };
      },
    });
    service = new AdyenNotificationsService(counting, new OutboxRelay(db, queues), config);
  });
  afterAll(async () => {
    await queues?.close();
    redis?.disconnect();
    await closeTestDb();
  });

  const body = (hmacKey: string, psp: string) =>
    adyenNotification(code, hmacKey, [
      { eventCode: 'AUTHORISATION', success: true, pspReference: psp, amount: { value: 1999, currency: 'EUR' } },
    ]);
  const setAccount = async (merchantId: string, hmacKey: string) =>
    new ProcessorAccountsRepository(db, config.cardKeys).set(merchantId, '', 'adyen', {
      api_key: 'test-api-key',
      merchant_account: code,
      checkout_url: 'https://checkout-test.adyen.com/v71',
      hmac_key: hmacKey,
    });

  it('opens each account version once; a new version’s key verifies at once, a retired one’s still does', async () => {
    const merchants = [await insertMerchantRow(db), await insertMerchantRow(db), await insertMerchantRow(db)];
    for (const m of merchants) mine.add(m);
    for (const [i, m] of merchants.entries()) await setAccount(m, key(i + 1));
    // Another merchant's Adyen account sealed under a key this process does not have (a key rotated
    // out without a reseal): it verifies nothing, and the others still serve.
    const stranger = await insertMerchantRow(db);
    mine.add(stranger);
    const sealed = seal(
      [{ id: 'gone', key: randomBytes(32) }],
      JSON.stringify({
        api_key: 'x',
        merchant_account: code,
        checkout_url: 'https://checkout-test.adyen.com/v71',
        hmac_key: key(5),
      }),
      'processor-account',
    );
    await db.query(
      `INSERT INTO processor_accounts (merchant_id, division_number, processor, raw_card_data, config_enc, config_key_id)
       VALUES ($1, '', 'adyen', false, $2, $3)`,
      [stranger, sealed.value, sealed.keyId],
    );

    sealedRead = 0;
    expect(await service.receive(body(key(1), `psp-a-${code}`))).toEqual({ items: 1, stored: 1 });
    const first = sealedRead;
    expect(first).toBe(4);

    // Further posts open nothing again.
    sealedRead = 0;
    expect(await service.receive(body(key(2), `psp-b-${code}`))).toEqual({ items: 1, stored: 1 });
    expect(await service.receive(body(key(3), `psp-c-${code}`))).toEqual({ items: 1, stored: 1 });
    expect(sealedRead).toBe(0);

    // A merchant sets a new key: the new version is opened (only it), and the old key, of a retired
    // version that may still be notified, still verifies.
    await setAccount(merchants[0]!, key(9));
    sealedRead = 0;
    expect(await service.receive(body(key(9), `psp-d-${code}`))).toEqual({ items: 1, stored: 1 });
    expect(sealedRead).toBe(1);
    expect(await service.receive(body(key(1), `psp-e-${code}`))).toEqual({ items: 1, stored: 1 });

    // A key no account has is refused, storing nothing; so is the unreadable account's.
    await expect(service.receive(body(key(77), `psp-f-${code}`))).rejects.toMatchObject({ status: 401 });
    await expect(service.receive(body(key(5), `psp-g-${code}`))).rejects.toMatchObject({ status: 401 });
    const stored = await db.query(
      `SELECT merchant_id, psp_reference FROM processor_notifications WHERE merchant_account_code = $1 ORDER BY psp_reference`,
      [code],
    );
    expect(stored).toEqual([
      { merchant_id: merchants[0], psp_reference: `psp-a-${code}` },
      { merchant_id: merchants[1], psp_reference: `psp-b-${code}` },
      { merchant_id: merchants[2], psp_reference: `psp-c-${code}` },
      { merchant_id: merchants[0], psp_reference: `psp-d-${code}` },
      { merchant_id: merchants[0], psp_reference: `psp-e-${code}` },
    ]);
  });
});
