import { randomBytes } from 'node:crypto';
import KSUID from 'ksuid';

const URL_SAFE = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

// Random bytes are drawn from a pool refilled 16 KiB at a time: one syscall per ~400 vids, which
// matters when a 1000-transaction batch needs 3000 of them.
const POOL_SIZE = 16 * 1024;
let pool = randomBytes(POOL_SIZE);
let poolOffset = 0;

/** Random url-safe string of exactly `length` characters (6 bits of entropy each). */
export function randomUrlSafe(length: number): string {
  const bytes = randomPoolBytes(length);
  let out = '';
  for (let i = 0; i < length; i++) out += URL_SAFE[bytes[i]! & 63];
  return out;
}

/**
 * `n` random bytes from the same pool (AES-GCM IVs: a 1000-card batch seals 1000 of them). A view,
 * never overwritten: the pool is replaced, not refilled in place, and consumed bytes are not reused.
 */
export function randomPoolBytes(n: number): Buffer {
  if (poolOffset + n > POOL_SIZE) {
    pool = randomBytes(POOL_SIZE);
    poolOffset = 0;
  }
  const out = pool.subarray(poolOffset, poolOffset + n);
  poolOffset += n;
  return out;
}

/** `vid` of transactions, attempts, refunds, accounts, payment methods: exactly 40 chars (decisions §3). */
export const newVid = (): string => randomUrlSafe(40);
/** `merchant_vid`: 40 characters. */
export const newMerchantVid = (): string => randomUrlSafe(40);
/** `retain_transaction_id` of a retry attempt: at most 40 characters. */
export const newRetainTransactionId = (): string => `rt_${randomUrlSafe(37)}`;
/** `request_id` of a submission: 32 lowercase hex characters. */
export const newRequestId = (): string => randomBytes(16).toString('hex');
/** `message_id` of a push: 27-character KSUID, time-sortable. */
export const newMessageId = (): string => KSUID.randomSync().string;
/** API key: `rk_` + 40 random url-safe characters; shown once, stored as a hash. */
export const newApiKey = (): string => `rk_${randomUrlSafe(40)}`;
/** Webhook signing secret, Standard Webhooks style: `whsec_` + base64 of 32 random bytes. */
export const newWebhookSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`;

export const REQUEST_ID_RE = /^[0-9a-f]{32}$/;
export const VID_RE = /^[A-Za-z0-9_-]{40}$/;
/** Policy experiment id (issue 11): `exp_` and 36 url-safe characters. */
export const newExperimentId = (): string => `exp_${randomUrlSafe(36)}`;

/** The service's reserved metadata prefix (service-spec Metadata): merchants' keys with it are refused. */
export const METADATA_RESERVED_PREFIX = 'retain:';
