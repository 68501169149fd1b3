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
