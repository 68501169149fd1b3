import { createPrivateKey, type KeyObject } from 'node:crypto';
import { compactDecrypt, decodeProtectedHeader } from 'jose';

/**
 * Decrypts card numbers sent as compact JWE (RSA-OAEP-256 + A256GCM) under the service key
 * published at GET /v1/retain/keys. Errors say nothing about the input: never the JWE or a number.
 */
export class CardDecryptor {
  private readonly key: KeyObject | null;

  constructor(
    pem: string | null,
    private readonly keyId: string,
  ) {
    this.key = pem ? createPrivateKey(pem) : null;
  }

  /** The clear digits, or null when the value cannot be decrypted with our key. */
  async decrypt(jwe: string): Promise<string | null> {
    if (!this.key) return null;
    try {
      const header = decodeProtectedHeader(jwe);
      if (header.kid !== undefined && header.kid !== this.keyId) return null;
      const { plaintext } = await compactDecrypt(jwe, this.key, {
        keyManagementAlgorithms: ['RSA-OAEP-256'],
        contentEncryptionAlgorithms: ['A256GCM'],
      });
      return new TextDecoder().decode(plaintext).replace(/[\s-]/g, '');
    } catch {
      return null;
    }
  }
}
