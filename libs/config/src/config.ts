import { createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';

/**
 * The only place that reads process.env. Each app asks for the config it needs; a bad value
 * stops the app at start with a message naming the variable (decisions §11).
 */
export type AppName =
  'intake-api' | 'submission-validator' | 'retry-worker' | 'refund-batcher' | 'webhook-dispatcher' | 'cli';

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    detail: string,
  ) {
    super(`Invalid configuration: ${variable} ${detail}`);
  }
}

export interface CardKey {
  id: string;
  key: Buffer;
}

/** An RSA private key for card-number JWEs and the `kid` it is published under. */
export interface JweKey {
  kid: string;
  privateKeyPem: string;
}

export interface RetainConfig {
  app: AppName;
  nodeEnv: string;
  databaseUrl: string;
  redisUrl: string;
  /** BullMQ key prefix; hash-tagged so every key of a queue lands on one Redis Cluster slot. */
  queuePrefix: string;
  /** Interface the HTTP servers bind to. */
  host: string;
  port: number;
  healthPort: number;
  processor: 'sandbox';
  retryTimeScale: number;
  refundBatchCron: string;
  webhookRetryScheduleMs: number[];
  webhookAllowPrivate: boolean;
  webhookTimeoutMs: number;
  /** AES-256-GCM keys for card data at rest; the first one encrypts, all decrypt (rotation). */
  cardKeys: CardKey[];
  /** Key for the card-number HMAC used for lookups (derived from the first card key). */
  /**
   * Card-number JWE keys (decisions §10), current first. All are published at GET /v1/retain/keys;
   * a JWE is decrypted with the key its `kid` names, so old keys keep working during a rotation.
   * From CARD_JWE_PRIVATE_KEYS (`kid:/path/key.pem,...`) and/or the single-key variables
   * CARD_JWE_PRIVATE_KEY / CARD_JWE_PRIVATE_KEY_FILE with CARD_JWE_KEY_ID. Empty: no JWE support.
   */
  jweKeys: JweKey[];
  logLevel: string;
  bodyLimitBytes: number;
  /** intake-api: longest time to receive a whole request (headers and body); HTTP_REQUEST_TIMEOUT, default 30s. */
  httpRequestTimeoutMs: number;
  /** Scheduler tick period of the workers (retry, webhook, outbox sweep), in ms. */
  tickMs: number;
  /** Test-only (refused in production): pause after a processor call, to kill a worker mid-attempt. */
  testPauseAfterProcessorMs: number;
}

const DEFAULT_HEALTH_PORTS: Record<AppName, number> = {
  'intake-api': 3000,
  'submission-validator': 3001,
  'retry-worker': 3002,
  'refund-batcher': 3003,
  'webhook-dispatcher': 3004,
  cli: 0,
};

/** Development key: only used when NODE_ENV is not production, and said so in the logs. */
const DEV_CARD_KEY = 'dev:' + Buffer.alloc(32, 7).toString('base64');

const DURATION_RE = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export function parseDuration(text: string): number | null {
  const m = DURATION_RE.exec(text.trim());
  return m ? Math.round(Number(m[1]) * UNIT_MS[m[2]!]!) : null;
}

export const DEFAULT_WEBHOOK_RETRY_SCHEDULE = '5s,5m,30m,2h,5h,10h,10h';

function parseUrl(name: string, value: string, protocols: string[]): string {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw new ConfigError(name, 'is not a valid URL');
  }
  if (!protocols.includes(u.protocol)) throw new ConfigError(name, `must use ${protocols.join(' or ')}`);
  return value;
}

function parsePort(name: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new ConfigError(name, 'must be a port number 0-65535');
  return n;
}

function parseBool(name: string, value: string): boolean {
  if (/^(true|1|yes)$/i.test(value)) return true;
  if (/^(false|0|no)$/i.test(value)) return false;
  throw new ConfigError(name, 'must be true or false');
}

/** `kid:base64key[,kid2:base64key2]`: each key exactly 32 bytes. */
export function parseCardKeys(name: string, value: string): CardKey[] {
  const keys = value.split(',').map((part) => {
    const idx = part.indexOf(':');
    if (idx <= 0) throw new ConfigError(name, 'must be a comma list of <key-id>:<base64 32-byte key>');
    const id = part.slice(0, idx).trim();
    const key = Buffer.from(part.slice(idx + 1).trim(), 'base64');
    if (!/^[A-Za-z0-9_.-]{1,32}$/.test(id)) throw new ConfigError(name, 'has an invalid key id');
    if (key.length !== 32) throw new ConfigError(name, 'keys must be 32 bytes (base64)');
    return { id, key };
  });
  return keys;
}

const JWE_KID_RE = /^[A-Za-z0-9_.-]{1,64}$/;

function rsaPrivateKeyPem(name: string, pem: string): string {
  try {
    if (!pem.includes('PRIVATE KEY') || createPrivateKey(pem).asymmetricKeyType !== 'rsa') throw new Error('not RSA');
  } catch {
    throw new ConfigError(name, 'must be a PEM RSA private key');
  }
  return pem;
}

function readKeyFile(name: string, file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    throw new ConfigError(name, `cannot read the key file ${file}`);
  }
}

/**
 * Card JWE keys: CARD_JWE_PRIVATE_KEYS (`kid:/path/to/key.pem`, comma separated, current first),
 * then the single key of CARD_JWE_PRIVATE_KEY (PEM text) or CARD_JWE_PRIVATE_KEY_FILE, published
 * under CARD_JWE_KEY_ID (default `retain-dev-1`). Key ids must be unique.
 */
export function parseJweKeys(get: (name: string) => string | undefined): JweKey[] {
  const keys: JweKey[] = [];
  const add = (name: string, kid: string, pem: string): void => {
    if (!JWE_KID_RE.test(kid)) throw new ConfigError(name, `has an invalid key id "${kid}" (A-Z a-z 0-9 _ . -, 1-64)`);
    if (keys.some((k) => k.kid === kid)) throw new ConfigError(name, `repeats the key id "${kid}"`);
    keys.push({ kid, privateKeyPem: rsaPrivateKeyPem(name, pem) });
  };
  const list = get('CARD_JWE_PRIVATE_KEYS');
  if (list !== undefined) {
    for (const part of list.split(',')) {
      const idx = part.indexOf(':');
      if (idx <= 0 || idx === part.length - 1) {
        throw new ConfigError('CARD_JWE_PRIVATE_KEYS', 'must be a comma list of <key-id>:<PEM file path>');
      }
      const kid = part.slice(0, idx).trim();
      add('CARD_JWE_PRIVATE_KEYS', kid, readKeyFile('CARD_JWE_PRIVATE_KEYS', part.slice(idx + 1).trim()));
    }
  }
  const kid = get('CARD_JWE_KEY_ID') ?? 'retain-dev-1';
  const inline = get('CARD_JWE_PRIVATE_KEY');
  const file = get('CARD_JWE_PRIVATE_KEY_FILE');
  if (inline !== undefined) add('CARD_JWE_PRIVATE_KEY', kid, inline);
  else if (file !== undefined) add('CARD_JWE_PRIVATE_KEY_FILE', kid, readKeyFile('CARD_JWE_PRIVATE_KEY_FILE', file));
  return keys;
}

const CRON_RE = /^(\S+\s+){4,5}\S+$/;

const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/retain';

/** What the one-shot migrator needs: the database only (no card keys, Redis or ports). */
export interface MigrateConfig {
  app: 'migrate';
  nodeEnv: string;
  databaseUrl: string;
}

function envReader(env: NodeJS.ProcessEnv): (name: string) => string | undefined {
  return (name) => {
    const v = env[name];
    return v === undefined || v === '' ? undefined : v;
  };
}

/**
 * The migration Job's config: DATABASE_URL only (required in production, where the local default
 * would be wrong). Other variables are ignored, so the Job needs no card keys or Redis.
 */
function loadMigrateConfig(env: NodeJS.ProcessEnv): MigrateConfig {
  const get = envReader(env);
  const nodeEnv = get('NODE_ENV') ?? 'development';
  const url = get('DATABASE_URL');
  if (!url && nodeEnv === 'production') throw new ConfigError('DATABASE_URL', 'is required in production');
  return {
    app: 'migrate',
    nodeEnv,
    databaseUrl: parseUrl('DATABASE_URL', url ?? DEFAULT_DATABASE_URL, ['postgres:', 'postgresql:']),
  };
}

export function loadConfig(app: 'migrate', env?: NodeJS.ProcessEnv): MigrateConfig;
export function loadConfig(app: AppName, env?: NodeJS.ProcessEnv): RetainConfig;
export function loadConfig(
  app: AppName | 'migrate',
  env: NodeJS.ProcessEnv = process.env,
): RetainConfig | MigrateConfig {
  if (app === 'migrate') return loadMigrateConfig(env);
  const get = envReader(env);
  const nodeEnv = get('NODE_ENV') ?? 'development';
  const production = nodeEnv === 'production';

  const retryTimeScale = Number(get('RETRY_TIME_SCALE') ?? '1');
  if (!Number.isFinite(retryTimeScale) || retryTimeScale < 1) {
    throw new ConfigError('RETRY_TIME_SCALE', 'must be a number >= 1');
  }

  const scheduleText = get('WEBHOOK_RETRY_SCHEDULE') ?? DEFAULT_WEBHOOK_RETRY_SCHEDULE;
  const webhookRetryScheduleMs = scheduleText.split(',').map((part) => {
    const ms = parseDuration(part);
    if (ms === null) throw new ConfigError('WEBHOOK_RETRY_SCHEDULE', `has an invalid duration "${part.trim()}"`);
    return ms;
  });

  const cardKeyText = get('CARD_DATA_KEY');
  if (!cardKeyText && production) throw new ConfigError('CARD_DATA_KEY', 'is required in production');
  const cardKeys = parseCardKeys('CARD_DATA_KEY', cardKeyText ?? DEV_CARD_KEY);

  const jweKeys = parseJweKeys(get);

  const refundBatchCron = get('REFUND_BATCH_CRON') ?? '0 2 * * *';
  if (!CRON_RE.test(refundBatchCron.trim())) {
    throw new ConfigError('REFUND_BATCH_CRON', 'must be a cron expression (5 fields, or 6 with seconds)');
  }

  const logLevel = get('LOG_LEVEL') ?? 'info';
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    throw new ConfigError('LOG_LEVEL', 'must be one of fatal, error, warn, info, debug, trace, silent');
  }

  const processor = get('PROCESSOR') ?? 'sandbox';
  if (processor !== 'sandbox') throw new ConfigError('PROCESSOR', 'must be "sandbox" (the only processor so far)');

  const queuePrefix = get('QUEUE_PREFIX') ?? '{retain}';
  if (!/^\{[A-Za-z0-9_-]+\}$/.test(queuePrefix)) {
    throw new ConfigError('QUEUE_PREFIX', 'must be a hash tag like {retain}');
  }

  const tickMs = parseDuration(get('SCHEDULER_TICK') ?? '2s');
  if (tickMs === null || tickMs < 100) throw new ConfigError('SCHEDULER_TICK', 'must be a duration >= 100ms');

  const httpRequestTimeoutMs = parseDuration(get('HTTP_REQUEST_TIMEOUT') ?? '30s');
  if (httpRequestTimeoutMs === null || httpRequestTimeoutMs < 1000) {
    throw new ConfigError('HTTP_REQUEST_TIMEOUT', 'must be a duration >= 1s');
  }

  const pause = Number(get('TEST_PAUSE_AFTER_PROCESSOR_MS') ?? '0');
  if (!Number.isInteger(pause) || pause < 0 || (pause > 0 && production)) {
    throw new ConfigError(
      'TEST_PAUSE_AFTER_PROCESSOR_MS',
      'must be a non-negative integer, and is refused in production',
    );
  }
  jobLockMs(env);

  return {
    app,
    nodeEnv,
    testPauseAfterProcessorMs: pause,
    databaseUrl: parseUrl('DATABASE_URL', get('DATABASE_URL') ?? DEFAULT_DATABASE_URL, ['postgres:', 'postgresql:']),
    redisUrl: parseUrl('REDIS_URL', get('REDIS_URL') ?? 'redis://127.0.0.1:6379', ['redis:', 'rediss:']),
    queuePrefix,
    host: get('HOST') ?? '0.0.0.0',
    port: parsePort('PORT', get('PORT') ?? '3000'),
    healthPort: parsePort('HEALTH_PORT', get('HEALTH_PORT') ?? String(DEFAULT_HEALTH_PORTS[app])),
    processor,
    retryTimeScale,
    refundBatchCron: refundBatchCron.trim(),
    webhookRetryScheduleMs,
    webhookAllowPrivate: parseBool('WEBHOOK_ALLOW_PRIVATE', get('WEBHOOK_ALLOW_PRIVATE') ?? 'false'),
    webhookTimeoutMs: 10_000,
    cardKeys,
    jweKeys,
    logLevel,
    bodyLimitBytes: 10 * 1024 * 1024,
    httpRequestTimeoutMs,
    tickMs,
  };
}

/** True when the card key is the built-in development key (logged as a warning at start). */
export function usesDevCardKey(config: RetainConfig): boolean {
  return config.cardKeys[0]!.id === 'dev';
}

/**
 * BullMQ job lock (and stalled-job check interval) of every worker, in ms: how long a crashed
 * worker's job stays claimed before another worker takes it over. Read at module load because
 * worker options are declared on the processor classes. JOB_LOCK_MS, default 30 s.
 */
export function jobLockMs(env: NodeJS.ProcessEnv = process.env): number {
  const text = env['JOB_LOCK_MS'];
  const value = text === undefined || text === '' ? 30_000 : Number(text);
  if (!Number.isInteger(value) || value < 1000 || value > 600_000) {
    throw new ConfigError('JOB_LOCK_MS', 'must be an integer number of milliseconds between 1000 and 600000');
  }
  return value;
}
