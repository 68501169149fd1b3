import { createCipheriv, createDecipheriv, createHmac, createSecretKey, hkdfSync, type KeyObject } from 'node:crypto';
import { accountHash, maskCardNumber } from './card';
import { randomPoolBytes } from './ids';

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

const keyObjects = new WeakMap<Buffer, KeyObject>();

/**
 * The KeyObject of a configured key, made once: Node imports a raw Buffer key into a new KeyObject
 * on every cipher and HMAC, which cost 5x the operation itself (a quarter of the intake's CPU).
 */
function keyObject(key: Buffer): KeyObject {
  let k = keyObjects.get(key);
  if (!k) {
    k = createSecretKey(key);
    keyObjects.set(key, k);
  }
  return k;
}

/** AES-256-GCM with the first (current) key. */
export function seal(keys: readonly DataKey[], plaintext: string, aad = 'retain'): Sealed {
  const current = keys[0];
  if (!current) throw new Error('no data key configured');
  const iv = randomPoolBytes(12);
  const cipher = createCipheriv('aes-256-gcm', keyObject(current.key), iv);
  cipher.setAAD(Buffer.from(aad));
  const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  const tag = cipher.getAuthTag();
  return { keyId: current.id, value: `${iv.toString('base64')}.${tag.toString('base64')}.${ct.toString('base64')}` };
}

/**
 * Opens a value sealed with any configured key (old keys stay configured until re-encrypted): the key
 * its key id names. A key id no longer configured is a key that was renamed (a bare CARD_DATA_KEY is
 * the key id `default`; the same key may later be listed as `k1:…`): every configured key is tried,
 * and the AES-GCM tag tells which one sealed it; none does: refused, naming the missing key id.
 */
export function open(keys: readonly DataKey[], sealed: Sealed, aad = 'retain'): string {
  const [iv, tag, ct] = sealed.value.split('.').map((p) => Buffer.from(p, 'base64'));
  if (!iv || !tag || !ct) throw new Error('malformed sealed value');
  const k = keys.find((x) => x.id === sealed.keyId);
  if (k) return decrypt(k.key, iv, tag, ct, aad);
  for (const other of keys) {
    try {
      return decrypt(other.key, iv, tag, ct, aad);
    } catch {
      // Not this key: the tag did not authenticate.
    }
  }
  throw new Error(`data key ${sealed.keyId} is not configured`);
}

function decrypt(key: Buffer, iv: Buffer, tag: Buffer, ct: Buffer, aad: string): string {
  const decipher = createDecipheriv('aes-256-gcm', keyObject(key), iv);
  decipher.setAAD(Buffer.from(aad));
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(ct), decipher.final()]).toString('utf8');
}

/**
 * A sealed value in ONE text column (`sealed:<key id>:<iv>.<tag>.<ciphertext>`), for secrets that
 * have no key-id column of their own (a network token's cryptogram on the transaction row).
 */
export function sealText(keys: readonly DataKey[], plaintext: string, aad: string): string {
  const s = seal(keys, plaintext, aad);
  return `${SEALED_TEXT}${s.keyId}:${s.value}`;
}

/** The Sealed inside a sealText column, or null for a value written before sealing (clear). */
export function parseSealedText(text: string): Sealed | null {
  if (!text.startsWith(SEALED_TEXT)) return null;
  const rest = text.slice(SEALED_TEXT.length);
  const cut = rest.lastIndexOf(':');
  if (cut <= 0) throw new Error('malformed sealed value');
  return { keyId: rest.slice(0, cut), value: rest.slice(cut + 1) };
}

/** Opens a sealText column; a clear value of a row written before sealing is returned as it is. */
export function openText(keys: readonly DataKey[], text: string, aad: string): string {
  const sealed = parseSealedText(text);
  return sealed ? open(keys, sealed, aad) : text;
}

const SEALED_TEXT = 'sealed:';

/**
 * A card fingerprint: keyed HMAC-SHA256 of the card number, for lookups (per-card network limits).
 * Stored with the id of the key that made it, since fingerprint keys rotate too.
 */
export interface CardFingerprint {
  keyId: string;
  value: string;
}

/**
 * Key id of the fingerprints made before fingerprint keys had their own configuration: the HMAC
 * key was derived from the first CARD_DATA_KEY (HKDF), so a data key rotation changed every card's
 * fingerprint. The migration marks such rows with this id.
 */
export const LEGACY_FINGERPRINT_KEY_ID = 'legacy';

const legacyKeys = new WeakMap<Buffer, Buffer>();

function legacyFingerprintKey(dataKey: Buffer): Buffer {
  let k = legacyKeys.get(dataKey);
  if (!k) {
    k = Buffer.from(hkdfSync('sha256', dataKey, Buffer.alloc(0), 'retain card fingerprint', 32));
    legacyKeys.set(dataKey, k);
  }
  return k;
}

function hmacHex(key: Buffer, pan: string): string {
  return createHmac('sha256', keyObject(key)).update(pan).digest('hex');
}

/** The card's fingerprint under the current (first) fingerprint key. */
export function cardFingerprint(fingerprintKeys: readonly DataKey[], pan: string): CardFingerprint {
  const current = fingerprintKeys[0];
  if (!current) throw new Error('no card fingerprint key configured');
  return { keyId: current.id, value: hmacHex(current.key, pan) };
}

/**
 * Every fingerprint the card may already be stored under, the current one first: then each older
 * fingerprint key, then the legacy derivation from each configured data key (the first data key
 * of the time made them, and an old data key stays configured to decrypt). A card keeps the
 * fingerprint it was first stored under (see settleCardFingerprints in libs/db), so no rotation
 * splits its history.
 */
export function cardFingerprintCandidates(
  fingerprintKeys: readonly DataKey[],
  dataKeys: readonly DataKey[],
  pan: string,
): CardFingerprint[] {
  const all = [
    ...fingerprintKeys.map((k) => ({ keyId: k.id, value: hmacHex(k.key, pan) })),
    ...dataKeys.map((k) => ({ keyId: LEGACY_FINGERPRINT_KEY_ID, value: hmacHex(legacyFingerprintKey(k.key), pan) })),
  ];
  return all.filter((f, i) => all.findIndex((g) => g.value === f.value) === i);
}

/** The stored columns of a clear card number (decisions §10): sealed, fingerprinted, masked. */
export interface CardColumns {
  cardEnc: string;
  cardKeyId: string;
  /** The fingerprints the card may be stored under, current first (cardFingerprintCandidates). */
  fingerprints: CardFingerprint[];
  cardBin: string;
  cardLast4: string;
  accountHash: string;
  display: string;
}

export function cardColumnsFromPan(
  keys: readonly DataKey[],
  fingerprintKeys: readonly DataKey[],
  pan: string,
): CardColumns {
  return { ...sealCardNumber(keys, pan), fingerprints: cardFingerprintCandidates(fingerprintKeys, keys, pan) };
}

/**
 * The stored columns of a clear card number but its fingerprints, for a caller that made those
 * earlier (the intake looks them up before it seals the rest).
 */
export function sealCardNumber(keys: readonly DataKey[], pan: string): Omit<CardColumns, 'fingerprints'> {
  const sealed = seal(keys, pan, 'card');
  return {
    cardEnc: sealed.value,
    cardKeyId: sealed.keyId,
    cardBin: pan.slice(0, 6),
    cardLast4: pan.slice(-4),
    accountHash: accountHash(pan),
    display: maskCardNumber(pan),
  };
}
