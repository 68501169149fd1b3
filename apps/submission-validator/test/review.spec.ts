import { CompactEncrypt, importJWK } from 'jose';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '@retain/config';
import { ProcessorAccountsRepository } from '@retain/db';
import { QueueName, QueueRegistry, createRedis } from '@retain/queues';
import {
  ApiClient,
  WebhookReceiver,
  closeTestDb,
  createMerchant,
  startApp,
  testDb,
  txn,
  usePrivateDatabase,
  waitFor,
  type RunningApp,
  type TestMerchant,
} from '@retain/testing';

// decisions §6: the post-submission review through the real apps, and its `validation failed` push.
describe('post-submission review', () => {
  // Its own queue and outbox: the outbox sweeper and the review queue serve this file's rows, not a
  // backlog other files left in the worker's shared database (the job-runs-twice case waits on both).
  usePrivateDatabase('rev');
  let api: RunningApp;
  let validator: RunningApp;
  let dispatcher: RunningApp;
  let receiver: WebhookReceiver;
  let merchant: TestMerchant;
  let client: ApiClient;

  beforeAll(async () => {
    receiver = await new WebhookReceiver().start();
    [api, validator, dispatcher] = await Promise.all([
      startApp('intake-api'),
      startApp('submission-validator'),
      startApp('webhook-dispatcher'),
    ]);
    merchant = await createMerchant(receiver.url);
    client = new ApiClient(api.url, merchant.api_key);
  });
  afterAll(async () => {
    await Promise.all([api.stop(), validator.stop(), dispatcher.stop()]);
    await receiver.stop();
    await closeTestDb();
  });

  const encrypt = async (pan: string): Promise<string> => {
    const jwks = (await (await fetch(`${api.url}/v1/retain/keys`)).json()) as { keys: any[] };
    const jwk = jwks.keys[0];
    const key = await importJWK(jwk, 'RSA-OAEP-256');
    return new CompactEncrypt(new TextEncoder().encode(pan))
      .setProtectedHeader({ alg: 'RSA-OAEP-256', enc: 'A256GCM', kid: jwk.kid })
      .encrypt(key);
  };
  /** Review jobs the validator process finished (its own /metrics: retain_job_duration_seconds count). */
  const reviewRuns = async (): Promise<number> => {
    const text = await (await fetch(`${validator.url}/metrics`)).text();
    const line = text
      .split('\n')
      .find(
        (l) =>
          l.startsWith('retain_job_duration_seconds_count{') &&
          l.includes('queue="submission.review"') &&
          l.includes('result="ok"'),
      );
    return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
  };
  const row = async (id: string) =>
    (await (await testDb()).query(`SELECT * FROM transactions WHERE merchant_txn_id = $1`, [id]))[0];

  it('rejects a garbage JWE (RET010) and an unknown token (RET011) in one signed validation-failed push', async () => {
    const garbage = txn();
    (garbage['payment_method'] as any).credit_card.account = 'eyJhbGciOiJSU0EtT0FFUC0yNTYifQ.AAAA.BBBB.CCCC.DDDD';
    const token = txn({
      payment_method: { id: 'tok_nobody_knows', is_tokenized: true, credit_card: { account: '411111' } },
    });
    const good = txn();
    const r = await client.submit([garbage, token, good]);
    expect(r.status).toBe(200);
    const requestId = r.headers.get('x-request-id')!;
    const push = await waitFor(() => receiver.byEvent('validation failed')[0], { what: 'validation failed push' });
    const h = push.body.header;
    expect(h['request_id']).toBe(requestId);
    expect(h['payload_id']).toBe(requestId);
    expect(h['error_count']).toBe(2);
    expect(h['class_name']).toBe('retain');
    expect(h['author_id']).toBe(merchant.login);
    expect(h['merchant_vid']).toBe(merchant.merchant_vid);
    expect(String(h['message_id'])).toHaveLength(27);
    expect(String(h['event_timestamp'])).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+[+-]\d\d:\d\d$/);
    const content = push.body.content as any;
    expect(content.success_count).toBe(1);
    expect(content.error_count).toBe(2);
    const byId = Object.fromEntries(content.rejected.map((x: any) => [x.id, x.errors.map((e: any) => e.code)]));
    expect(byId[garbage['id'] as string]).toEqual(['RET010']);
    expect(byId[token['id'] as string]).toEqual(['RET011']);
    // Standard Webhooks signature, verified with the library merchants use.
    expect(() =>
      new Webhook(merchant.webhook_secret).verify(push.raw, push.headers as Record<string, string>),
    ).not.toThrow();
    expect(push.headers['webhook-id']).toBe(h['message_id']);

    const rejected = await row(garbage['id'] as string);
    expect(rejected.review_status).toBe('rejected');
    expect(rejected.status).toBe('Failed');
    expect(rejected.next_attempt_at).toBeNull();
    const fetched = await client.request('GET', `/v1/retain/transactions/${token['id']}`);
    expect(fetched.json.data[0].next_activity).toBeNull();
    await waitFor(async () => (await row(good['id'] as string)).review_status === 'passed', { what: 'good passes' });
    const ok = await client.request('GET', `/v1/retain/transactions/${good['id']}`);
    expect(ok.json.data[0].next_activity).toMatch(/^\d{4}-\d\d-\d\d$/);

    // A transaction rejected by the review may be submitted again with the same id.
    const again = { ...txn(), id: garbage['id'] };
    expect((await client.submit([again])).status).toBe(200);
  });

  it('a tokens-only account: a JWE that does not decrypt is RET010, one that does (a card number) and a clear card RET011', async () => {
    const m = await createMerchant(receiver.url);
    const db = await testDb();
    const [{ id: merchantId }] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [m.login]);
    await new ProcessorAccountsRepository(db, loadConfig('cli').cardKeys).set(merchantId, '', 'stripe', {
      secret_key: 'sk_test_tokensonly',
    });
    const garbage = txn();
    (garbage['payment_method'] as any).credit_card.account = 'eyJhbGciOiJSU0EtT0FFUC0yNTYifQ.AAAA.BBBB.CCCC.DDDD';
    const jwe = txn();
    (jwe['payment_method'] as any).credit_card.account = await encrypt('4111111111111111');
    const clear = txn();
    const r = await new ApiClient(api.url, m.api_key).submit([garbage, jwe, clear]);
    expect(r.status).toBe(200);
    const requestId = r.headers.get('x-request-id');
    const push = await waitFor(
      () => receiver.byEvent('validation failed').find((p) => p.body.header['request_id'] === requestId),
      { what: 'validation failed push' },
    );
    const content = push.body.content as any;
    const byId = Object.fromEntries(content.rejected.map((x: any) => [x.id, x.errors.map((e: any) => e.code)]));
    // decisions §6: RET010 is "card number invalid or cannot be decrypted"; §13: RET011 a card number for such an account.
    expect(byId).toEqual({
      [garbage['id'] as string]: ['RET010'],
      [jwe['id'] as string]: ['RET011'],
      [clear['id'] as string]: ['RET011'],
    });
  });

  it('reviews a long auth_code (64 characters) with a binding Mastercard advice code, and the rest of its batch', async () => {
    const long = txn(
      { auth_code: 'insufficient_funds_decline_'.padEnd(64, 'x'), network_advice_code: '30' },
      '5555555555554444',
    );
    const other = txn();
    expect((await client.submit([long, other])).status).toBe(200);
    for (const t of [long, other])
      await waitFor(async () => (await row(t['id'] as string)).review_status === 'passed', {
        what: `${t['id']} reviewed`,
      });
  });

  it('decrypts a valid JWE made from the published JWKS, stores it sealed and masked', async () => {
    const t = txn();
    (t['payment_method'] as any).credit_card.account = await encrypt('4000000000000077');
    expect((await client.submit([t])).status).toBe(200);
    const stored = await waitFor(async () => {
      const x = await row(t['id'] as string);
      return x.review_status === 'passed' ? x : null;
    });
    expect(stored.card_jwe).toBeNull();
    expect(JSON.stringify(stored)).not.toContain('4000000000000077');
    expect(stored.card_last4).toBe('0077');
    const r = await client.request('GET', `/v1/retain/transactions/${t['id']}`);
    expect(r.json.data[0].payment_method.credit_card.account).toBe('400000******0077');
    expect(r.json.data[0].payment_method.credit_card.account_hash).toMatch(/^[0-9a-f]{40}$/);
  });

  it('fails masked cards and a too-long payment method id with RET012; passes sandbox tokens', async () => {
    const masked = txn();
    (masked['payment_method'] as any).credit_card = {
      account: '411111******1111',
      account_hash: 'a'.repeat(40),
      expiration_date: '202912',
    };
    const longId = txn({
      payment_method: { id: `tok_sandbox_1111${'x'.repeat(80)}`, is_tokenized: true, credit_card: {} },
    });
    const tok = txn({ payment_method: { id: 'tok_sandbox_0077', is_tokenized: true, credit_card: {} } });
    const r = await client.submit([masked, longId, tok]);
    expect(r.status).toBe(200);
    const requestId = r.headers.get('x-request-id')!;
    const push = await waitFor(
      () => receiver.byEvent('validation failed').find((p) => p.body.header['request_id'] === requestId),
      { what: 'second validation push' },
    );
    const codes = Object.fromEntries(
      (push.body.content as any).rejected.map((x: any) => [x.id, x.errors.map((e: any) => e.code)]),
    );
    expect(codes[masked['id'] as string]).toContain('RET012');
    expect(codes[longId['id'] as string]).toContain('RET012');
    expect(codes[tok['id'] as string]).toBeUndefined();
    expect((await row(tok['id'] as string)).review_status).toBe('passed');
  });

  it('an empty billing_descriptor is no descriptor (passes); one the processor cannot show fails with RET012', async () => {
    const empty = txn({ billing_descriptor: '' });
    const long = txn({ billing_descriptor: 'X'.repeat(23) });
    const r = await client.submit([empty, long]);
    expect(r.status).toBe(200);
    const requestId = r.headers.get('x-request-id')!;
    const push = await waitFor(
      () => receiver.byEvent('validation failed').find((p) => p.body.header['request_id'] === requestId),
      { what: 'validation failed push' },
    );
    expect((push.body.content as any).rejected.map((x: any) => [x.id, x.errors.map((e: any) => e.code)])).toEqual([
      [long['id'], ['RET012']],
    ]);
    expect((await row(empty['id'] as string)).review_status).toBe('passed');
  });

  it('takes any non-clear account as encrypted: 200 now, RET010 in the validation failed push', async () => {
    // decisions §4: only a clear number failing Luhn is answered synchronously.
    const values = ['x.y', 'garbage', 'eyJhbGciOi.abc', 'not-a-jwe-at-all'];
    const txns = values.map((account) => {
      const t = txn();
      (t['payment_method'] as any).credit_card.account = account;
      return t;
    });
    const r = await client.submit(txns);
    expect(r.status).toBe(200);
    const requestId = r.headers.get('x-request-id')!;
    const push = await waitFor(
      () => receiver.byEvent('validation failed').find((p) => p.body.header['request_id'] === requestId),
      { what: 'validation failed push' },
    );
    expect(push.body.header['error_count']).toBe(values.length);
    const codes = Object.fromEntries(
      (push.body.content as any).rejected.map((x: any) => [x.id, x.errors.map((e: any) => e.code)]),
    );
    for (const t of txns) expect(codes[t['id'] as string]).toEqual(['RET010']);
    for (const t of txns) expect((await row(t['id'] as string)).card_jwe).toBeNull();
  });

  it('passes a tokenized payment method without credit_card and shows the card masked', async () => {
    const tok = txn({ payment_method: { id: 'tok_sandbox_1111', is_tokenized: true } });
    const unknown = txn({ payment_method: { id: 'tok_unknown', is_tokenized: true } });
    const r = await client.submit([tok, unknown]);
    expect(r.status).toBe(200);
    const requestId = r.headers.get('x-request-id')!;
    const push = await waitFor(
      () => receiver.byEvent('validation failed').find((p) => p.body.header['request_id'] === requestId),
      { what: 'validation failed push' },
    );
    expect((push.body.content as any).rejected).toEqual([
      { id: unknown['id'], errors: [{ code: 'RET011', message: expect.any(String) }] },
    ]);
    const stored = await row(tok['id'] as string);
    expect(stored.review_status).toBe('passed');
    expect(stored.card_network).toBe('visa');
    expect(stored.next_attempt_at).not.toBeNull();
    const got = await client.request('GET', `/v1/retain/transactions/${tok['id']}`);
    expect(got.json.data[0].payment_method).toMatchObject({
      id: 'tok_sandbox_1111',
      is_tokenized: true,
      credit_card: { account: '411111******1111', expiration_date: null },
    });
    // Our reading of the merchant's original response code, before any attempt.
    expect(got.json.data[0].auth_code_description).toBe('Soft Failure');
  });

  it('cancels an original hard decline without attempts, with a retry failed push of the submitted transaction', async () => {
    const t = txn({ auth_code: '41' });
    expect((await client.submit([t])).status).toBe(200);
    const push = await waitFor(
      () => receiver.byEvent('retry failed').find((p) => p.body.header['transaction_id'] === t['id']),
      { what: 'retry failed push' },
    );
    const got = (await client.request('GET', `/v1/retain/transactions/${t['id']}?related=true`)).json.data;
    expect(got).toHaveLength(1);
    expect(got[0].status).toBe('Cancelled');
    expect(got[0].next_activity).toBeNull();
    expect((push.body.content as any).status).toBe('Cancelled');
    expect((push.body.content as any).vid).toBe(got[0].vid);
    expect(push.body.header['payload_id']).toBe(got[0].vid);
  });

  it('leaves a transaction stopped before its review alone: no attempt, no cancel, no retry push', async () => {
    // The review runs after a stop closed the transaction (validator down meanwhile): it must neither
    // schedule a first attempt (soft original decline) nor cancel it (hard original decline).
    await validator.stop();
    const soft = txn();
    const hard = txn({ auth_code: '41' });
    try {
      expect((await client.submit([soft, hard])).status).toBe(200);
      const stop = await client.request('POST', '/v1/retain/refunds', {
        refunds: [{ id: soft['id'] }, { id: hard['id'] }],
      });
      expect(stop.status).toBe(200);
      for (const t of [soft, hard]) expect((await row(t['id'] as string)).status).toBe('Stopped');
    } finally {
      validator = await startApp('submission-validator');
    }
    for (const t of [soft, hard]) {
      await waitFor(async () => (await row(t['id'] as string)).review_status !== 'pending', { what: 'review done' });
      const r = await row(t['id'] as string);
      expect(r.status).toBe('Stopped');
      expect(r.next_attempt_at).toBeNull();
    }
    await waitFor(
      () => receiver.byEvent('refund completed').filter((p) => p.body.header['transaction_id'] === hard['id']).length,
      { what: 'refund completed push of the stop' },
    );
    // A push is announced in the database transaction that decides it: the review is done (above), so
    // a wrong `retry failed` would already be a row. No wait for a push that must not come.
    const retryFailed = await (
      await testDb()
    ).query(
      `SELECT count(*)::int AS n FROM webhook_messages
        WHERE body->'header'->>'transaction_id' = $1 AND event_name = 'retry failed'`,
      [hard['id']],
    );
    expect(retryFailed[0].n).toBe(0);
    expect(receiver.byEvent('retry failed').filter((p) => p.body.header['transaction_id'] === hard['id'])).toEqual([]);
    const attempts = await (
      await testDb()
    ).query(
      `SELECT count(*)::int AS n FROM attempts a JOIN transactions t ON t.id = a.transaction_id
        WHERE t.merchant_txn_id = ANY($1::text[])`,
      [[soft['id'], hard['id']]],
    );
    expect(attempts[0].n).toBe(0);
  });

  it('leaves a transaction stopped before its review on the payment method it was stopped with', async () => {
    // decisions §15: the customer's other payment method, remembered from an earlier transaction.
    const m = await createMerchant(receiver.url);
    const api2 = new ApiClient(api.url, m.api_key);
    const earlier = txn({}, '5555555555554444');
    expect((await api2.submit([earlier])).status).toBe(200);
    await waitFor(async () => (await row(earlier['id'] as string)).review_status === 'passed', {
      what: 'the earlier transaction reviewed',
    });
    // Same customer, a lost card (41: the card ends, the review would adopt the other one), stopped
    // while the validator is down.
    const account = earlier['account'];
    await validator.stop();
    const t = txn({ auth_code: '41', account });
    try {
      expect((await api2.submit([t])).status).toBe(200);
      expect((await api2.request('POST', '/v1/retain/refunds', { refunds: [{ id: t['id'] }] })).status).toBe(200);
    } finally {
      validator = await startApp('submission-validator');
    }
    await waitFor(async () => (await row(t['id'] as string)).review_status !== 'pending', { what: 'review done' });
    const [got] = (await api2.request('GET', `/v1/retain/transactions/${t['id']}`)).json.data;
    expect({
      status: got.status,
      next_activity: got.next_activity,
      payment_method: got.payment_method.id,
      card: got.payment_method.credit_card.account,
    }).toEqual({
      status: 'Stopped',
      next_activity: null,
      payment_method: (t['payment_method'] as { id: string }).id,
      card: '411111******1111',
    });
  });

  it('leaves a transaction stopped before a review it would fail alone: no validation failed, RET004 on its id, its refund kept', async () => {
    // decisions §4: an id submitted earlier and stopped is RET004; §6: rejected ones keep status Failed.
    const m = await createMerchant(receiver.url);
    const api2 = new ApiClient(api.url, m.api_key);
    const db = await testDb();
    const [{ id: merchantId }] = await db.query(`SELECT id FROM merchants WHERE login = $1`, [m.login]);
    await validator.stop();
    const t = txn();
    // Not decryptable: RET010 at its review.
    (t['payment_method'] as any).credit_card.account = 'eyJ.a.b.c.d';
    try {
      expect((await api2.submit([t])).status).toBe(200);
      expect((await api2.request('POST', '/v1/retain/refunds', { refunds: [{ id: t['id'] }] })).status).toBe(200);
      expect((await row(t['id'] as string)).status).toBe('Stopped');
    } finally {
      validator = await startApp('submission-validator');
    }
    await waitFor(
      async () =>
        (
          await db.query(
            `SELECT 1 FROM submissions s JOIN transactions t ON t.submission_id = s.id
              WHERE t.merchant_txn_id = $1 AND s.reviewed_at IS NOT NULL`,
            [t['id']],
          )
        ).length > 0,
      { what: 'review done' },
    );
    const again = await api2.submit([{ ...txn(), id: t['id'] }]);
    expect({ status: again.status, json: again.json }).toEqual({
      status: 207,
      json: expect.objectContaining({
        rejected: [{ id: t['id'], errors: [expect.objectContaining({ code: 'RET004' })] }],
      }),
    });
    const [got] = (await api2.request('GET', `/v1/retain/transactions/${t['id']}`)).json.data;
    expect({ status: got.status, next_activity: got.next_activity }).toEqual({
      status: 'Stopped',
      next_activity: null,
    });
    const refunds = await api2.request('GET', `/v1/retain/refunds/${t['id']}`);
    expect(refunds.status).toBe(200);
    expect(refunds.json.data).toEqual([expect.objectContaining({ id: t['id'], status: 'Completed' })]);
    // Pushes are announced in the database transaction that decides them: the review is done (above).
    const pushes = await db.query(`SELECT event_name FROM webhook_messages WHERE merchant_id = $1`, [merchantId]);
    expect(pushes.map((p: { event_name: string }) => p.event_name)).toEqual(['refund completed']);

    // A row an earlier build left rejected after its stop: still RET004, never replaced with its refund.
    await db.query(`UPDATE transactions SET review_status = 'rejected' WHERE merchant_txn_id = $1`, [t['id']]);
    const legacy = await api2.submit([{ ...txn(), id: t['id'] }]);
    expect(legacy.status).toBe(207);
    expect(legacy.json.rejected).toEqual([{ id: t['id'], errors: [expect.objectContaining({ code: 'RET004' })] }]);
    expect((await api2.request('GET', `/v1/retain/refunds/${t['id']}`)).json.data).toHaveLength(1);
  });

  it('reviews a submission once even when its job runs twice', async () => {
    const bad = txn();
    (bad['payment_method'] as any).credit_card.account = 'eyJ.a.b.c.d';
    const r = await client.submit([bad]);
    const requestId = r.headers.get('x-request-id')!;
    await waitFor(() => receiver.byEvent('validation failed').find((p) => p.body.header['request_id'] === requestId));
    const db = await testDb();
    const before = async () =>
      (
        await db.query(
          `SELECT s.reviewed_at, s.review_error_count, t.review_status, t.status, t.updated_at
             FROM submissions s JOIN transactions t ON t.submission_id = s.id WHERE s.request_id = $1`,
          [requestId],
        )
      )[0];
    const first = await before();
    const [{ id: jobId }] = await db.query(
      `SELECT id FROM outbox WHERE queue = 'submission.review'
          AND payload->>'submissionId' = (SELECT id::text FROM submissions WHERE request_id = $1)`,
      [requestId],
    );
    // A Redis failover loses the finished job (while BullMQ keeps it, re-adding its id is a no-op and
    // nothing would run again), and the outbox row looks unfinished: the sweeper publishes it again.
    const redis = createRedis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
    const queues = new QueueRegistry(redis, process.env['QUEUE_PREFIX']!);
    try {
      const firstRun = await queues.get(QueueName.SubmissionReview).getJob(jobId);
      expect(firstRun?.finishedOn).toBeGreaterThan(0);
      await firstRun!.remove();
      const runsBefore = await reviewRuns();
      await db.query(
        `UPDATE outbox SET completed_at = NULL, published_at = NULL, created_at = now() - interval '1 minute'
          WHERE id = $1`,
        [jobId],
      );
      // The second run happened: the validator counts one more finished review job, the job is back
      // in Redis and finished again, and its outbox row is completed again.
      await waitFor(
        async () => {
          const job = await queues.get(QueueName.SubmissionReview).getJob(jobId);
          const [row] = await db.query(`SELECT completed_at FROM outbox WHERE id = $1`, [jobId]);
          return (await reviewRuns()) > runsBefore && (job?.finishedOn ?? 0) > 0 && row.completed_at !== null;
        },
        { what: 'the second run of the review job' },
      );
    } finally {
      await queues.close();
      redis.disconnect();
    }
    // ...and changed nothing: one push, the submission and its transaction as the first run left them.
    const pushes = await db.query(`SELECT count(*)::int AS n FROM webhook_messages WHERE payload_id = $1`, [requestId]);
    expect(pushes[0].n).toBe(1);
    expect(await before()).toEqual(first);
  });
});
