import http from 'node:http';
import { createHash } from 'node:crypto';
import { loadConfig } from '@retain/config';
import { cardFingerprintCandidates } from '@retain/domain';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApiClient,
  closeTestDb,
  createMerchant,
  startApp,
  testDb,
  txn,
  uniqueId,
  type RunningApp,
  type TestMerchant,
} from '@retain/testing';

const PAN = '4111111111111111';

// decisions §4: every synchronous rule of POST /retain/transactions, through the real app.
describe('POST /retain/transactions', () => {
  let api: RunningApp;
  let merchant: TestMerchant;
  let client: ApiClient;

  beforeAll(async () => {
    api = await startApp('intake-api');
    merchant = await createMerchant();
    client = new ApiClient(api.url, merchant.api_key);
  });
  afterAll(async () => {
    await api.stop();
    await closeTestDb();
  });

  const rowsOf = async (ids: string[]) =>
    (await testDb()).query(`SELECT * FROM transactions WHERE merchant_txn_id = ANY($1::text[])`, [ids]);

  it('accepts a valid batch with 200 and no body, saving rows, the submission and the review outbox row', async () => {
    const batch = [txn(), txn({}, '5555555555554444')];
    const r = await client.submit(batch);
    expect(r.status).toBe(200);
    expect(r.text).toBe('');
    const requestId = r.headers.get('x-request-id')!;
    const rows = await rowsOf(batch.map((t) => t['id'] as string));
    expect(rows).toHaveLength(2);
    for (const row of rows) {
      expect(row.status).toBe('Failed');
      expect(row.card_enc).not.toContain(PAN);
      expect(JSON.stringify(row)).not.toContain(PAN);
      expect(row.account_hash).toMatch(/^[0-9a-f]{40}$/);
    }
    const [sub] = await (await testDb()).query(`SELECT * FROM submissions WHERE request_id = $1`, [requestId]);
    expect(sub.accepted_count).toBe(2);
    const outbox = await (await testDb()).query(`SELECT * FROM outbox WHERE payload->>'submissionId' = $1`, [sub.id]);
    expect(outbox).toHaveLength(1);
    expect(outbox[0].queue).toBe('submission.review');
  });

  it("stores a network token's cryptogram sealed, never in clear, from the moment it is accepted", async () => {
    const cryptogram = 'AgAAAAAAAIR8CQrXcIhbQAAAAAA=';
    const t = txn({
      is_network_token: 1,
      cryptogram,
      eci_indicator: '05',
      payment_method: {
        ...(txn()['payment_method'] as object),
        id: 'ntok_sandbox_1111',
        is_tokenized: true,
        credit_card: { account: '400000', expiration_date: '202912' },
      },
    });
    const r = await client.submit([t]);
    expect(r.status).toBe(200);
    const [row] = await rowsOf([t['id'] as string]);
    expect(row.cryptogram).toBeTruthy();
    expect(JSON.stringify(row)).not.toContain(cryptogram);
  });

  it('reads back a submitted transaction with a masked card and the computed account_hash', async () => {
    const t = txn();
    expect((await client.submit([t])).status).toBe(200);
    const r = await client.request('GET', `/v1/retain/transactions/${t['id']}`);
    expect(r.status).toBe(200);
    expect(r.json.object).toBe('List');
    expect(r.json.total_count).toBe(1);
    const got = r.json.data[0];
    expect(got.id).toBe(t['id']);
    expect(got.vid).toHaveLength(40);
    expect(got.status).toBe('Failed');
    expect(got.amount).toBe(19.99);
    expect(got.retry_number).toBe(0);
    expect(got.payment_method.credit_card.account).toBe('411111******1111');
    expect(got.payment_method.type).toBe('CreditCard');
    expect(got.payment_method.vid).toHaveLength(40);
    expect(got.account.vid).toHaveLength(40);
    expect(got.refunds).toEqual([]);
    expect(got.metadata).toEqual({ plan: 'gold' });
    expect(r.text).not.toContain(PAN);
  });

  it('lists every error of a bad transaction in a 207 and saves only the good ones', async () => {
    const good = txn();
    const bad = txn({ amount: -1, currency: 'ZZZ', timestamp: 'yesterday', division_number: undefined });
    (bad['payment_method'] as any).credit_card.expiration_date = '2029-12';
    const r = await client.submit([good, bad]);
    expect(r.status).toBe(207);
    expect(r.json.success_count).toBe(1);
    expect(r.json.error_count).toBe(1);
    const entry = r.json.rejected[0];
    expect(entry.id).toBe(bad['id']);
    const codes = entry.errors.map((e: any) => e.code);
    expect(codes).toContain('RET006');
    expect(codes.filter((c: string) => c === 'RET009').length).toBeGreaterThanOrEqual(3);
    expect(entry.errors.map((e: any) => e.message).join(' ')).toMatch(/division_number/);
    const rows = await rowsOf([good['id'] as string, bad['id'] as string]);
    expect(rows.map((x: any) => x.merchant_txn_id)).toEqual([good['id']]);
  });

  it('names missing card elements and refuses a clear number that fails Luhn with RET010', async () => {
    const noExp = txn();
    delete (noExp['payment_method'] as any).credit_card.expiration_date;
    const badLuhn = txn({}, '4111111111111112');
    const r = await client.submit([noExp, badLuhn]);
    expect(r.status).toBe(207);
    const [a, b] = r.json.rejected;
    expect(a.errors).toContainEqual({
      code: 'RET006',
      message: 'Missing transaction element: payment_method.credit_card.expiration_date',
    });
    expect(b.errors.map((e: any) => e.code)).toContain('RET010');
    expect(r.text).not.toContain('4111111111111112');
  });

  it('names a missing account_hash of a masked account with RET006 (service-spec: "then supply account_hash")', async () => {
    const masked = txn({}, '411111******1111');
    const r = await client.submit([masked]);
    expect(r.status).toBe(207);
    expect(r.json.rejected).toEqual([
      {
        id: masked['id'],
        errors: [{ code: 'RET006', message: 'Missing transaction element: payment_method.credit_card.account_hash' }],
      },
    ]);
    expect(await rowsOf([masked['id'] as string])).toHaveLength(0);
  });

  // service-spec CreditCard.account_hash: "May be left blank when the full number is sent; optional with
  // tokenization." Blank is absent: the full number's hash is computed, a token's stays null, and a masked
  // number gets the RET006 of a missing hash.
  it('takes a blank account_hash as absent: accepted with a full number or a token, RET006 with a masked number', async () => {
    const withHash = (card: string, hash: string, extra: Record<string, unknown> = {}) => {
      const t = txn({}, card);
      const pm = t['payment_method'] as any;
      Object.assign(pm, extra);
      pm.credit_card = { ...pm.credit_card, account_hash: hash };
      return t;
    };
    const clear = withHash(PAN, '');
    const spaced = withHash('5555555555554444', '  ');
    const token = withHash('411111', '', { id: 'tok_sandbox_1111', is_tokenized: true });
    const masked = withHash('411111******1111', '');
    const badHash = withHash(PAN, 'abc');
    const r = await client.submit([clear, spaced, token, masked, badHash]);
    expect(r.status).toBe(207);
    expect(r.json.success_count).toBe(3);
    expect(r.json.rejected).toEqual([
      {
        id: masked['id'],
        errors: [{ code: 'RET006', message: 'Missing transaction element: payment_method.credit_card.account_hash' }],
      },
      {
        id: badHash['id'],
        errors: [
          {
            code: 'RET009',
            message:
              'Schema validation error: payment_method.credit_card.account_hash must be 40 hexadecimal characters',
          },
        ],
      },
    ]);
    const rows = await rowsOf([clear, spaced, token, masked, badHash].map((t) => t['id'] as string));
    const hashOf = Object.fromEntries(rows.map((x: any) => [x.merchant_txn_id, x.account_hash]));
    expect(hashOf).toEqual({
      [clear['id'] as string]: createHash('sha1').update(PAN).digest('hex'),
      [spaced['id'] as string]: createHash('sha1').update('5555555555554444').digest('hex'),
      [token['id'] as string]: null,
    });
    const got = await client.request('GET', `/v1/retain/transactions/${clear['id']}`);
    expect(got.json.data[0].payment_method.credit_card.account_hash).toBe(hashOf[clear['id'] as string]);
  });

  it('rejects a repeated id in one call with RETDUP (first processed) and a prior one with RETDUP2', async () => {
    const t = txn();
    const again = { ...txn(), id: t['id'] };
    const r = await client.submit([t, again]);
    expect(r.status).toBe(207);
    expect(r.json.success_count).toBe(1);
    expect(r.json.rejected).toEqual([
      { id: t['id'], errors: [{ code: 'RETDUP', message: 'Duplicate transaction within submission' }] },
    ]);
    const r2 = await client.submit([{ ...txn(), id: t['id'] }]);
    expect(r2.status).toBe(207);
    expect(r2.json.rejected[0].errors[0].code).toBe('RETDUP2');
  });

  it('answers RET004 for an id already finished and RET003 for a subscription still in recovery', async () => {
    const done = txn();
    expect((await client.submit([done])).status).toBe(200);
    await (
      await testDb()
    ).query(`UPDATE transactions SET status = 'Captured' WHERE merchant_txn_id = $1`, [done['id']]);
    const r = await client.submit([{ ...txn(), id: done['id'] }]);
    expect(r.json.rejected[0].errors[0].code).toBe('RET004');

    const first = txn();
    expect((await client.submit([first])).status).toBe(200);
    const sameSub = txn({ subscription: first['subscription'] });
    const r2 = await client.submit([sameSub]);
    expect(r2.status).toBe(207);
    expect(r2.json.rejected[0].errors[0].code).toBe('RET003');
    expect(await rowsOf([sameSub['id'] as string])).toHaveLength(0);
  });

  it('lists every failure of a transaction: a bad item that repeats a stored id or subscription gets those codes too', async () => {
    const db = await testDb();
    const amountError = {
      code: 'RET009',
      message: 'Schema validation error: amount must be greater than 0',
    };
    // A stored id still being recovered: RETDUP2 beside the item's own RET009; nothing saved or changed.
    const a = txn();
    expect((await client.submit([a])).status).toBe(200);
    const again = { ...txn(), id: a['id'], amount: 0 };
    const r = await client.submit([again]);
    expect(r.status).toBe(207);
    expect(r.json).toEqual({
      success_count: 0,
      error_count: 1,
      rejected: [
        {
          id: a['id'],
          errors: [amountError, { code: 'RETDUP2', message: 'Duplicate transaction from prior submission' }],
        },
      ],
    });
    expect((await rowsOf([a['id'] as string])).map((x: any) => [x.amount_minor, x.subscription_id])).toEqual([
      ['1999', (a['subscription'] as { id: string }).id],
    ]);

    // A stored id that finished: RET004; a later repeat of it in the same call: RETDUP as well.
    const done = txn();
    expect((await client.submit([done])).status).toBe(200);
    await db.query(`UPDATE transactions SET status = 'Captured' WHERE merchant_txn_id = $1`, [done['id']]);
    const r2 = await client.submit([
      { ...txn(), id: done['id'], amount: 0 },
      { ...txn(), id: done['id'] },
    ]);
    expect(r2.json.rejected.map((x: any) => x.errors.map((e: any) => e.code))).toEqual([
      ['RET009', 'RET004'],
      ['RETDUP', 'RET004'],
    ]);

    // Another transaction of its subscription still in recovery: RET003 beside RET009.
    const bad = txn({ subscription: a['subscription'], amount: 0 });
    const r3 = await client.submit([bad]);
    expect(r3.json.rejected).toEqual([
      {
        id: bad['id'],
        errors: [
          amountError,
          { code: 'RET003', message: 'A transaction for the same subscription is still processing' },
        ],
      },
    ]);
    expect(await rowsOf([bad['id'] as string])).toHaveLength(0);

    // dryrun=1 answers the same.
    const dry = await client.submit([again], '?dryrun=1');
    expect(dry.json.rejected[0].errors.map((e: any) => e.code)).toEqual(['RET009', 'RETDUP2']);
  });

  it('lists RET012 (external_id of another account) beside RETDUP2 and RET003', async () => {
    const ext = `ext_${uniqueId()}`;
    const holder = txn({ account: { id: `acct_h_${uniqueId()}`, external_id: ext } });
    expect((await client.submit([holder])).status).toBe(200);
    const clash = {
      ...txn({ subscription: holder['subscription'] }),
      id: holder['id'],
      account: { id: `acct_o_${uniqueId()}`, external_id: ext },
    };
    const r = await client.submit([clash]);
    expect(r.status).toBe(207);
    expect(r.json.rejected[0].errors.map((e: any) => e.code)).toEqual(['RETDUP2', 'RET012']);
    const other = txn({
      subscription: holder['subscription'],
      account: { id: `acct_p_${uniqueId()}`, external_id: ext },
    });
    const r2 = await client.submit([other]);
    expect(r2.json.rejected[0].errors.map((e: any) => e.code)).toEqual(['RET003', 'RET012']);
  });

  it('concurrent calls of one merchant: disjoint batches all land; racing on an id or a subscription, one wins', async () => {
    // Eight clients at once, 50 transactions each, nothing shared: all 400 saved.
    const batches = Array.from({ length: 8 }, () => Array.from({ length: 50 }, () => txn()));
    const answers = await Promise.all(batches.map((b) => client.submit(b)));
    expect(answers.map((a) => a.status)).toEqual(Array(8).fill(200));
    expect(await rowsOf(batches.flat().map((t) => t['id'] as string))).toHaveLength(400);

    // Eight calls carry the same transaction id (each beside its own): exactly one saves it.
    const shared = txn();
    const withId = Array.from({ length: 8 }, () => [{ ...txn(), id: shared['id'] }, txn()]);
    const idAnswers = await Promise.all(withId.map((b) => client.submit(b)));
    expect(idAnswers.filter((a) => a.status === 200)).toHaveLength(1);
    for (const a of idAnswers.filter((x) => x.status === 207)) {
      expect(a.json).toMatchObject({ success_count: 1, error_count: 1 });
      expect(a.json.rejected[0]).toMatchObject({ id: shared['id'], errors: [{ code: 'RETDUP2' }] });
    }
    expect(await rowsOf([shared['id'] as string])).toHaveLength(1);

    // Eight calls carry a new transaction of one subscription: one is recovering it, seven get RET003.
    const subscription = { id: `sub_${uniqueId()}` };
    const sameSub = Array.from({ length: 8 }, () => [txn({ subscription }), txn()]);
    const subAnswers = await Promise.all(sameSub.map((b) => client.submit(b)));
    expect(subAnswers.filter((a) => a.status === 200)).toHaveLength(1);
    expect(subAnswers.filter((a) => a.status === 207).map((a) => a.json.rejected[0].errors[0].code)).toEqual(
      Array(7).fill('RET003'),
    );
    const saved = await (
      await testDb()
    ).query(`SELECT count(*)::int AS n FROM transactions WHERE subscription_id = $1`, [subscription.id]);
    expect(saved[0].n).toBe(1);
    // Every other transaction of those calls was saved.
    expect(await rowsOf([...withId, ...sameSub].map((b) => b[1]!['id'] as string))).toHaveLength(16);
  });

  it('saves a batch of 1000 (several INSERT statements) whole or runs it again whole: a race on its last item', async () => {
    // The rows go in as several INSERTs of one transaction (the first chunk is 100 rows). Two calls
    // of 1000 share their last id: the later one meets the winner's row in its last INSERT, after
    // its earlier chunks went in, and runs again from the start: nothing of the first run stays.
    // Rows go in ordered by subscription id (then id): the shared one's sorts after every other's.
    const shared = txn({ subscription: { id: `sub_zz_${uniqueId()}` } }, '5555555555554444');
    const batches = [0, 1].map(() => [
      ...Array.from({ length: 999 }, (_, i) => txn({}, i % 2 ? PAN : '5555555555554444')),
      { ...shared },
    ]);
    const answers = await Promise.all(batches.map((b) => client.submit(b)));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 207]);
    const loser = answers.find((a) => a.status === 207)!;
    expect(loser.json).toEqual({
      success_count: 999,
      error_count: 1,
      rejected: [{ id: shared['id'], errors: [{ code: 'RETDUP2', message: expect.any(String) }] }],
    });
    const db = await testDb();
    const [{ n, subs, fingerprints }] = await db.query(
      `SELECT count(*)::int AS n, count(DISTINCT submission_id)::int AS subs,
              count(DISTINCT card_hmac) FILTER (WHERE card_last4 = '4444')::int AS fingerprints
         FROM transactions WHERE merchant_txn_id = ANY($1::text[])`,
      [batches.flat().map((t) => t['id'])],
    );
    expect(n).toBe(1999); // each id once
    expect(subs).toBe(2);
    expect(fingerprints).toBe(1); // one card, one fingerprint, first chunk to last
    const counts = await db.query(
      `SELECT s.accepted_count, s.rejected_count, count(t.id)::int AS saved
         FROM submissions s JOIN transactions t ON t.submission_id = s.id
        WHERE t.merchant_txn_id = ANY($1::text[]) GROUP BY s.id ORDER BY s.accepted_count`,
      [batches.flat().map((t) => t['id'])],
    );
    expect(counts).toEqual([
      { accepted_count: 999, rejected_count: 1, saved: 999 },
      { accepted_count: 1000, rejected_count: 0, saved: 1000 },
    ]);
  });

  it('a card stored under an older fingerprint keeps it in every chunk of a 1000-row batch', async () => {
    // Each INSERT chunk settles its cards' fingerprints against the merchant's stored rows: the card
    // at index 0 (first chunk), 500 and 999 (later chunks) must all find the older one.
    const card = '4000000000000077';
    const own = new ApiClient(api.url, (await createMerchant()).api_key);
    const config = loadConfig('intake-api', process.env);
    const [current, older] = cardFingerprintCandidates(config.cardFingerprintKeys, config.cardKeys, card);
    expect(older).toBeDefined();
    const first = txn({}, card);
    expect((await own.submit([first])).status).toBe(200);
    const db = await testDb();
    // As if stored before a key rotation.
    await db.query(`UPDATE transactions SET card_hmac = $2, card_hmac_key_id = $3 WHERE merchant_txn_id = $1`, [
      first['id'],
      older!.value,
      older!.keyId,
    ]);
    const batch = Array.from({ length: 1000 }, (_, i) => txn({}, [0, 500, 999].includes(i) ? card : PAN));
    expect((await own.submit(batch)).status).toBe(200);
    const rows: { card_hmac: string; card_hmac_key_id: string }[] = await db.query(
      `SELECT card_hmac, card_hmac_key_id FROM transactions WHERE merchant_txn_id = ANY($1::text[])`,
      [[0, 500, 999].map((i) => batch[i]!['id'])],
    );
    expect(rows).toEqual(Array(3).fill({ card_hmac: older!.value, card_hmac_key_id: older!.keyId }));
    expect(older!.value).not.toBe(current!.value);
  });

  it('dryrun=1 answers the same and leaves nothing behind', async () => {
    const ok = txn();
    const bad = txn({ amount: 0 });
    const before = await (await testDb()).query(`SELECT count(*)::int AS n FROM submissions`);
    const r = await client.submit([ok, bad], '?dryrun=1');
    expect(r.status).toBe(207);
    expect(r.json.success_count).toBe(1);
    expect(await rowsOf([ok['id'] as string])).toHaveLength(0);
    const after = await (await testDb()).query(`SELECT count(*)::int AS n FROM submissions`);
    expect(after[0].n).toBe(before[0].n);
    expect((await client.submit([txn()], '?dryrun=1')).status).toBe(200);
    const bad2 = await client.submit([txn()], '?dryrun=2');
    expect(bad2.status).toBe(400);
    expect(bad2.json).toEqual({ code: 'RET400', message: 'Invalid parameter: dryrun' });
  });

  it('accepts a batch of 1000 and refuses 1001, an empty array and a body that is not JSON', async () => {
    const batch = Array.from({ length: 1000 }, () => txn());
    const r = await client.submit(batch);
    expect(r.status).toBe(200);
    const [{ n }] = await (
      await testDb()
    ).query(`SELECT count(*)::int AS n FROM transactions WHERE merchant_txn_id = ANY($1::text[])`, [
      batch.map((t) => t['id']),
    ]);
    expect(n).toBe(1000);
    for (const body of [
      { transactions: Array.from({ length: 1001 }, () => txn()) },
      { transactions: [] },
      { nope: [] },
      '{"transactions": [',
    ]) {
      const res = await client.request('POST', '/v1/retain/transactions', body);
      expect(res.status).toBe(400);
      expect(res.json).toEqual({ code: 'RET400', message: 'Invalid parameter: transactions' });
    }
  });

  it('answers 413 for a body over 10 MiB', async () => {
    const huge = JSON.stringify({ transactions: [txn({ metadata: { k: 'x'.repeat(11 * 1024 * 1024) } })] });
    // The server answers from Content-Length before reading the body, and closes the socket on a
    // body it will not read: send the first chunk, wait for the answer, send the rest only if the
    // server is still reading (so a write racing the close cannot fail the test).
    const res = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = http.request(`${api.url}/v1/retain/transactions`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${merchant.api_key}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(huge),
        },
      });
      let answered = false;
      req.on('response', (r) => {
        answered = true;
        let text = '';
        r.on('data', (c: Buffer) => (text += c.toString()));
        r.on('end', () => {
          resolve({ status: r.statusCode ?? 0, text });
          req.destroy();
        });
      });
      req.on('error', (err) => (answered ? undefined : reject(err)));
      req.write(huge.slice(0, 65536));
      setTimeout(() => (answered ? undefined : req.end(huge.slice(65536))), 2000);
    });
    expect(res.status).toBe(413);
    expect(JSON.parse(res.text).code).toBe('RET413');
  });

  it('keeps tenants apart: another merchant sees 404 for my id and an empty list', async () => {
    const mine = txn();
    expect((await client.submit([mine])).status).toBe(200);
    const other = await createMerchant();
    const otherClient = new ApiClient(api.url, other.api_key);
    const r = await otherClient.request('GET', `/v1/retain/transactions/${mine['id']}`);
    expect(r.status).toBe(404);
    expect(r.json).toEqual({ code: 'RET0404', message: 'No matching results found' });
    expect((await otherClient.request('GET', '/v1/retain/transactions')).json.data).toEqual([]);
    // The same merchant id may be used by another tenant independently.
    expect((await otherClient.submit([{ ...txn(), id: mine['id'] }])).status).toBe(200);
  });

  it('never puts a full card number in a response, a log line or a Redis job', async () => {
    const cards = ['4000000000000077', '5555555555554444'];
    const r = await client.submit([txn({}, cards[0]), txn({ amount: -5 }, cards[1])]);
    expect(r.status).toBe(207);
    for (const c of cards) expect(r.text).not.toContain(c);
    await new Promise((res) => setTimeout(res, 300));
    for (const c of cards) expect(api.logs()).not.toContain(c);
    const redis = new Redis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
    try {
      const prefix = process.env['QUEUE_PREFIX']!;
      const keys = await redis.keys(`${prefix}*`);
      for (const key of keys) {
        const type = await redis.type(key);
        const dump =
          type === 'hash' ? JSON.stringify(await redis.hgetall(key)) : type === 'string' ? await redis.get(key) : '';
        for (const c of cards) expect(dump ?? '').not.toContain(c);
      }
    } finally {
      redis.disconnect();
    }
  });

  // service-spec: an account's external_id is unique within a merchant's data; creating an account
  // with an existing external_id returns `Failed to update Account`.
  describe('account external_id', () => {
    const withAccount = (accountId: string, externalId: string | null) =>
      txn({ account: { id: accountId, external_id: externalId, email: 'jane@example.com' } });
    const clash = { code: 'RET012', message: 'Failed to update Account' };

    it('refuses a second account with an external_id another account of the merchant holds; the holder may reuse it', async () => {
      const ext = `ext_${uniqueId()}`;
      const first = withAccount(`acct_a_${uniqueId()}`, ext);
      expect((await client.submit([first])).status).toBe(200);

      const other = withAccount(`acct_b_${uniqueId()}`, ext);
      const r = await client.submit([other]);
      expect(r.status).toBe(207);
      expect(r.json).toEqual({
        success_count: 0,
        error_count: 1,
        rejected: [{ id: other['id'], errors: [clash] }],
      });
      expect(await rowsOf([other['id'] as string])).toHaveLength(0);

      // The same account with its own external_id again, and another merchant with the same value: fine.
      const again = withAccount((first['account'] as { id: string }).id, ext);
      expect((await client.submit([again])).status).toBe(200);
      const elsewhere = await createMerchant();
      const otherClient = new ApiClient(api.url, elsewhere.api_key);
      expect((await otherClient.submit([withAccount(`acct_c_${uniqueId()}`, ext)])).status).toBe(200);
    });

    it('refuses the later of two accounts with one external_id in one call, and keeps the rest of the batch', async () => {
      const ext = `ext_${uniqueId()}`;
      const a = withAccount(`acct_a_${uniqueId()}`, ext);
      const b = withAccount(`acct_b_${uniqueId()}`, ext);
      const c = withAccount(`acct_c_${uniqueId()}`, null);
      const r = await client.submit([a, b, c]);
      expect(r.status).toBe(207);
      expect(r.json).toEqual({ success_count: 2, error_count: 1, rejected: [{ id: b['id'], errors: [clash] }] });
      expect((await rowsOf([a['id'] as string, b['id'] as string, c['id'] as string])).length).toBe(2);
    });

    it('lets exactly one of two concurrent calls give one external_id to two accounts', async () => {
      const ext = `ext_${uniqueId()}`;
      const a = withAccount(`acct_a_${uniqueId()}`, ext);
      const b = withAccount(`acct_b_${uniqueId()}`, ext);
      const [ra, rb] = await Promise.all([client.submit([a]), client.submit([b])]);
      expect([ra.status, rb.status].sort()).toEqual([200, 207]);
      expect(await rowsOf([a['id'] as string, b['id'] as string])).toHaveLength(1);
    });
  });

  it('answers 404 RET0404 for unknown routes and 405 for a wrong method', async () => {
    const r = await client.request('GET', '/v1/retain/nothing-here');
    expect(r.status).toBe(404);
    expect(r.json.code).toBe('RET0404');
    const m = await client.request('DELETE', '/v1/retain/transactions');
    expect(m.status).toBe(405);
    expect(m.headers.get('allow')).toContain('GET');
    expect(m.headers.get('allow')).toContain('POST');
    // Routes with path parameters too, under /v1, /v2 and the bare alias, refunds included.
    for (const prefix of ['/v1', '/v2', '']) {
      for (const [method, path, allow] of [
        ['DELETE', '/retain/transactions/abc', 'GET'],
        ['POST', '/retain/transactions/abc', 'GET'],
        ['PUT', '/retain/transactions/abc', 'GET'],
        ['DELETE', '/retain/refunds/abc', 'GET'],
        ['POST', '/retain/refunds/abc', 'GET'],
        ['DELETE', '/retain/refunds', 'POST'],
      ] as const) {
        const r = await client.request(method, `${prefix}${path}`, method === 'DELETE' ? undefined : {});
        expect(r.status, `${method} ${prefix}${path}`).toBe(405);
        expect(r.json.code).toBe('RET405');
        expect(r.headers.get('allow')?.split(', ')).toContain(allow);
        expect(r.headers.get('allow')).not.toContain(method);
      }
    }
    expect((await client.request('DELETE', '/v1/retain/nothing/abc')).status).toBe(404);
    const u = await client.request('GET', `/v1/retain/transactions/${uniqueId()}`);
    expect(u.status).toBe(404);
    expect(u.json).toEqual({ code: 'RET0404', message: 'No matching results found' });
  });
});
