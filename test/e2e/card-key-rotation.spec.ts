import { createHmac, hkdfSync } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
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

const FAST = { RETRY_TIME_SCALE: '1000000', JOB_LOCK_MS: '2000' };
const OLD_KEY = Buffer.alloc(32, 1);
const NEW_KEY = Buffer.alloc(32, 2);
const BEFORE = { ...FAST, CARD_DATA_KEY: `old:${OLD_KEY.toString('base64')}` };
// The rotation as README describes it: a new first key encrypts, the old one stays to decrypt.
const AFTER = { ...FAST, CARD_DATA_KEY: `new:${NEW_KEY.toString('base64')},old:${OLD_KEY.toString('base64')}` };
// 4100000000000019 declines 41 (lost card, Visa category 1): the card is never retried again.
const LOST_CARD = '4100000000000019';

/** The fingerprint as it was made before fingerprint keys existed: HKDF of the first data key. */
function legacyFingerprint(dataKey: Buffer, pan: string): string {
  const k = Buffer.from(hkdfSync('sha256', dataKey, Buffer.alloc(0), 'retain card fingerprint', 32));
  return createHmac('sha256', k).update(pan).digest('hex');
}

// Issue 9 item 5: the per-card fingerprint behind the network limits must survive a rotation of
// CARD_DATA_KEY, or every card's history and permanent blocks are forgotten at once.
describe('card blocks survive a CARD_DATA_KEY rotation', () => {
  // Its own database and queues: a time-scaled recovery window has no room for other files' backlog.
  usePrivateDatabase('ckr');
  let apps: RunningApp[] = [];
  const start = async (env: Record<string, string>) => {
    // One after the other: a busy machine starts three at once slowly.
    for (const a of ['intake-api', 'submission-validator', 'retry-worker'] as const)
      apps.push(await startApp(a, { env }));
    return apps[0]!;
  };
  const stop = async () => {
    await Promise.all(apps.map((a) => a.stop()));
    apps = [];
  };
  afterAll(async () => {
    await stop();
    await closeTestDb();
  });

  /** Submits one transaction and answers its final status followed by its attempts. */
  const shape = async (client: ApiClient, t: Record<string, unknown>): Promise<string[]> => {
    expect((await client.submit([t])).status).toBe(200);
    const id = t['id'] as string;
    const x = await waitFor(
      async () => {
        const r = (await client.request('GET', `/v1/retain/transactions/${id}?related=true`)).json?.data as any[];
        return ['Captured', 'Cancelled', 'Stopped'].includes(r?.[0]?.status) ? r : null;
      },
      { timeoutMs: 45_000, what: `final status of ${id}` },
    );
    return [x[0].status, ...x.slice(1).map((y: any) => `${y.status}:${y.auth_code}`)];
  };

  it('rows sealed under a bare CARD_DATA_KEY (key id `default`) are read after the key is named in a kid:base64 list', async () => {
    const db = await testDb();
    // decisions §11 gives CARD_DATA_KEY no format: a bare base64 key is accepted, as the key id `default`.
    const bare = { ...FAST, CARD_DATA_KEY: OLD_KEY.toString('base64') };
    for (const a of ['intake-api', 'submission-validator'] as const) apps.push(await startApp(a, { env: bare }));
    const merchant = await createMerchant();
    let client = new ApiClient(apps[0]!.url, merchant.api_key);
    const t = txn({});
    expect((await client.submit([t])).status).toBe(200);
    // Reviewed and scheduled, not yet charged (no retry-worker): the card number waits sealed.
    await waitFor(
      async () => {
        const r = (await client.request('GET', `/v1/retain/transactions/${t['id']}`)).json?.data as any[];
        return r?.[0]?.next_activity ? r : null;
      },
      { timeoutMs: 45_000, what: 'the review' },
    );
    const [row] = await db.query(`SELECT card_key_id FROM transactions WHERE merchant_txn_id = $1`, [t['id']]);
    expect(row.card_key_id).toBe('default');
    await stop();

    // The same key now named k1, behind a new first key: the retry-worker still opens the card.
    const api = await start({
      ...FAST,
      CARD_DATA_KEY: `new:${NEW_KEY.toString('base64')},k1:${OLD_KEY.toString('base64')}`,
    });
    client = new ApiClient(api.url, merchant.api_key);
    const x = await waitFor(
      async () => {
        const r = (await client.request('GET', `/v1/retain/transactions/${t['id']}?related=true`)).json?.data as any[];
        return ['Captured', 'Cancelled'].includes(r?.[0]?.status) ? r : null;
      },
      { timeoutMs: 45_000, what: `final status of ${t['id']}` },
    );
    expect(x.map((y: any) => y.status)).toEqual(['Captured', 'Captured']);
    await stop();
  });

  it('a card blocked before the rotation (hard decline) is refused after it, with no attempt', async () => {
    const db = await testDb();
    let api = await start(BEFORE);
    const plain = await createMerchant();
    const legacy = await createMerchant();
    const clients = (url: string) => [plain, legacy].map((m) => new ApiClient(url, m.api_key));
    let [a, b] = clients(api.url);
    expect(await shape(a!, txn({}, LOST_CARD))).toEqual(['Cancelled', 'Failed:41']);
    expect(await shape(b!, txn({}, LOST_CARD))).toEqual(['Cancelled', 'Failed:41']);
    await stop();

    // Rows fingerprinted before this release carry the old derivation (from the first data key),
    // marked `legacy` by the migration; the second merchant's block is turned into such rows.
    const old = legacyFingerprint(OLD_KEY, LOST_CARD);
    const [{ id: legacyMerchantId }] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [legacy.login]);
    await db.query(`UPDATE transactions SET card_hmac = $2, card_hmac_key_id = 'legacy' WHERE merchant_id = $1`, [
      legacyMerchantId,
      old,
    ]);
    await db.query(`UPDATE attempts SET card_hmac = $2 WHERE merchant_id = $1`, [legacyMerchantId, old]);

    api = await start(AFTER);
    [a, b] = clients(api.url);
    // The same card, now as a clear number and as a token of the processor (de-tokenized by the review).
    const token = (): Record<string, unknown> =>
      txn({
        payment_method: {
          id: 'tok_sandbox_0019',
          is_tokenized: true,
          credit_card: { account: '410000', expiration_date: '202912' },
        },
      });
    for (const client of [a!, b!]) {
      expect(await shape(client, txn({}, LOST_CARD))).toEqual(['Cancelled']);
      expect(await shape(client, token())).toEqual(['Cancelled']);
    }
    // Not vacuous: a merchant without history still gets its first attempt on the card.
    const fresh = new ApiClient(api.url, (await createMerchant()).api_key);
    expect(await shape(fresh, txn({}, LOST_CARD))).toEqual(['Cancelled', 'Failed:41']);
  });
});
