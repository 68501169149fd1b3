import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { accountHash, maskCardNumber } from './card';

/** A data key of the configuration: id kept beside each sealed value so keys can rotate. */
export interface DataKey {
  id: string;
  key: Buffer;
}

export interface Sealed {
  keyId: string;
  /** base64(iv).base64(tag).base64(ciphertext) */
  value: string;
}

/** AES-256-GCM with the first (current) key. */
export function seal(keys: readonly DataKey[], plaintext: string, aad = 'retain'): Sealed {
  const current = keys[0];
  if (!current) throw new Error('no data key configured');
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', current.key, iv);
  cipher.setAAD(Buffer.from(aad));
  const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  const tag = cipher.getAuthTag();
  return { keyId: current.id, value: `${iv.toString('base64')}.${tag.toString('base64')}.${ct.toString('base64')}` };
}

/** Opens a value sealed with any configured key (old keys stay configured until re-encrypted). */
export function open(keys: readonly DataKey[], sealed: Sealed, aad = 'retain'): string {
  const k = keys.find((x) => x.id === sealed.keyId);
  if (!k) throw new Error(`data key ${sealed.keyId} is not configured`);
  const [iv, tag, ct] = sealed.value.split('.').map((p) => Buffer.from(p, 'base64'));
  if (!iv || !tag || !ct) throw new Error('malformed sealed value');
  const decipher = createDecipheriv('aes-256-gcm', k.key, iv);
  decipher.setAAD(Buffer.from(aad));
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(ct), decipher.final()]).toString('utf8');
}

const hmacKeys = new WeakMap<Buffer, Buffer>();

/**
 * Keyed HMAC-SHA256 of a card number for lookups (per-card network limits, duplicates). The HMAC
 * key is derived from the first data key with HKDF so it is never the encryption key itself.
 */
export function cardFingerprint(keys: readonly DataKey[], pan: string): string {
  const base = keys[0]!.key;
  let k = hmacKeys.get(base);
  if (!k) {
    k = Buffer.from(hkdfSync('sha256', base, Buffer.alloc(0), 'retain card fingerprint', 32));
    hmacKeys.set(base, k);
  }
  return createHmac('sha256', k).update(pan).digest('hex');
}

/** The stored columns of a clear card number (decisions §10): sealed, fingerprinted, masked. */
export interface CardColumns {
  cardEnc: string;
  cardKeyId: string;
  cardHmac: string;
  cardBin: string;
  cardLast4: string;
  accountHash: string;
  display: string;
}

export function cardColumnsFromPan(keys: readonly DataKey[], pan: string): CardColumns {
  const sealed = seal(keys, pan, 'card');
  return {
    cardEnc: sealed.value,
    cardKeyId: sealed.keyId,
    cardHmac: cardFingerprint(keys, pan),
    cardBin: pan.slice(0, 6),
    cardLast4: pan.slice(-4),
    accountHash: accountHash(pan),
    display: maskCardNumber(pan),
  };
}
