import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CompactEncrypt, importJWK, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApiClient,
  closeTestDb,
  createMerchant,
  startApp,
  testDb,
  txn,
  waitFor,
  type RunningApp,
  usePrivateDatabase,
} from '@retain/testing';

// decisions §10, key rotation: every configured JWE key is published, each JWE is decrypted with
// the key its kid names; the single-key variables keep working beside CARD_JWE_PRIVATE_KEYS.
describe('card JWE key rotation', () => {
  // Its own database and queues: its apps serve this file's work, not a backlog earlier files left.
  usePrivateDatabase('jwr');
  const dir = mkdtempSync(path.join(tmpdir(), 'retain-jwe-rotation-'));
  let api: RunningApp;
  let validator: RunningApp;
  let client: ApiClient;
  let jwks: JWK[];

  const keyFile = (name: string): string => {
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const file = path.join(dir, name);
    writeFileSync(file, privateKey.export({ type: 'pkcs8', format: 'pem' }));
    return file;
  };

  beforeAll(async () => {
    const env = {
      CARD_JWE_PRIVATE_KEYS: `key-2026:${keyFile('new.pem')},key-2025:${keyFile('mid.pem')}`,
      CARD_JWE_PRIVATE_KEY: '',
      CARD_JWE_PRIVATE_KEY_FILE: keyFile('old.pem'),
      CARD_JWE_KEY_ID: 'key-2024',
    };
    [api, validator] = await Promise.all([startApp('intake-api', { env }), startApp('submission-validator', { env })]);
    client = new ApiClient(api.url, (await createMerchant()).api_key);
  });
  afterAll(async () => {
    await Promise.all([api.stop(), validator.stop()]);
    await closeTestDb();
    rmSync(dir, { recursive: true, force: true });
  });

  const encrypt = async (pan: string, jwk: JWK, kid: string | undefined): Promise<string> =>
    new CompactEncrypt(new TextEncoder().encode(pan))
      .setProtectedHeader({ alg: 'RSA-OAEP-256', enc: 'A256GCM', ...(kid === undefined ? {} : { kid }) })
      .encrypt(await importJWK(jwk, 'RSA-OAEP-256'));
  const reviewed = (id: string) =>
    waitFor(
      async () => {
        const [row] = await (
          await testDb()
        ).query(`SELECT review_status, card_last4 FROM transactions WHERE merchant_txn_id = $1`, [id]);
        return row && row.review_status !== 'pending' ? row : null;
      },
      { what: `review of ${id}` },
    );

  it('publishes every key, current first, each with its kid', async () => {
    const res = await fetch(`${api.url}/v1/retain/keys`);
    expect(res.status).toBe(200);
    jwks = ((await res.json()) as { keys: JWK[] }).keys;
    expect(jwks.map((k) => k.kid)).toEqual(['key-2026', 'key-2025', 'key-2024']);
    for (const k of jwks) expect(k).toMatchObject({ kty: 'RSA', use: 'enc', alg: 'RSA-OAEP-256' });
    expect(new Set(jwks.map((k) => k.n)).size).toBe(3);
    for (const k of jwks) expect(k).not.toHaveProperty('d');
  });

  it('decrypts with the key the kid names, and refuses a kid it does not hold or a mismatched key', async () => {
    const [current, mid, old] = jwks as [JWK, JWK, JWK];
    const cases: [string, string, JWK, string | undefined, string][] = [
      ['4111111111111111', 'passed', current, 'key-2026', '1111'],
      ['5555555555554444', 'passed', mid, 'key-2025', '4444'],
      ['4000000000000077', 'passed', old, 'key-2024', '0077'],
      ['4000000000000119', 'passed', mid, undefined, '0119'], // no kid: each key is tried
      ['4111111111111111', 'rejected', current, 'key-1999', ''], // unknown kid
      ['4111111111111111', 'rejected', current, 'key-2024', ''], // kid of another key
    ];
    const txns = await Promise.all(
      cases.map(async ([pan, , jwk, kid]) => {
        const t = txn();
        (t['payment_method'] as any).credit_card.account = await encrypt(pan, jwk, kid);
        return t;
      }),
    );
    expect((await client.submit(txns)).status).toBe(200);
    for (let i = 0; i < cases.length; i++) {
      const [, status, , kid, last4] = cases[i]!;
      const row = await reviewed(txns[i]!['id'] as string);
      expect(row.review_status, `kid ${kid}`).toBe(status);
      if (status === 'passed') expect(row.card_last4).toBe(last4);
    }
  });
});
