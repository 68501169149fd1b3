import { createPrivateKey, generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, concurrencySettings, loadConfig, parseDuration, usesDevCardKey } from './config';

const pem = (): string =>
  generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;

describe('configuration', () => {
  it('has working defaults', () => {
    const c = loadConfig('intake-api', {});
    expect(c.databaseUrl).toBe('postgres://postgres@127.0.0.1:5432/retain');
    expect(c.redisUrl).toBe('redis://127.0.0.1:6379');
    expect(c.port).toBe(3000);
    expect(c.processor).toBe('sandbox');
    expect(c.retryTimeScale).toBe(1);
    expect(c.refundBatchCron).toBe('0 2 * * *');
    expect(c.webhookRetryScheduleMs).toEqual([5000, 300000, 1800000, 7200000, 18000000, 36000000, 36000000]);
    expect(c.webhookAllowPrivate).toBe(false);
    expect(c.queuePrefix).toBe('{retain}');
    expect(loadConfig('retry-worker', {}).healthPort).toBe(3002);
  });

  it.each([
    ['DATABASE_URL', 'not a url'],
    ['DATABASE_URL', 'mysql://x/y'],
    ['REDIS_URL', 'http://x'],
    ['PORT', '70000'],
    ['PROCESSOR', 'stripe'],
    ['RETRY_TIME_SCALE', '0'],
    ['RETRY_TIME_SCALE', 'fast'],
    ['REFUND_BATCH_CRON', 'daily'],
    ['WEBHOOK_RETRY_SCHEDULE', '5s,soon'],
    ['WEBHOOK_RETRY_SCHEDULE', '5s,21d'],
    ['WEBHOOK_RETRY_SCHEDULE', '500h'],
    ['WEBHOOK_ALLOW_PRIVATE', 'perhaps'],
    ['CARD_DATA_KEY', 'nokeyid'],
    ['CARD_DATA_KEY', 'k1:c2hvcnQ='],
    ['CARD_FINGERPRINT_KEY', 'nokeyid'],
    ['CARD_FINGERPRINT_KEY', 'fp1:c2hvcnQ='],
    ['LOG_LEVEL', 'loud'],
    ['QUEUE_PREFIX', 'retain'],
    ['TRUST_PROXY', '1'],
    ['TRUST_PROXY', '10.0.0.0/8,ingress'],
  ])('stops on a bad %s naming the variable', (name, value) => {
    expect(() => loadConfig('intake-api', { [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig('intake-api', { [name]: value })).toThrow(name);
  });

  it('takes WEBHOOK_RETRY_SCHEDULE steps up to 20 days, whose jittered delay a delivery record holds', () => {
    expect(loadConfig('webhook-dispatcher', { WEBHOOK_RETRY_SCHEDULE: '5s,20d' }).webhookRetryScheduleMs).toEqual([
      5000, 1_728_000_000,
    ]);
    expect(() => loadConfig('webhook-dispatcher', { WEBHOOK_RETRY_SCHEDULE: '5s,20.8d' })).toThrow(
      /WEBHOOK_RETRY_SCHEDULE .*"20.8d".*20d/,
    );
  });

  // Node runs a timer longer than 2^31-1 ms (24.8 days) after 1 ms: a sweep or check would run back to back,
  // a request or processor call would be cut off at once.
  it.each([
    ['RETENTION_INTERVAL', '30d'],
    ['RETENTION_INTERVAL', '25d'],
    ['SETTLEMENT_CHECK_INTERVAL', '30d'],
    ['HTTP_REQUEST_TIMEOUT', '30d'],
    ['PROCESSOR_TIMEOUT', '600h'],
    // The retry worker re-checks its tick scheduler every 10 ticks.
    ['SCHEDULER_TICK', '3d'],
  ])('stops on %s=%s, longer than a Node timer holds, naming the variable', (name, value) => {
    expect(() => loadConfig('retry-worker', { [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig('retry-worker', { [name]: value })).toThrow(new RegExp(`${name} .*<= \\d+d`));
  });

  it('takes timer durations up to 24 days (a tick up to 2 days)', () => {
    const c = loadConfig('retry-worker', {
      RETENTION_INTERVAL: '24d',
      SETTLEMENT_CHECK_INTERVAL: '24d',
      HTTP_REQUEST_TIMEOUT: '24d',
      PROCESSOR_TIMEOUT: '24d',
      SCHEDULER_TICK: '2d',
    });
    expect(c.retention.intervalMs).toBe(24 * 86_400_000);
    expect(c.settlementCheckMs).toBe(24 * 86_400_000);
    expect(c.httpRequestTimeoutMs).toBe(24 * 86_400_000);
    expect(c.processorTimeoutMs).toBe(24 * 86_400_000);
    expect(c.tickMs * 10).toBeLessThanOrEqual(2 ** 31 - 1);
  });

  // A sweep compares rows with "now minus the retention": 9999999d is a date Postgres refuses
  // (timestamp out of range), and that kind's sweep failed on every run.
  it.each([
    ['OUTBOX_RETENTION', '9999999d'],
    ['WEBHOOK_RETENTION', '9999999d'],
    ['SANDBOX_LEDGER_RETENTION', '36501d'],
    ['CARD_DATA_ERASE_AFTER', '9999999d'],
    // Compared the same way with "now minus" it (the reconciliation, the refund batcher's alert).
    ['RECONCILE_NOT_FOUND_AFTER', '9999999d'],
    ['RECONCILE_ALERT_AFTER', '9999999d'],
    ['REFUND_NOTIFICATION_ALERT_AFTER', '9999999d'],
  ])('stops on %s=%s, longer than 100 years, naming the variable', (name, value) => {
    expect(() => loadConfig('retry-worker', { [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig('retry-worker', { [name]: value })).toThrow(new RegExp(`${name} .*<= 36500d`));
  });

  it('takes retentions up to 100 years', () => {
    const c = loadConfig('retry-worker', {
      OUTBOX_RETENTION: '36500d',
      WEBHOOK_RETENTION: '36500d',
      SANDBOX_LEDGER_RETENTION: '36500d',
      CARD_DATA_ERASE_AFTER: '36500d',
    });
    expect(c.retention).toMatchObject({
      outboxMs: 36500 * 86_400_000,
      webhooksMs: 36500 * 86_400_000,
      sandboxLedgerMs: 36500 * 86_400_000,
      cardDataMs: 36500 * 86_400_000,
    });
  });

  it.each(['61 * * * *', '* * 31 2 *', '0 0 30 2 *', '0 2 * * * * *', '*/0 * * * *'])(
    'refuses REFUND_BATCH_CRON %s, which a cron parser rejects (refunds would never be sent)',
    (cron) => {
      expect(() => loadConfig('refund-batcher', { REFUND_BATCH_CRON: cron })).toThrow(ConfigError);
      expect(() => loadConfig('refund-batcher', { REFUND_BATCH_CRON: cron })).toThrow('REFUND_BATCH_CRON');
    },
  );

  it.each([
    ['true', true],
    ['127.0.0.1', '127.0.0.1'],
    ['10.0.0.0/8, 192.168.0.0/16', '10.0.0.0/8, 192.168.0.0/16'],
    ['fd00::/8,::1', 'fd00::/8,::1'],
  ])('accepts TRUST_PROXY %s', (value, expected) => {
    expect(loadConfig('intake-api', { TRUST_PROXY: value }).trustProxy).toEqual(expected);
  });

  it.each(['0 2 * * *', '*/1 * * * * *', '30 1 * * MON-FRI', '@daily'])('accepts REFUND_BATCH_CRON %s', (cron) => {
    expect(loadConfig('refund-batcher', { REFUND_BATCH_CRON: cron }).refundBatchCron).toBe(cron);
  });

  it('uses the built-in development card key only in development and test', () => {
    expect(usesDevCardKey(loadConfig('intake-api', {}))).toBe(true);
    expect(usesDevCardKey(loadConfig('intake-api', { NODE_ENV: 'test' }))).toBe(true);
    expect(() => loadConfig('intake-api', { NODE_ENV: 'production' })).toThrow(ConfigError);
    expect(() => loadConfig('intake-api', { NODE_ENV: 'production' })).toThrow('CARD_DATA_KEY');
    const key = `k1:${Buffer.alloc(32, 1).toString('base64')}`;
    expect(
      usesDevCardKey(
        loadConfig('intake-api', { NODE_ENV: 'production', CARD_DATA_KEY: key, CARD_FINGERPRINT_KEY: key }),
      ),
    ).toBe(false);
  });

  // decisions §11: a bad value stops the app. A mistyped NODE_ENV ('prod') was free text and quietly
  // ran as not-production: the portal cookie without Secure, no HSTS.
  it.each(['prod', 'staging', 'Production', 'demo', 'production '])('refuses NODE_ENV %j, naming it', (nodeEnv) => {
    const key = `k1:${Buffer.alloc(32, 1).toString('base64')}`;
    const env = { NODE_ENV: nodeEnv, CARD_DATA_KEY: key, CARD_FINGERPRINT_KEY: key };
    for (const app of ['intake-api', 'cli', 'migrate'] as const) {
      expect(() => loadConfig(app as 'intake-api', env)).toThrow(ConfigError);
      expect(() => loadConfig(app as 'intake-api', env)).toThrow(
        'NODE_ENV must be one of production, development, test',
      );
    }
  });

  it.each(['production', 'development', 'test'])('accepts NODE_ENV %s', (nodeEnv) => {
    const key = `k1:${Buffer.alloc(32, 1).toString('base64')}`;
    expect(loadConfig('intake-api', { NODE_ENV: nodeEnv, CARD_DATA_KEY: key, CARD_FINGERPRINT_KEY: key }).nodeEnv).toBe(
      nodeEnv,
    );
    expect(loadConfig('migrate', { NODE_ENV: nodeEnv, DATABASE_URL: 'postgres://x@h/db' }).nodeEnv).toBe(nodeEnv);
  });

  it('requires CARD_DATA_KEY in production and parses rotation lists', () => {
    expect(() => loadConfig('intake-api', { NODE_ENV: 'production' })).toThrow('CARD_DATA_KEY');
    const k = (b: number) => Buffer.alloc(32, b).toString('base64');
    const c = loadConfig('intake-api', {
      NODE_ENV: 'production',
      CARD_DATA_KEY: `new:${k(1)},old:${k(2)}`,
      CARD_FINGERPRINT_KEY: `fp1:${k(3)}`,
    });
    expect(c.cardKeys.map((x) => x.id)).toEqual(['new', 'old']);
  });

  it('accepts a bare base64 or base64url 32-byte CARD_DATA_KEY (decisions §11 gives no format), key id `default`', () => {
    const key = randomBytes(32);
    for (const bare of [key.toString('base64'), key.toString('base64url'), key.toString('base64').replace(/=$/, '')]) {
      const c = loadConfig('intake-api', { NODE_ENV: 'production', CARD_DATA_KEY: bare, CARD_FINGERPRINT_KEY: bare });
      expect(c.cardKeys).toEqual([{ id: 'default', key }]);
      expect(c.cardFingerprintKeys).toEqual([{ id: 'default', key }]);
      expect(usesDevCardKey(c)).toBe(false);
    }
    // In a rotation list beside kid:base64 keys: the bare one is the key id `default`.
    const fresh = randomBytes(32);
    const c = loadConfig('intake-api', {
      CARD_DATA_KEY: `k2:${fresh.toString('base64')}, ${key.toString('base64')}`,
    });
    expect(c.cardKeys).toEqual([
      { id: 'k2', key: fresh },
      { id: 'default', key },
    ]);
    // Still refused: a key of another length, text that is not base64, two keys under one id.
    for (const bad of [
      randomBytes(31).toString('base64'),
      randomBytes(33).toString('base64'),
      key.toString('hex'),
      `${key.toString('base64').slice(0, 40)}!!!=`,
      `${key.toString('base64')},${fresh.toString('base64')}`,
      `k1:${key.toString('base64')},k1:${fresh.toString('base64')}`,
    ]) {
      expect(() => loadConfig('intake-api', { CARD_DATA_KEY: bad })).toThrow(ConfigError);
      expect(() => loadConfig('intake-api', { CARD_DATA_KEY: bad })).toThrow('CARD_DATA_KEY');
      expect(() => loadConfig('intake-api', { CARD_DATA_KEY: bad })).not.toThrow(bad);
    }
  });

  it('requires CARD_FINGERPRINT_KEY in production; outside it a development key is used', () => {
    const k = (b: number) => Buffer.alloc(32, b).toString('base64');
    expect(() => loadConfig('intake-api', { NODE_ENV: 'production', CARD_DATA_KEY: `k1:${k(1)}` })).toThrow(
      'CARD_FINGERPRINT_KEY',
    );
    expect(loadConfig('intake-api', {}).cardFingerprintKeys.map((x) => x.id)).toEqual(['fp-dev']);
    const c = loadConfig('intake-api', { CARD_FINGERPRINT_KEY: `fp2:${k(2)},fp1:${k(3)}` });
    expect(c.cardFingerprintKeys.map((x) => x.id)).toEqual(['fp2', 'fp1']);
  });

  it('gives the migrator a database-only config: no card key needed in production', () => {
    const url = 'postgres://retain:pw@db:5432/retain';
    expect(loadConfig('migrate', { NODE_ENV: 'production', DATABASE_URL: url })).toEqual({
      app: 'migrate',
      nodeEnv: 'production',
      databaseUrl: url,
    });
    expect(() => loadConfig('migrate', { NODE_ENV: 'production' })).toThrow('DATABASE_URL');
    expect(() => loadConfig('migrate', { DATABASE_URL: 'mysql://x/y' })).toThrow('DATABASE_URL');
    expect(loadConfig('migrate', {}).databaseUrl).toBe('postgres://postgres@127.0.0.1:5432/retain');
  });

  it('reads RETRY_ATTEMPT_CONCURRENCY: unset by default, 1-256, a bad value named', () => {
    expect(concurrencySettings({})).toEqual({});
    expect(concurrencySettings({ RETRY_ATTEMPT_CONCURRENCY: '48' })).toEqual({ RETRY_ATTEMPT_CONCURRENCY: 48 });
    for (const bad of ['0', '257', '1.5', 'many']) {
      expect(() => concurrencySettings({ RETRY_ATTEMPT_CONCURRENCY: bad })).toThrow(ConfigError);
      // Every app checks it at start, like every other variable.
      expect(() => loadConfig('retry-worker', { RETRY_ATTEMPT_CONCURRENCY: bad })).toThrow('RETRY_ATTEMPT_CONCURRENCY');
    }
  });

  it('parses durations', () => {
    expect(parseDuration('250ms')).toBe(250);
    expect(parseDuration('1.5h')).toBe(5_400_000);
    expect(parseDuration('3 days')).toBeNull();
  });

  describe('card JWE keys', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'retain-jwe-'));
    const [a, b, c] = [pem(), pem(), pem()];
    const file = (name: string, text: string): string => {
      const f = path.join(dir, name);
      writeFileSync(f, text);
      return f;
    };
    const fa = file('a.pem', a);
    const fb = file('b.pem', b);

    it('has none by default, and keeps the single-key variables working', () => {
      expect(loadConfig('intake-api', {}).jweKeys).toEqual([]);
      expect(loadConfig('intake-api', { CARD_JWE_PRIVATE_KEY: a }).jweKeys).toEqual([
        { kid: 'retain-dev-1', privateKeyPem: a },
      ]);
      expect(loadConfig('intake-api', { CARD_JWE_PRIVATE_KEY_FILE: fb, CARD_JWE_KEY_ID: 'k-b' }).jweKeys).toEqual([
        { kid: 'k-b', privateKeyPem: b },
      ]);
    });

    it('reads several keys from CARD_JWE_PRIVATE_KEYS, current first, plus the single key', () => {
      const cfg = loadConfig('submission-validator', {
        CARD_JWE_PRIVATE_KEYS: `2025-06:${fa}, 2024-01:${fb}`,
        CARD_JWE_PRIVATE_KEY: c,
        CARD_JWE_KEY_ID: 'legacy',
      });
      expect(cfg.jweKeys).toEqual([
        { kid: '2025-06', privateKeyPem: a },
        { kid: '2024-01', privateKeyPem: b },
        { kid: 'legacy', privateKeyPem: c },
      ]);
    });

    it('rotates with the single key still set: the list may name its key id when it holds the same key', () => {
      // README "Kubernetes": the Deployments keep passing CARD_JWE_PRIVATE_KEY (kid CARD_JWE_KEY_ID) while
      // CARD_JWE_PRIVATE_KEYS lists the new key and that same old one; every app used to stop at start.
      const env = {
        CARD_JWE_PRIVATE_KEYS: `retain-2:${fb},retain-1:${fa}`,
        CARD_JWE_PRIVATE_KEY: a,
        CARD_JWE_KEY_ID: 'retain-1',
      };
      expect(loadConfig('intake-api', env).jweKeys).toEqual([
        { kid: 'retain-2', privateKeyPem: b },
        { kid: 'retain-1', privateKeyPem: a },
      ]);
      // The same key in another encoding (PKCS#1 in the secret, PKCS#8 in the file) is the same key.
      const pkcs1 = createPrivateKey(a).export({ type: 'pkcs1', format: 'pem' }) as string;
      expect(loadConfig('intake-api', { ...env, CARD_JWE_PRIVATE_KEY: pkcs1 }).jweKeys.map((k) => k.kid)).toEqual([
        'retain-2',
        'retain-1',
      ]);
      // From a file too.
      const fromFile = {
        CARD_JWE_PRIVATE_KEYS: env.CARD_JWE_PRIVATE_KEYS,
        CARD_JWE_PRIVATE_KEY_FILE: fa,
        CARD_JWE_KEY_ID: 'retain-1',
      };
      expect(loadConfig('intake-api', fromFile).jweKeys).toHaveLength(2);
    });

    it.each([
      ['CARD_JWE_PRIVATE_KEYS', { CARD_JWE_PRIVATE_KEYS: 'no-separator' }],
      ['CARD_JWE_PRIVATE_KEYS', { CARD_JWE_PRIVATE_KEYS: 'k1:/nonexistent/key.pem' }],
      ['CARD_JWE_PRIVATE_KEYS', { CARD_JWE_PRIVATE_KEYS: `bad kid!:${fa}` }],
      ['CARD_JWE_PRIVATE_KEYS', { CARD_JWE_PRIVATE_KEYS: `k1:${fa},k1:${fb}` }],
      ['CARD_JWE_PRIVATE_KEYS', { CARD_JWE_PRIVATE_KEYS: `k1:${file('junk.pem', 'not a key')}` }],
      ['CARD_JWE_PRIVATE_KEY', { CARD_JWE_PRIVATE_KEYS: `k1:${fa}`, CARD_JWE_PRIVATE_KEY: b, CARD_JWE_KEY_ID: 'k1' }],
      ['CARD_JWE_PRIVATE_KEY', { CARD_JWE_PRIVATE_KEY: 'nope' }],
      ['CARD_JWE_PRIVATE_KEY_FILE', { CARD_JWE_PRIVATE_KEY_FILE: '/nonexistent/key.pem' }],
    ])('stops on a bad %s', (name, env) => {
      expect(() => loadConfig('intake-api', env)).toThrow(ConfigError);
      expect(() => loadConfig('intake-api', env)).toThrow(name);
    });
  });
});
