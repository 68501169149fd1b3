import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, parseDuration } from './config';

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
    ['WEBHOOK_ALLOW_PRIVATE', 'perhaps'],
    ['CARD_DATA_KEY', 'nokeyid'],
    ['CARD_DATA_KEY', 'k1:c2hvcnQ='],
    ['LOG_LEVEL', 'loud'],
    ['QUEUE_PREFIX', 'retain'],
  ])('stops on a bad %s naming the variable', (name, value) => {
    expect(() => loadConfig('intake-api', { [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig('intake-api', { [name]: value })).toThrow(name);
  });

  it('requires CARD_DATA_KEY in production and parses rotation lists', () => {
    expect(() => loadConfig('intake-api', { NODE_ENV: 'production' })).toThrow('CARD_DATA_KEY');
    const k = (b: number) => Buffer.alloc(32, b).toString('base64');
    const c = loadConfig('intake-api', { NODE_ENV: 'production', CARD_DATA_KEY: `new:${k(1)},old:${k(2)}` });
    expect(c.cardKeys.map((x) => x.id)).toEqual(['new', 'old']);
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

  it('parses durations', () => {
    expect(parseDuration('250ms')).toBe(250);
    expect(parseDuration('1.5h')).toBe(5_400_000);
    expect(parseDuration('3 days')).toBeNull();
  });
});
