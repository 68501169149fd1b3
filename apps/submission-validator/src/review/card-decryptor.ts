import type { JweKey } from '@retain/config';
import { createPrivateKey, type KeyObject } from 'node:crypto';
import { compactDecrypt, decodeProtectedHeader } from 'jose';

/**
 * Decrypts card numbers sent as compact JWE (RSA-OAEP-256 + A256GCM) under one of the service keys
 * published at GET /v1/retain/keys. A JWE naming a `kid` is decrypted with that key only (old keys
 * keep working during a rotation); one without a `kid` is tried with each key. Errors say nothing
 * about the input: never the JWE or a number.
 */
export class CardDecryptor {
  private readonly keys: Map<string, KeyObject>;

  constructor(keys: readonly JweKey[]) {
    this.keys = new Map(keys.map((k) => [k.kid, createPrivateKey(k.privateKeyPem)]));
  }

  /** The clear digits, or null when the value cannot be decrypted with our keys. */
  async decrypt(jwe: string): Promise<string | null> {
    if (this.keys.size === 0) return null;
    let kid: string | undefined;
    try {
      kid = decodeProtectedHeader(jwe).kid;
    } catch {
      return null;
    }
    const candidates =
      kid === undefined ? [...this.keys.values()] : [this.keys.get(kid)].filter((k) => k !== undefined);
    for (const key of candidates) {
      const pan = await this.tryKey(jwe, key);
      if (pan !== null) return pan;
    }
    return null;
  }

  private async tryKey(jwe: string, key: KeyObject): Promise<string | null> {
    try {
      const { plaintext } = await compactDecrypt(jwe, key, {
        keyManagementAlgorithms: ['RSA-OAEP-256'],
        contentEncryptionAlgorithms: ['A256GCM'],
      });
      return new TextDecoder().decode(plaintext).replace(/[\s-]/g, '');
    } catch {
      return null;
    }
  }
}
