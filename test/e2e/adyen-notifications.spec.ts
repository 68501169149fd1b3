import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// The wire fake is test support of libs/processor (its test/ folder: never built into dist/).
import { AdyenFake, adyenNotification, type AdyenNotificationFields } from '../../libs/processor/test/adyen-fake';
import { loadConfig } from '@retain/config';
import { QueueName, QueueRegistry, createRedis } from '@retain/queues';
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

// Adyen standard webhooks (notifications) of an account with an hmac_key, through the real apps: a
// charge Adyen answered `Received` is resolved by its AUTHORISATION notification; a refund answered
// `received` stays Processing until its REFUND notification says whether it was made. The notification
// bodies and signatures are built as Adyen documents them (adyenNotification), not by Retain's code.
const cliMain = path.resolve(__dirname, '../../dist/apps/cli/src/main.js');
const HMAC_KEY = '44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056';
const OTHER_KEY = '0000000000000000000000000000000000000000000000000000000000000001';
const NOTIFY_PATH = '/v1/retain/processors/adyen/notifications';

describe('Adyen notifications (end to end)', () => {
  usePrivateDatabase('adn');
  const apps: RunningApp[] = [];
  const adyen = new AdyenFake();
  let dir = '';
  let client: ApiClient;
  let api = '';
  let n = 0;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'retain-e2e-adyen-notifications-'));
    const adyenUrl = await adyen.start();
    const caFile = path.join(dir, 'adyen-fake-ca.pem');
    writeFileSync(caFile, adyen.ca!);
    const env = {
      RETRY_TIME_SCALE: '200000',
      REFUND_BATCH_CRON: '*/1 * * * * *',
      PROCESSOR_TIMEOUT: '1500ms',
      NODE_EXTRA_CA_CERTS: caFile,
    };
    apps.push(
      ...(await Promise.all(
        (['intake-api', 'submission-validator', 'retry-worker', 'refund-batcher'] as const).map((a) =>
          startApp(a, { env }),
        ),
      )),
    );
    api = apps[0]!.url;
    const m = await createMerchant();
    const file = path.join(dir, 'adyen.json');
    writeFileSync(
      file,
      JSON.stringify({
        api_key: adyen.apiKey,
        merchant_account: adyen.merchantAccount,
        checkout_url: `${adyenUrl}/v71`,
        hmac_key: HMAC_KEY,
      }),
    );
    const set = spawnSync(
      process.execPath,
      [cliMain, 'processor', 'set', '--login', m.login, '--processor', 'adyen', '--config-file', file],
      { encoding: 'utf8' },
    );
    expect(set.status, set.stderr).toBe(0);
    // The stored account as printed: never the key.
    expect(set.stdout).not.toContain(HMAC_KEY);
    const list = spawnSync(process.execPath, [cliMain, 'processor', 'list', '--login', m.login], { encoding: 'utf8' });
    expect(list.status, list.stderr).toBe(0);
    expect(list.stdout).toContain(adyen.merchantAccount);
    expect(list.stdout).not.toContain(HMAC_KEY);
    client = new ApiClient(api, m.api_key);
  });
  afterAll(async () => {
    await Promise.all(apps.map((a) => a.stop()));
    await adyen.close();
    rmSync(dir, { recursive: true, force: true });
    await closeTestDb();
  });

  const tokenTxn = (token: string) =>
    txn({ payment_method: { id: token, is_tokenized: true }, amount: 19.99, currency: 'EUR' });
  const notify = (items: AdyenNotificationFields[], key = HMAC_KEY) =>
    fetch(`${api}${NOTIFY_PATH}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(adyenNotification(adyen.merchantAccount, key, items)),
    });
  const attemptOf = async (merchantTxnId: string) => {
    const db = await testDb();
    const [row] = await db.query(
      `SELECT a.id, a.vid, a.state, a.processor_transaction_id, a.updated_at, t.status
         FROM attempts a JOIN transactions t ON t.id = a.transaction_id
        WHERE t.merchant_txn_id = $1 AND t.merchant_id = (SELECT merchant_id FROM processor_accounts LIMIT 1)
        ORDER BY a.retry_number DESC LIMIT 1`,
      [merchantTxnId],
    );
    return row as
      { id: string; vid: string; state: string; processor_transaction_id: string | null; status: string } | undefined;
  };
  const pushes = async (merchantTxnId: string): Promise<string[]> => {
    const db = await testDb();
    const rows: { event_name: string }[] = await db.query(
      `SELECT w.event_name FROM webhook_messages w JOIN transactions t ON t.id = w.transaction_id
        WHERE t.merchant_txn_id = $1 ORDER BY w.created_at, w.id`,
      [merchantTxnId],
    );
    return rows.map((r) => r.event_name);
  };
  const notificationCount = async (): Promise<number> => {
    const [{ c }] = await (await testDb()).query(`SELECT count(*)::int AS c FROM processor_notifications`);
    return c;
  };
  /** The retry worker's retain_capture_failures_total (the capture alert's counter). */
  const captureFailures = async (): Promise<number> => {
    const text = await (await fetch(`${apps[2]!.url}/metrics`)).text();
    return Number(/^retain_capture_failures_total(?:\{[^}]*\})? (\d+)$/m.exec(text)?.[1] ?? 0);
  };
  /** A Received charge: the attempt ends unknown, its replays get the same Received. */
  const unknownAttempt = async () => {
    const stored = `8416${String(++n).padStart(12, '0')}`;
    adyen.script(stored, 'Received');
    const t = tokenTxn(`shopperN${n}|${stored}`);
    expect((await client.submit([t])).status).toBe(200);
    const attempt = await waitFor(
      async () => {
        const a = await attemptOf(t['id'] as string);
        return a?.state === 'unknown' ? a : null;
      },
      { timeoutMs: 30_000, what: 'the Received attempt unknown' },
    );
    const payment = [...adyen.payments.entries()].find(([, p]) => p.body['reference'] === attempt.vid);
    expect(payment?.[1].response['resultCode']).toBe('Received');
    return { t, attempt, psp: payment![0] };
  };
  const captured = async () => {
    const t = tokenTxn(`shopperC${++n}|8417${String(n).padStart(12, '0')}`);
    expect((await client.submit([t])).status).toBe(200);
    const attempt = await waitFor(
      async () => {
        const a = await attemptOf(t['id'] as string);
        return a?.status === 'Captured' ? a : null;
      },
      { timeoutMs: 30_000, what: 'the transaction captured' },
    );
    return { t, psp: attempt.processor_transaction_id! };
  };
  const refundRow = async (merchantTxnId: string) => {
    const [row] = await (
      await testDb()
    ).query(
      `SELECT r.vid, r.status, r.processor_refund_id, t.status AS txn_status
         FROM refunds r JOIN transactions t ON t.id = r.transaction_id WHERE t.merchant_txn_id = $1`,
      [merchantTxnId],
    );
    return row as { vid: string; status: string; processor_refund_id: string | null; txn_status: string } | undefined;
  };
  /** A refund Adyen answered received: Processing with Adyen's id, sent once. */
  const pendingRefund = async (merchantTxnId: string, psp: string) => {
    expect((await client.request('POST', '/v1/retain/refunds', { refunds: [{ id: merchantTxnId }] })).status).toBe(200);
    const refund = await waitFor(
      async () => {
        const r = await refundRow(merchantTxnId);
        return r?.processor_refund_id ? r : null;
      },
      { timeoutMs: 30_000, what: 'the refund sent to Adyen' },
    );
    expect(refund.status).toBe('Processing');
    expect(refund.txn_status).toBe('Refund Requested');
    // Several batches later (one a second): still Processing, and never sent again.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect((await refundRow(merchantTxnId))!.status).toBe('Processing');
    const sent = adyen.refunds.filter((r) => r['paymentPspReference'] === psp);
    expect(sent).toHaveLength(1);
    expect(sent[0]!['reference']).toBe(refund.vid);
    expect(adyen.received('POST', /\/refunds$/).filter((r) => r.path.includes(psp))).toHaveLength(1);
    return { refund, adyenRefund: sent[0]! };
  };

  it('a charge answered Received stays unknown until its AUTHORISATION notification captures it', async () => {
    const { t, attempt, psp } = await unknownAttempt();
    // Replays only bring back the stored Received: still unknown a while later.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect((await attemptOf(t['id'] as string))!.state).toBe('unknown');

    const res = await notify([
      {
        eventCode: 'AUTHORISATION',
        success: true,
        pspReference: psp,
        merchantReference: attempt.vid,
        amount: { value: 1999, currency: 'EUR' },
      },
    ]);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('[accepted]');
    const done = await waitFor(
      async () => {
        const a = await attemptOf(t['id'] as string);
        return a?.state === 'captured' && a.status === 'Captured' ? a : null;
      },
      { timeoutMs: 20_000, what: 'the attempt captured by the notification' },
    );
    expect(done.processor_transaction_id).toBe(psp);
    expect(await pushes(t['id'] as string)).toEqual(['retry succeeded']);
    // The customer was charged once: the notification made no charge.
    expect([...adyen.payments.values()].filter((p) => p.body['reference'] === attempt.vid)).toHaveLength(1);
  });

  it('an AUTHORISATION for an attempt still in flight waits for it without using its job up, then captures it', async () => {
    const { t, attempt, psp } = await unknownAttempt();
    const db = await testDb();
    // The attempt's charge still being recorded (pending, with its in-flight mark), as when the answer is
    // slow or its worker died: the reconciliation's sweep can take up to ~52 min to make it unknown.
    await db.query(`UPDATE attempts SET state = 'pending' WHERE id = $1`, [attempt.id]);
    expect(
      (
        await notify([
          {
            eventCode: 'AUTHORISATION',
            success: true,
            pspReference: psp,
            merchantReference: attempt.vid,
            amount: { value: 1999, currency: 'EUR' },
          },
        ])
      ).status,
    ).toBe(200);
    const [{ id: outboxId }] = await waitFor(
      async () => {
        const rows = await db.query(
          `SELECT o.id FROM outbox o JOIN processor_notifications n ON n.id::text = o.payload->>'notificationId'
            WHERE n.merchant_reference = $1`,
          [attempt.vid],
        );
        return rows.length ? rows : null;
      },
      { what: 'the notification job' },
    );
    // Its job waits (tried again and again) without using any of its attempts: a wait longer than its
    // retries (10, about 17 min) never fails it for good.
    await new Promise((resolve) => setTimeout(resolve, 7000));
    const config = loadConfig('retry-worker');
    const redis = createRedis(config.redisUrl);
    const queues = new QueueRegistry(redis, config.queuePrefix);
    try {
      const job = await queues.get(QueueName.ProcessorNotification).getJob(outboxId);
      expect({ attemptsMade: job?.attemptsMade, failed: await job?.isFailed() }).toEqual({
        attemptsMade: 0,
        failed: false,
      });
    } finally {
      await queues.close();
      redis.disconnect();
    }
    // The attempt's charge is recorded unknown at last: the waiting notification captures it.
    await db.query(`UPDATE attempts SET state = 'unknown' WHERE id = $1`, [attempt.id]);
    const done = await waitFor(
      async () => {
        const a = await attemptOf(t['id'] as string);
        return a?.state === 'captured' && a.status === 'Captured' ? a : null;
      },
      { timeoutMs: 90_000, what: 'the attempt captured by the notification' },
    );
    expect(done.processor_transaction_id).toBe(psp);
  });

  it('an AUTHORISATION success=false settles a Received charge as declined, with the reason', async () => {
    const { t, attempt, psp } = await unknownAttempt();
    const res = await notify([
      {
        eventCode: 'AUTHORISATION',
        success: false,
        pspReference: psp,
        merchantReference: attempt.vid,
        amount: { value: 1999, currency: 'EUR' },
        reason: 'Refused',
      },
    ]);
    expect(res.status).toBe(200);
    const done = await waitFor(
      async () => {
        const a = await attemptOf(t['id'] as string);
        return a && a.id === attempt.id && a.state === 'declined' ? a : null;
      },
      { timeoutMs: 20_000, what: 'the attempt declined by the notification' },
    );
    expect(done.processor_transaction_id).toBe(psp);
  });

  it('an AUTHORISATION success=false carries the raw network code, the Mastercard advice and the brand: MAC 03 ends the recovery', async () => {
    const { t, attempt, psp } = await unknownAttempt();
    const res = await notify([
      {
        eventCode: 'AUTHORISATION',
        success: false,
        pspReference: psp,
        merchantReference: attempt.vid,
        amount: { value: 1999, currency: 'EUR' },
        reason: 'Not enough balance',
        paymentMethod: 'mc',
        additionalData: { refusalReasonRaw: '51 : Insufficient funds', merchantAdviceCode: '03: Do not try again' },
      },
    ]);
    expect(res.status).toBe(200);
    await waitFor(
      async () => {
        const a = await attemptOf(t['id'] as string);
        return a && a.id === attempt.id && a.state === 'declined' ? a : null;
      },
      { timeoutMs: 20_000, what: 'the attempt declined by the notification' },
    );
    const [row] = await (
      await testDb()
    ).query(`SELECT response_code, merchant_advice_code, card_network FROM attempts WHERE id = $1`, [attempt.id]);
    expect(row).toEqual({ response_code: '51', merchant_advice_code: '03', card_network: 'mastercard' });
    // MAC 03 is "do not try again": the recovery ends, with its retry failed push.
    await waitFor(async () => ((await attemptOf(t['id'] as string))?.status === 'Cancelled' ? true : null), {
      timeoutMs: 20_000,
      what: 'the transaction Cancelled',
    });
    expect(await pushes(t['id'] as string)).toEqual(['retry failed']);
  });

  it("an AUTHORISATION success=false without the raw code maps Adyen's refusal reason (3D Not Authenticated: 1A), never reads its first characters as a code", async () => {
    const { t, attempt, psp } = await unknownAttempt();
    await notify([
      {
        eventCode: 'AUTHORISATION',
        success: false,
        pspReference: psp,
        merchantReference: attempt.vid,
        amount: { value: 1999, currency: 'EUR' },
        reason: '3D Not Authenticated',
      },
    ]);
    await waitFor(
      async () => {
        const a = await attemptOf(t['id'] as string);
        return a && a.id === attempt.id && a.state === 'declined' ? a : null;
      },
      { timeoutMs: 20_000, what: 'the attempt declined by the notification' },
    );
    const [row] = await (await testDb()).query(`SELECT response_code FROM attempts WHERE id = $1`, [attempt.id]);
    expect(row.response_code).toBe('1A');
  });

  it('the same notification delivered twice is stored and acted on once', async () => {
    const { t, attempt, psp } = await unknownAttempt();
    const item: AdyenNotificationFields = {
      eventCode: 'AUTHORISATION',
      success: true,
      pspReference: psp,
      merchantReference: attempt.vid,
      amount: { value: 1999, currency: 'EUR' },
    };
    expect((await notify([item])).status).toBe(200);
    await waitFor(async () => (await attemptOf(t['id'] as string))?.status === 'Captured', {
      timeoutMs: 20_000,
      what: 'the capture',
    });
    const before = await notificationCount();
    const again = await notify([item]);
    expect(again.status).toBe(200);
    expect(await again.text()).toBe('[accepted]');
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(await notificationCount()).toBe(before);
    expect(await pushes(t['id'] as string)).toEqual(['retry succeeded']);
    const db = await testDb();
    const [{ c }] = await db.query(
      `SELECT count(*)::int AS c FROM processor_notifications WHERE psp_reference = $1 AND processed_at IS NOT NULL`,
      [psp],
    );
    expect(c).toBe(1);
  });

  it('a notification whose HMAC signature is wrong is refused (401) and changes nothing', async () => {
    const { t, attempt, psp } = await unknownAttempt();
    const before = await notificationCount();
    const item: AdyenNotificationFields = {
      eventCode: 'AUTHORISATION',
      success: true,
      pspReference: psp,
      merchantReference: attempt.vid,
      amount: { value: 1999, currency: 'EUR' },
    };
    const res = await notify([item], OTHER_KEY);
    expect(res.status).toBe(401);
    const body = (await res.json()) as { code: string; message: string };
    expect(body.code).toBe('RET401');
    expect(typeof body.message).toBe('string');
    // A body altered after signing (the amount) is refused too.
    const signed = adyenNotification(adyen.merchantAccount, HMAC_KEY, [item]) as any;
    signed.notificationItems[0].NotificationRequestItem.success = 'false';
    const altered = await fetch(`${api}${NOTIFY_PATH}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(signed),
    });
    expect(altered.status).toBe(401);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(await notificationCount()).toBe(before);
    expect((await attemptOf(t['id'] as string))!.state).toBe('unknown');
  });

  it('a body that is not JSON is a 400 RET400 (no credentials are asked: the endpoint takes none)', async () => {
    const res = await fetch(`${api}${NOTIFY_PATH}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"live": "false", "notificationItems": [',
    });
    expect({ status: res.status, auth: res.headers.get('www-authenticate') }).toEqual({ status: 400, auth: null });
    expect(((await res.json()) as { code: string }).code).toBe('RET400');
  });

  it('a refund answered received is Completed only once its REFUND notification says success=true', async () => {
    const { t, psp } = await captured();
    const { refund, adyenRefund } = await pendingRefund(t['id'] as string, psp);
    expect(await pushes(t['id'] as string)).toEqual(['retry succeeded']);
    const res = await notify([
      {
        eventCode: 'REFUND',
        success: true,
        pspReference: adyenRefund['pspReference'] as string,
        originalReference: psp,
        merchantReference: refund.vid,
        amount: { value: 1999, currency: 'EUR' },
      },
    ]);
    expect(res.status).toBe(200);
    const done = await waitFor(
      async () => {
        const r = await refundRow(t['id'] as string);
        return r?.status === 'Completed' ? r : null;
      },
      { timeoutMs: 20_000, what: 'the refund completed' },
    );
    expect(done.txn_status).toBe('Refunded');
    await waitFor(async () => (await pushes(t['id'] as string)).includes('refund completed'), {
      timeoutMs: 10_000,
      what: 'the refund completed push',
    });
    expect(await pushes(t['id'] as string)).toEqual(['retry succeeded', 'refund completed']);
  });

  it('a refund whose notification does not come raises the operator alert once, until the notification settles it', async () => {
    const { t, psp } = await captured();
    const { refund, adyenRefund } = await pendingRefund(t['id'] as string, psp);
    const batcher = apps[3]!;
    const gauge = async () => {
      const text = await (await fetch(`${batcher.url}/metrics`)).text();
      return Number(/^retain_refunds_awaiting_notification(?:\{[^}]*\})? (\d+)$/m.exec(text)?.[1] ?? NaN);
    };
    const alerts = () =>
      batcher
        .logs()
        .split('\n')
        .filter((l) => l.includes(refund.vid) && l.includes('REFUND_NOTIFICATION_ALERT_AFTER'));
    // REFUND_NOTIFICATION_ALERT_AFTER (24 h) ÷ RETRY_TIME_SCALE has passed: the alert is up.
    await waitFor(async () => alerts().length > 0 && (await gauge()) >= 1, {
      timeoutMs: 10_000,
      what: 'the alert for the refund awaiting its notification',
    });
    // Several batches later: still one error log for it, the refund still Processing.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect(alerts()).toHaveLength(1);
    expect(JSON.parse(alerts()[0]!)).toMatchObject({ level: 'error', refund: refund.vid });
    expect((await refundRow(t['id'] as string))!.status).toBe('Processing');
    const overdue = async () =>
      (
        await (
          await testDb()
        ).query(
          `SELECT vid FROM refunds WHERE status = 'Processing' AND processor_refund_id IS NOT NULL AND alerted_at IS NOT NULL`,
        )
      ).map((r: { vid: string }) => r.vid);
    expect(await overdue()).toContain(refund.vid);
    expect(await gauge()).toBe((await overdue()).length);

    expect(
      (
        await notify([
          {
            eventCode: 'REFUND',
            success: true,
            pspReference: adyenRefund['pspReference'] as string,
            originalReference: psp,
            merchantReference: refund.vid,
            amount: { value: 1999, currency: 'EUR' },
          },
        ])
      ).status,
    ).toBe(200);
    await waitFor(async () => (await refundRow(t['id'] as string))?.status === 'Completed', {
      timeoutMs: 20_000,
      what: 'the refund completed',
    });
    // The next batches count it no more.
    await waitFor(async () => !(await overdue()).includes(refund.vid) && (await gauge()) === (await overdue()).length, {
      timeoutMs: 10_000,
      what: 'the gauge without the settled refund',
    });
  });

  it('a refund whose REFUND notification says success=false is Failed, the transaction Captured again', async () => {
    const { t, psp } = await captured();
    const { refund, adyenRefund } = await pendingRefund(t['id'] as string, psp);
    const res = await notify([
      {
        eventCode: 'REFUND',
        success: false,
        pspReference: adyenRefund['pspReference'] as string,
        originalReference: psp,
        merchantReference: refund.vid,
        amount: { value: 1999, currency: 'EUR' },
        reason: 'Insufficient in-process funds on account',
      },
    ]);
    expect(res.status).toBe(200);
    const done = await waitFor(
      async () => {
        const r = await refundRow(t['id'] as string);
        return r?.status === 'Failed' ? r : null;
      },
      { timeoutMs: 20_000, what: 'the refund failed' },
    );
    expect(done.txn_status).toBe('Captured');
    await waitFor(async () => (await pushes(t['id'] as string)).includes('refund failed'), {
      timeoutMs: 10_000,
      what: 'the refund failed push',
    });
    expect(await pushes(t['id'] as string)).toEqual(['retry succeeded', 'refund failed']);
  });

  it('a REFUND_FAILED after a completion turns the refund Failed, with a refund failed push', async () => {
    const { t, psp } = await captured();
    const { refund, adyenRefund } = await pendingRefund(t['id'] as string, psp);
    const item = (eventCode: string): AdyenNotificationFields => ({
      eventCode,
      success: true,
      pspReference: adyenRefund['pspReference'] as string,
      originalReference: psp,
      merchantReference: refund.vid,
      amount: { value: 1999, currency: 'EUR' },
    });
    expect((await notify([item('REFUND')])).status).toBe(200);
    await waitFor(async () => (await refundRow(t['id'] as string))?.status === 'Completed', {
      timeoutMs: 20_000,
      what: 'the refund completed',
    });
    expect((await notify([item('REFUND_FAILED')])).status).toBe(200);
    const done = await waitFor(
      async () => {
        const r = await refundRow(t['id'] as string);
        return r?.status === 'Failed' ? r : null;
      },
      { timeoutMs: 20_000, what: 'the completed refund failed' },
    );
    expect(done.txn_status).toBe('Captured');
    await waitFor(async () => (await pushes(t['id'] as string)).length === 3, {
      timeoutMs: 10_000,
      what: 'the refund failed push',
    });
    expect(await pushes(t['id'] as string)).toEqual(['retry succeeded', 'refund completed', 'refund failed']);
  });

  it('an AUTHORISATION success=false for an attempt recorded captured raises the capture alert (the money was not collected)', async () => {
    const { psp } = await captured();
    const [{ vid }] = await (
      await testDb()
    ).query(`SELECT a.vid FROM attempts a WHERE a.processor_transaction_id = $1`, [psp]);
    const before = await captureFailures();
    expect(
      (
        await notify([
          {
            eventCode: 'AUTHORISATION',
            success: false,
            pspReference: psp,
            merchantReference: vid,
            amount: { value: 1999, currency: 'EUR' },
            reason: 'Refused',
          },
        ])
      ).status,
    ).toBe(200);
    await waitFor(
      async () => {
        const [r] = await (
          await testDb()
        ).query(`SELECT outcome FROM processor_notifications WHERE psp_reference = $1 AND success = false`, [psp]);
        return r?.outcome ? r : null;
      },
      { timeoutMs: 20_000, what: 'the disagreeing notification processed' },
    );
    expect(await captureFailures()).toBe(before + 1);
  });

  it('a CAPTURE_FAILED for a captured attempt raises the operator alert (the money was not collected), names the attempt, and changes nothing else', async () => {
    const { psp } = await captured();
    const [{ vid }] = await (
      await testDb()
    ).query(`SELECT a.vid FROM attempts a WHERE a.processor_transaction_id = $1`, [psp]);
    const before = await captureFailures();
    const res = await notify([
      {
        eventCode: 'CAPTURE_FAILED',
        success: true,
        pspReference: `CF${psp}`.slice(0, 16),
        originalReference: psp,
        merchantReference: vid,
        amount: { value: 1999, currency: 'EUR' },
        reason:
          'Capture rejected by card scheme because the shopper cancelled the recurring payment through their bank',
      },
    ]);
    expect(res.status).toBe(200);
    const row = await waitFor(
      async () => {
        const [r] = await (
          await testDb()
        ).query(
          `SELECT outcome FROM processor_notifications WHERE original_reference = $1 AND event_code = 'CAPTURE_FAILED'`,
          [psp],
        );
        return r?.outcome ? r : null;
      },
      { timeoutMs: 20_000, what: 'the CAPTURE_FAILED notification processed' },
    );
    expect(row.outcome).toBe('capture failed: operator alerted');
    expect(await captureFailures()).toBe(before + 1);
    const logged = apps[2]!
      .logs()
      .split('\n')
      .filter((l) => l.includes(vid) && l.includes('CAPTURE_FAILED'));
    expect(logged).toHaveLength(1);
    expect(JSON.parse(logged[0]!)).toMatchObject({ level: 'error', attempt: vid });
  });

  it('a notification for a reference Retain does not know is accepted and ignored', async () => {
    const res = await notify([
      {
        eventCode: 'AUTHORISATION',
        success: true,
        pspReference: 'NOTOURS000000001',
        merchantReference: 'no-such-attempt',
        amount: { value: 500, currency: 'EUR' },
      },
    ]);
    expect(res.status).toBe(200);
    const db = await testDb();
    const row = await waitFor(
      async () => {
        const [r] = await db.query(`SELECT outcome FROM processor_notifications WHERE psp_reference = $1`, [
          'NOTOURS000000001',
        ]);
        return r?.outcome ? r : null;
      },
      { timeoutMs: 20_000, what: 'the notification processed' },
    );
    expect(row.outcome).toBe('ignored: unknown reference');
  });

  it('never logs the HMAC key or a signature', () => {
    const logs = apps.map((a) => a.logs()).join('\n');
    expect(logs).toContain('Adyen notifications accepted');
    expect(logs).not.toContain(HMAC_KEY);
    expect(logs.toLowerCase()).not.toContain(HMAC_KEY.toLowerCase());
    expect(logs).not.toContain('hmacSignature');
  });
});
