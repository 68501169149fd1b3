import { generateKeyPairSync } from 'node:crypto';
import { compactDecrypt, decodeProtectedHeader, importJWK, type JWK } from 'jose';
import { describe, expect, it } from 'vitest';
import { MemorySandboxLedger } from '../sandbox/sandbox-ledger';
import { SandboxProcessor } from '../sandbox/sandbox.processor';
import { SandboxAccountUpdater } from './sandbox-account-updater';
import { encryptCardUpdate, parseUpdaterPublicKey } from './updater-key';

const NOW = new Date('2026-11-23T10:00:00Z');

describe('sandbox account updater (decisions §15)', () => {
  it('renews 4000000000000341 three years on, and only then does the sandbox approve it', async () => {
    const ledger = new MemorySandboxLedger();
    const updater = new SandboxAccountUpdater(ledger);
    const processor = new SandboxProcessor(ledger);
    const charge = (key: string, expiration: string) =>
      processor.charge({
        idempotencyKey: key,
        attemptNumber: 1,
        amountMinor: 1000n,
        currency: 'USD',
        instrument: { kind: 'pan', pan: '4000000000000341', expiration },
        originalResponseCode: '51',
        divisionNumber: 'd',
        at: NOW,
      });
    expect(await charge('k1', '202701')).toMatchObject({ outcome: 'declined', responseCode: '54' });
    // Three years after the later of the card's expiry and this month: an expired card comes back valid.
    expect(await updater.lookup({ pan: '4000000000000341', expiration: '202701' }, NOW)).toEqual({
      kind: 'updated',
      pan: '4000000000000341',
      expiration: '203001',
    });
    expect(await updater.lookup({ pan: '4000000000000341', expiration: '202001' }, NOW)).toMatchObject({
      expiration: '202911',
    });
    expect(await charge('k2', '203001')).toMatchObject({ outcome: 'approved' });
    // An expiry the updater never issued stays declined.
    expect(await charge('k3', '203002')).toMatchObject({ outcome: 'declined', responseCode: '54' });
  });

  it('approves tok_sandbox_0341 and ntok_sandbox_0341 with the expiry its updater issued, as the card itself', async () => {
    const ledger = new MemorySandboxLedger();
    const processor = new SandboxProcessor(ledger);
    const charge = (key: string, token: string, expiration: string) =>
      processor.charge({
        idempotencyKey: key,
        attemptNumber: 1,
        amountMinor: 1000n,
        currency: 'USD',
        instrument: { kind: 'token', token, isNetworkToken: token.startsWith('n'), expiration },
        originalResponseCode: '51',
        divisionNumber: 'd',
        at: NOW,
      });
    for (const token of ['tok_sandbox_0341', 'ntok_sandbox_0341']) {
      expect(await charge(`${token}-1`, token, '202701')).toMatchObject({ outcome: 'declined', responseCode: '54' });
    }
    await new SandboxAccountUpdater(ledger).lookup({ pan: '4000000000000341', expiration: '202701' }, NOW);
    for (const token of ['tok_sandbox_0341', 'ntok_sandbox_0341']) {
      expect(await charge(`${token}-2`, token, '203001')).toMatchObject({ outcome: 'approved' });
      expect(await charge(`${token}-3`, token, '203002')).toMatchObject({ outcome: 'declined', responseCode: '54' });
    }
  });

  it('closes 4000000000000259 and knows nothing new of other cards', async () => {
    const updater = new SandboxAccountUpdater(new MemorySandboxLedger());
    expect(await updater.lookup({ pan: '4000000000000259', expiration: '202912' }, NOW)).toMatchObject({
      kind: 'closed',
    });
    expect(await updater.lookup({ pan: '4111111111111111', expiration: '202912' }, NOW)).toEqual({ kind: 'no-change' });
  });

  it('declines 4000000000000507 with 46, and a network token ntok_sandbox_<last 4> as that card', async () => {
    const processor = new SandboxProcessor(new MemorySandboxLedger());
    const charge = (key: string, token: string) =>
      processor.charge({
        idempotencyKey: key,
        attemptNumber: 1,
        amountMinor: 1000n,
        currency: 'USD',
        instrument: {
          kind: 'token',
          token,
          isNetworkToken: true,
          cryptogram: 'AgAAAAAABk4DWZ4C28yUQAAAAAA=',
          eci: '05',
        },
        originalResponseCode: '51',
        divisionNumber: 'd',
        at: NOW,
      });
    expect(await charge('n1', 'ntok_sandbox_0507')).toMatchObject({ outcome: 'declined', responseCode: '46' });
    expect(await charge('n2', 'ntok_sandbox_1111')).toMatchObject({ outcome: 'approved' });
    expect(await processor.detokenize('ntok_sandbox_0507')).toEqual({ ok: true, pan: '4000000000000507' });
  });
});

describe("the merchant's updater key", () => {
  it('takes an RSA PEM (RSA-OAEP-256) and an EC JWK (ECDH-ES); the JWE opens only with the private key', async () => {
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const cases = [
      {
        text: rsa.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
        priv: rsa.privateKey,
        alg: 'RSA-OAEP-256',
      },
      { text: JSON.stringify(ec.publicKey.export({ format: 'jwk' })), priv: ec.privateKey, alg: 'ECDH-ES' },
    ];
    for (const c of cases) {
      const key = parseUpdaterPublicKey(c.text);
      expect(key.alg).toBe(c.alg);
      expect(key.jwk).not.toHaveProperty('d');
      const jwe = await encryptCardUpdate(key, { account: '4000000000000341', expiration_date: '203001' });
      expect(decodeProtectedHeader(jwe)).toMatchObject({ alg: c.alg, enc: 'A256GCM' });
      expect(jwe).not.toContain('4000000000000341');
      const privateKey = await importJWK(c.priv.export({ format: 'jwk' }) as JWK, c.alg);
      const { plaintext } = await compactDecrypt(jwe, privateKey);
      expect(JSON.parse(new TextDecoder().decode(plaintext))).toEqual({
        account: '4000000000000341',
        expiration_date: '203001',
      });
    }
  });

  it('refuses private keys, small RSA keys and what is not a key', () => {
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const small = generateKeyPairSync('rsa', { modulusLength: 1024 });
    expect(() => parseUpdaterPublicKey(rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString())).toThrow(
      /private key/,
    );
    expect(() => parseUpdaterPublicKey(JSON.stringify(rsa.privateKey.export({ format: 'jwk' })))).toThrow(
      /private key/,
    );
    expect(() => parseUpdaterPublicKey(small.publicKey.export({ type: 'spki', format: 'pem' }).toString())).toThrow(
      /2048/,
    );
    expect(() => parseUpdaterPublicKey('hello')).toThrow(/neither a JWK/);
  });
});
