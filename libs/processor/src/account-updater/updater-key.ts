import { createPublicKey, type JsonWebKey as NodeJwk } from 'node:crypto';
import { CompactEncrypt, importJWK, type JWK } from 'jose';

/** JWE key management algorithms a merchant's updater key may use. */
export type UpdaterKeyAlg = 'RSA-OAEP-256' | 'ECDH-ES';

export interface UpdaterPublicKey {
  jwk: Record<string, unknown>;
  alg: UpdaterKeyAlg;
}

/**
 * Reads a merchant's account-updater public key: a JWK (JSON) or a PEM public key (SPKI). RSA
 * keys (2048 bits or more) use RSA-OAEP-256, EC (P-256/384/521) and X25519 keys ECDH-ES. Private
 * keys are refused: the operator must never receive the merchant's private key. Throws an Error
 * with a message for the operator on anything else.
 */
export function parseUpdaterPublicKey(text: string): UpdaterPublicKey {
  const trimmed = text.trim();
  let jwk: NodeJwk & Record<string, unknown>;
  if (trimmed.startsWith('{')) {
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(trimmed) as Record<string, unknown>;
    } catch {
      throw new Error('the key file is neither a JWK (JSON) nor a PEM public key');
    }
    if ('d' in parsed || 'p' in parsed) throw new Error('this is a private key: register the public key only');
    try {
      jwk = createPublicKey({ key: parsed as NodeJwk, format: 'jwk' }).export({ format: 'jwk' }) as typeof jwk;
    } catch {
      throw new Error('the JWK is not a usable public key');
    }
  } else {
    if (/PRIVATE KEY/.test(trimmed)) throw new Error('this is a private key: register the public key only');
    try {
      jwk = createPublicKey(trimmed).export({ format: 'jwk' }) as typeof jwk;
    } catch {
      throw new Error('the key file is neither a JWK (JSON) nor a PEM public key');
    }
  }
  if (jwk.kty === 'RSA') {
    const bits = Buffer.from(String(jwk.n), 'base64url').length * 8;
    if (bits < 2048) throw new Error('RSA keys must have at least 2048 bits');
    return { jwk: { kty: 'RSA', n: jwk.n, e: jwk.e }, alg: 'RSA-OAEP-256' };
  }
  if (jwk.kty === 'EC' && ['P-256', 'P-384', 'P-521'].includes(String(jwk.crv))) {
    return { jwk: { kty: 'EC', crv: jwk.crv, x: jwk.x, y: jwk.y }, alg: 'ECDH-ES' };
  }
  if (jwk.kty === 'OKP' && jwk.crv === 'X25519')
    return { jwk: { kty: 'OKP', crv: 'X25519', x: jwk.x }, alg: 'ECDH-ES' };
  throw new Error('unsupported key type: use RSA (RSA-OAEP-256) or EC P-256/384/521 or X25519 (ECDH-ES)');
}

/**
 * The updated card offered back to the merchant: `{"account","expiration_date"}` as a compact JWE
 * (the key's algorithm + A256GCM) that only the holder of the private key can read.
 */
export async function encryptCardUpdate(
  key: { jwk: Record<string, unknown>; alg: string },
  card: { account: string; expiration_date: string },
): Promise<string> {
  const publicKey = await importJWK(key.jwk as JWK, key.alg);
  return new CompactEncrypt(new TextEncoder().encode(JSON.stringify(card)))
    .setProtectedHeader({ alg: key.alg, enc: 'A256GCM', cty: 'application/json' })
    .encrypt(publicKey);
}
