import { createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { CronExpressionParser } from 'cron-parser';
import { cleanEnv, makeExactValidator, type ValidatorSpec } from 'envalid';

/**
 * The only place that reads process.env. Each app's variables are declared once in a schema
 * (`configSchema(app)`: type, default, choices, description), parsed by envalid with the project's
 * own validators (durations, key lists, cron), into one typed RetainConfig. A bad value stops the
 * app at start with a message naming the variable (decisions §11; exit code 78 in runApp).
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

/** EX_CONFIG (sysexits.h): how an app or the migrator stops on a bad variable (README, Configuration). */
export const CONFIG_ERROR_EXIT_CODE = 78;

/** Stops the process with CONFIG_ERROR_EXIT_CODE and the message naming the variable, if `err` is a ConfigError. */
export function exitOnConfigError(name: string, err: unknown): void {
  if (!(err instanceof ConfigError)) return;
  process.stderr.write(`${name}: ${err.message}\n`);
  process.exit(CONFIG_ERROR_EXIT_CODE);
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
  /** Retry policy version new transactions record (planning always uses a transaction's own). */
  retryPolicy: (typeof RETRY_POLICIES)[number];
  refundBatchCron: string;
  webhookRetryScheduleMs: number[];
  webhookAllowPrivate: boolean;
  webhookTimeoutMs: number;
  /**
   * Fastify's trustProxy (TRUST_PROXY): which peers' X-Forwarded-For names the client (the login
   * brake keys on it). Off by default: behind an ingress, set it to the ingress's addresses (no hop counts).
   */
  trustProxy: boolean | string | undefined;
  /** AES-256-GCM keys for card data at rest; the first one encrypts, all decrypt (rotation). */
  cardKeys: CardKey[];
  /**
   * HMAC keys of the card fingerprints (per-card network limits), current first, from
   * CARD_FINGERPRINT_KEY. Their own keys: rotating CARD_DATA_KEY keeps every card's history.
   */
  cardFingerprintKeys: CardKey[];
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
  /**
   * Reconciliation of unknown attempts (README, attempt states): an attempt the processor still has
   * no charge for after RECONCILE_NOT_FOUND_AFTER (default 15m) is settled as not charged; one
   * still unresolved after RECONCILE_ALERT_AFTER (default 1h) raises the operator alert. Both are
   * divided by RETRY_TIME_SCALE like the retry schedule.
   */
  reconcileNotFoundMs: number;
  reconcileAlertMs: number;
  /**
   * refund-batcher: a refund awaiting the processor's notification (Adyen `received`) this long after
   * it was sent raises the operator alert (REFUND_NOTIFICATION_ALERT_AFTER, default 24h, ÷ RETRY_TIME_SCALE).
   */
  refundNotificationAlertMs: number;
  /** How often the retry worker asks the processors which captures have settled (SETTLEMENT_CHECK_INTERVAL, real time). */
  settlementCheckMs: number;
  /** Per-request timeout of the Stripe/Adyen adapters (PROCESSOR_TIMEOUT, default 30s): then the outcome is unknown. */
  processorTimeoutMs: number;
  /** Retention (issue 14), real time: how often the retry worker sweeps, and how long each kind is kept. */
  retention: {
    intervalMs: number;
    /** The first sweep after start runs after between this and twice this (random). */
    firstSweepDelayMs: number;
    outboxMs: number;
    webhooksMs: number;
    sandboxLedgerMs: number;
    cardDataMs: number;
  };
}

const DEFAULT_HEALTH_PORTS: Record<AppName, number> = {
  'intake-api': 3000,
  'submission-validator': 3001,
  'retry-worker': 3002,
  'refund-batcher': 3003,
  'webhook-dispatcher': 3004,
  cli: 0,
};

/**
 * Development key: used only under NODE_ENV development or test when CARD_DATA_KEY is unset, and
 * said so in the logs. Anywhere else card data sealed with a key in the source code would be
 * readable by anyone, so the app refuses to start.
 */
const DEV_CARD_KEY = 'dev:' + Buffer.alloc(32, 7).toString('base64');
const DEV_FINGERPRINT_KEY = 'fp-dev:' + Buffer.alloc(32, 8).toString('base64');
const DEV_KEY_ENVS = ['development', 'test'];

const DURATION_RE = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export function parseDuration(text: string): number | null {
  const m = DURATION_RE.exec(text.trim());
  return m ? Math.round(Number(m[1]) * UNIT_MS[m[2]!]!) : null;
}

export const DEFAULT_WEBHOOK_RETRY_SCHEDULE = '5s,5m,30m,2h,5h,10h,10h';
/**
 * The longest step of WEBHOOK_RETRY_SCHEDULE: the dispatcher adds up to 20% jitter and records the
 * delay in milliseconds as a Postgres int (at most 2^31-1 ms, 24.8 days); 20 days x 1.2 = 24 days fits.
 * A longer step made the grouped record of a whole batch of attempts fail, and pushes their
 * receivers had accepted were sent again after the lease.
 */
export const MAX_WEBHOOK_RETRY_STEP = '20d';

/**
 * The longest duration given to a Node timer (setInterval, setTimeout, a socket or request timeout):
 * Node holds at most 2^31-1 ms (24.8 days) and runs a longer timer after 1 ms (a sweep or check every
 * millisecond, a request or processor call cut off at once). A longer value stops the app.
 */
export const MAX_TIMER_DURATION = '24d';
/** SCHEDULER_TICK's longest: the retry worker re-checks its tick scheduler every 10 ticks (a timer). */
export const MAX_SCHEDULER_TICK = '2d';
/**
 * The longest retention (OUTBOX_RETENTION, WEBHOOK_RETENTION, SANDBOX_LEDGER_RETENTION,
 * CARD_DATA_ERASE_AFTER): 100 years. Each sweep compares rows with "now minus the retention"; a much
 * longer one is a date Postgres refuses (timestamp out of range, before 4713 BC), so that kind's sweep
 * failed on every run. A longer value stops the app. The same bound holds RECONCILE_ALERT_AFTER and
 * REFUND_NOTIFICATION_ALERT_AFTER (their alerts' queries subtract them from now() the same way) and
 * RECONCILE_NOT_FOUND_AFTER beside them.
 */
export const MAX_RETENTION = '36500d';
/**
 * RETENTION_FIRST_SWEEP_DELAY's longest: the first sweep runs after up to twice it (jitter), a Node
 * timer (MAX_TIMER_DURATION).
 */
export const MAX_RETENTION_FIRST_SWEEP_DELAY = '12d';

// ---- Validators: each turns the raw text into a typed value or throws the detail of the message
// ("Invalid configuration: <VARIABLE> <detail>").

function urlWith(protocols: string[]): (value: string) => string {
  return (value) => {
    let u: URL;
    try {
      u = new URL(value);
    } catch {
      throw new Error('is not a valid URL');
    }
    if (!protocols.includes(u.protocol)) throw new Error(`must use ${protocols.join(' or ')}`);
    return value;
  };
}

function port(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isInteger(n) || n < 0 || n > 65535)
    throw new Error('must be a port number 0-65535');
  return n;
}

function bool(value: string): boolean {
  if (/^(true|1|yes)$/i.test(value)) return true;
  if (/^(false|0|no)$/i.test(value)) return false;
  throw new Error('must be true or false');
}

function oneOf<T extends string>(choices: readonly T[]): (value: string) => T {
  return (value) => {
    if (!(choices as readonly string[]).includes(value)) throw new Error(`must be one of ${choices.join(', ')}`);
    return value as T;
  };
}

function intBetween(min: number, max: number, unit = ''): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isInteger(n) || n < min || n > max) {
      throw new Error(`must be an integer${unit} between ${min} and ${max}`);
    }
    return n;
  };
}

/** A duration like `250ms`, `2s`, `5m`, `1.5h`, `1d`, at most `max` when given. */
function durationAtLeast(minMs: number, max?: string): (value: string) => number {
  const maxMs = max === undefined ? Infinity : parseDuration(max)!;
  return (value) => {
    const ms = parseDuration(value);
    if (ms === null || ms < minMs || ms > maxMs) {
      throw new Error(`must be a duration (250ms, 2s, 5m, 2h, 1d) >= ${minMs}ms${max ? ` and <= ${max}` : ''}`);
    }
    return ms;
  };
}

/** WEBHOOK_RETRY_SCHEDULE: durations, each at most MAX_WEBHOOK_RETRY_STEP. */
function retrySchedule(value: string): number[] {
  const max = parseDuration(MAX_WEBHOOK_RETRY_STEP)!;
  return value.split(',').map((part) => {
    const ms = parseDuration(part);
    if (ms === null) throw new Error(`has an invalid duration "${part.trim()}"`);
    if (ms > max) throw new Error(`has a step "${part.trim()}" longer than the maximum ${MAX_WEBHOOK_RETRY_STEP}`);
    return ms;
  });
}

/** A cron expression as BullMQ's job scheduler reads it (the same parser), that has a next run. */
function cron(value: string): string {
  const pattern = value.trim();
  let next: number;
  try {
    next = CronExpressionParser.parse(pattern, { tz: 'UTC' }).next().getTime();
  } catch (err) {
    throw new Error(`must be a cron expression (5 fields, or 6 with seconds) that runs: ${(err as Error).message}`);
  }
  if (!Number.isFinite(next)) throw new Error('must be a cron expression that runs');
  return pattern;
}

/** The next run of a cron pattern (UTC), or null when it has none: for readiness checks. */
export function nextCronRun(pattern: string, from: Date = new Date()): Date | null {
  try {
    return CronExpressionParser.parse(pattern, { tz: 'UTC', currentDate: from }).next().toDate();
  } catch {
    return null;
  }
}

/** The latest time at or before `from` that the cron pattern matches (UTC), or null when it cannot be computed. */
export function previousCronRun(pattern: string, from: Date = new Date()): Date | null {
  try {
    return CronExpressionParser.parse(pattern, { tz: 'UTC', currentDate: from }).prev().toDate();
  } catch {
    return null;
  }
}

/**
 * Key id of a key given bare (no `kid:`), as decisions §11 allows: `CARD_DATA_KEY=<base64 key>` is
 * `CARD_DATA_KEY=default:<base64 key>`. Rows remember the id they were sealed under; a row whose id is
 * no longer configured is opened by whichever configured key authenticates it (libs/domain `open`),
 * so naming that key later (`k2:<new>,k1:<the same key>`) keeps its rows readable.
 */
export const BARE_CARD_KEY_ID = 'default';

/** A bare 32-byte key: 43 base64 or base64url characters, optionally padded with one `=`. */
const BARE_KEY_RE = /^[A-Za-z0-9+/_-]{43}=?$/;

/**
 * `kid:base64key[,kid2:base64key2]`, or a bare base64 / base64url key (key id `default`), alone or in
 * the list: each key exactly 32 bytes, each key id once.
 */
function cardKeyList(value: string): CardKey[] {
  const keys = value.split(',').map((raw) => {
    const part = raw.trim();
    const idx = part.indexOf(':');
    if (idx < 0) {
      // Base64 has no colon: a part without one is a bare key.
      if (!BARE_KEY_RE.test(part))
        throw new Error('must be a base64 32-byte key, or a comma list of <key-id>:<base64 32-byte key>');
      // Node's base64 decoder reads the url-safe alphabet too.
      const key = Buffer.from(part, 'base64');
      if (key.length !== 32) throw new Error('keys must be 32 bytes (base64)');
      return { id: BARE_CARD_KEY_ID, key };
    }
    if (idx === 0) throw new Error('must be a comma list of <key-id>:<base64 32-byte key>');
    const id = part.slice(0, idx).trim();
    const key = Buffer.from(part.slice(idx + 1).trim(), 'base64');
    if (!/^[A-Za-z0-9_.-]{1,32}$/.test(id)) throw new Error('has an invalid key id');
    if (key.length !== 32) throw new Error('keys must be 32 bytes (base64)');
    return { id, key };
  });
  const ids = keys.map((k) => k.id);
  const dup = ids.find((id, i) => ids.indexOf(id) !== i);
  if (dup !== undefined) throw new Error(`has the key id ${dup} twice (a bare key is the key id ${BARE_CARD_KEY_ID})`);
  return keys;
}

/** As CARD_DATA_KEY: `kid:base64key[,kid2:base64key2]` or a bare base64 key; each exactly 32 bytes. */
export function parseCardKeys(name: string, value: string): CardKey[] {
  try {
    return cardKeyList(value);
  } catch (err) {
    throw new ConfigError(name, (err as Error).message);
  }
}

/**
 * TRUST_PROXY: 'true' / 'false', or the proxies' addresses and CIDRs (comma-separated). No hop
 * count: Fastify refuses to trust one (it cannot check the immediate peer).
 */
function trustProxy(value: string): boolean | string {
  const v = value.trim();
  if (v === 'true' || v === 'false') return v === 'true';
  for (const part of v.split(',').map((p) => p.trim())) {
    // An IPv4 dotted quad or an IPv6 address (it has a colon), optionally with a prefix length; a bare
    // number would be read as an address (0.0.0.1), so a hop count is refused instead of ignored.
    const ok = /^(\d{1,3}(\.\d{1,3}){3}|[0-9A-Fa-f.]*:[0-9A-Fa-f.:]*)(\/\d{1,3})?$/.test(part);
    if (!ok) throw new Error(`not an address or CIDR (hop counts are not supported): ${part}`);
  }
  return v;
}

function text(value: string): string {
  return value;
}

// ---- The schema.

/** One environment variable: how it parses, its default (as text, like the README shows it), what it is. */
export interface ConfigVariable<T = unknown> {
  parse: (raw: string) => T;
  /** The default as written in the environment; absent: unset unless given. */
  default?: string;
  /** Allowed values, for the docs (parse enforces them). */
  choices?: readonly string[];
  desc: string;
}

const variable = <T>(v: ConfigVariable<T>): ConfigVariable<T> => v;

/**
 * NODE_ENV values: production is what turns on the portal cookie's Secure flag and HSTS, so a
 * misspelt one ('prod') stops the app instead of running as not-production.
 */
export const NODE_ENVS = ['production', 'development', 'test'] as const;
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export const PROCESSORS = ['sandbox'] as const;
/** Retry policy versions (libs/domain: LEGACY_POLICY_VERSION, POLICY_VERSION). */
export const RETRY_POLICIES = ['utc-heuristics-2026-10', 'adaptive-2026-11'] as const;
const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/retain';

/** Every variable an app reads, with this app's defaults. The README table lists the same. */
export function configSchema(app: AppName) {
  return {
    NODE_ENV: variable({
      parse: oneOf(NODE_ENVS),
      default: 'development',
      choices: NODE_ENVS,
      desc: 'development and test allow the built-in card key; production requires CARD_DATA_KEY (and marks the portal cookie Secure, sends HSTS)',
    }),
    DATABASE_URL: variable({
      parse: urlWith(['postgres:', 'postgresql:']),
      default: DEFAULT_DATABASE_URL,
      desc: 'PostgreSQL, the source of truth',
    }),
    REDIS_URL: variable({
      parse: urlWith(['redis:', 'rediss:']),
      default: 'redis://127.0.0.1:6379',
      desc: 'Redis for BullMQ queues',
    }),
    QUEUE_PREFIX: variable({
      parse: (v) => {
        if (!/^\{[A-Za-z0-9_-]+\}$/.test(v)) throw new Error('must be a hash tag like {retain}');
        return v;
      },
      default: '{retain}',
      desc: 'BullMQ key prefix (a Redis Cluster hash tag)',
    }),
    HOST: variable({ parse: text, default: '0.0.0.0', desc: 'interface the HTTP servers bind to' }),
    PORT: variable({ parse: port, default: '3000', desc: 'intake-api HTTP port' }),
    HEALTH_PORT: variable({
      parse: port,
      default: String(DEFAULT_HEALTH_PORTS[app]),
      desc: 'workers: /healthz, /readyz, /metrics port',
    }),
    PROCESSOR: variable({
      parse: oneOf(PROCESSORS),
      default: 'sandbox',
      choices: PROCESSORS,
      desc: 'processor adapter',
    }),
    RETRY_TIME_SCALE: variable({
      parse: (v) => {
        const n = Number(v);
        if (v.trim() === '' || !Number.isFinite(n) || n < 1) throw new Error('must be a number >= 1');
        return n;
      },
      default: '1',
      desc: 'runs the retry schedule N times faster',
    }),
    RETRY_POLICY: variable({
      parse: oneOf(RETRY_POLICIES),
      default: 'adaptive-2026-11',
      choices: RETRY_POLICIES,
      desc: 'retry policy version new transactions record',
    }),
    REFUND_BATCH_CRON: variable({ parse: cron, default: '0 2 * * *', desc: 'refund batch schedule (UTC)' }),
    WEBHOOK_RETRY_SCHEDULE: variable({
      parse: retrySchedule,
      default: DEFAULT_WEBHOOK_RETRY_SCHEDULE,
      desc: 'push delivery retry delays',
    }),
    WEBHOOK_ALLOW_PRIVATE: variable({ parse: bool, default: 'false', desc: 'allow webhook URLs on private addresses' }),
    TRUST_PROXY: variable({
      parse: trustProxy,
      desc: "proxies whose X-Forwarded-For names the client: 'true', or addresses/CIDRs (comma-separated)",
    }),
    CARD_DATA_KEY: variable({ parse: cardKeyList, desc: 'AES-256-GCM keys for card data, first encrypts' }),
    CARD_FINGERPRINT_KEY: variable({
      parse: cardKeyList,
      desc: 'HMAC keys of the card fingerprints (network limits), first computes; its own key so a data key rotation keeps limits',
    }),
    CARD_JWE_PRIVATE_KEYS: variable({ parse: text, desc: 'JWE keys for rotation: kid:/path/key.pem,...' }),
    CARD_JWE_PRIVATE_KEY: variable({ parse: text, desc: 'JWE RSA private key (PEM)' }),
    CARD_JWE_PRIVATE_KEY_FILE: variable({ parse: text, desc: 'JWE RSA private key file' }),
    CARD_JWE_KEY_ID: variable({ parse: text, default: 'retain-dev-1', desc: 'kid of the single JWE key' }),
    SCHEDULER_TICK: variable({
      parse: durationAtLeast(100, MAX_SCHEDULER_TICK),
      default: '2s',
      desc: "workers' tick period",
    }),
    HTTP_REQUEST_TIMEOUT: variable({
      parse: durationAtLeast(1000, MAX_TIMER_DURATION),
      default: '30s',
      desc: 'intake-api: a request not fully received within this is cut off with 408',
    }),
    RECONCILE_NOT_FOUND_AFTER: variable({
      parse: durationAtLeast(1, MAX_RETENTION),
      default: '15m',
      desc: 'an unknown attempt the processor still does not know after this is settled as not charged',
    }),
    PROCESSOR_TIMEOUT: variable({
      parse: durationAtLeast(100, MAX_TIMER_DURATION),
      default: '30s',
      desc: 'per-request timeout of the Stripe/Adyen adapters; a charge without an answer by then is unknown and looked up',
    }),
    RETENTION_INTERVAL: variable({
      parse: durationAtLeast(1, MAX_TIMER_DURATION),
      default: '1h',
      desc: 'how often the retry worker runs the retention sweep (batched deletes and card-data erasure)',
    }),
    RETENTION_FIRST_SWEEP_DELAY: variable({
      parse: durationAtLeast(1, MAX_RETENTION_FIRST_SWEEP_DELAY),
      default: '10s',
      desc: "the retry worker's first retention sweep runs between this and twice this after start (random, so replicas started together do not sweep at once), then every RETENTION_INTERVAL",
    }),
    OUTBOX_RETENTION: variable({
      parse: durationAtLeast(1, MAX_RETENTION),
      default: '7d',
      desc: 'outbox rows are deleted this long after their job completed',
    }),
    WEBHOOK_RETENTION: variable({
      parse: durationAtLeast(1, MAX_RETENTION),
      default: '30d',
      desc: 'delivered, gone (410) or endpoint-less push messages and their delivery logs are deleted this long after they ended (pending and dead ones never)',
    }),
    SANDBOX_LEDGER_RETENTION: variable({
      parse: durationAtLeast(1, MAX_RETENTION),
      default: '30d',
      desc: "the sandbox processor's ledger operations are deleted this long after they were made (never one an unresolved attempt or open refund needs, nor the sandbox account updater's renewals)",
    }),
    CARD_DATA_ERASE_AFTER: variable({
      parse: durationAtLeast(1, MAX_RETENTION),
      default: '180d',
      desc: "the refund window: a transaction's card data is erased this long after its recovery ended (fingerprint, BIN, last four and expiry kept)",
    }),
    SETTLEMENT_CHECK_INTERVAL: variable({
      parse: durationAtLeast(1, MAX_TIMER_DURATION),
      default: '1h',
      desc: 'how often captured transactions are checked for settlement (Captured -> Settled), in real time',
    }),
    RECONCILE_ALERT_AFTER: variable({
      parse: durationAtLeast(1, MAX_RETENTION),
      default: '1h',
      desc: 'an unknown attempt whose lookups keep failing this long raises the operator alert',
    }),
    REFUND_NOTIFICATION_ALERT_AFTER: variable({
      parse: durationAtLeast(1, MAX_RETENTION),
      default: '24h',
      desc: 'a refund the processor accepted without a result (Adyen received) whose notification has not come this long after it was sent raises the operator alert',
    }),
    JOB_LOCK_MS: variable({
      parse: intBetween(1000, 600_000, ' number of milliseconds'),
      default: '30000',
      desc: 'BullMQ job lock and stalled check',
    }),
    RETRY_ATTEMPT_CONCURRENCY: variable({
      parse: intBetween(1, 256),
      desc: 'retry-worker: retry.attempt jobs (up to 25 attempts each) one process runs at once; unset: the queue record (16)',
    }),
    LOG_LEVEL: variable({ parse: oneOf(LOG_LEVELS), default: 'info', choices: LOG_LEVELS, desc: 'pino level' }),
    TEST_PAUSE_AFTER_PROCESSOR_MS: variable({
      parse: intBetween(0, 600_000),
      default: '0',
      desc: 'test only: pause after a processor call (refused in production)',
    }),
  };
}

/** The names of every variable the apps read (for docs and tests). */
export const CONFIG_VARIABLES = Object.keys(configSchema('cli'));

type Schema = Record<string, ConfigVariable>;
type Parsed<S extends Schema> = { [K in keyof S]: S[K] extends ConfigVariable<infer T> ? T | undefined : never };

/** Parses `env` with envalid against a schema; the first bad variable becomes a ConfigError. */
function parseEnv<S extends Schema>(schema: S, env: NodeJS.ProcessEnv): Parsed<S> {
  type Value = NonNullable<unknown>;
  const specs: Record<string, ValidatorSpec<Value>> = {};
  for (const [name, v] of Object.entries(schema)) {
    // Defaults are written as text and parsed like a value from the environment.
    specs[name] = makeExactValidator<Value>(v.parse as (raw: string) => Value)({
      default: v.default === undefined ? undefined : (v.parse(v.default) as Value),
      desc: v.desc,
      ...(v.choices ? { choices: [...v.choices] } : {}),
    });
  }
  // An empty variable counts as unset (`FOO=` in an env file, an empty ConfigMap value).
  const given = Object.fromEntries(Object.entries(env).filter(([name, value]) => name in schema && value !== ''));
  const cleaned = cleanEnv(given, specs, {
    reporter: ({ errors }) => {
      const [name, err] = Object.entries(errors)[0] ?? [];
      if (name && err) throw new ConfigError(name, err.message);
    },
  });
  return { ...cleaned } as unknown as Parsed<S>;
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

/** A private key's material, whatever its PEM encoding (PKCS#1 or PKCS#8, line breaks). */
function keyMaterial(pem: string): Buffer {
  return createPrivateKey(pem).export({ type: 'pkcs8', format: 'der' });
}

/**
 * Card JWE keys: CARD_JWE_PRIVATE_KEYS (`kid:/path/to/key.pem`, comma separated, current first),
 * then the single key of CARD_JWE_PRIVATE_KEY (PEM text) or CARD_JWE_PRIVATE_KEY_FILE, published
 * under CARD_JWE_KEY_ID (default `retain-dev-1`). Key ids must be unique, except that the single key
 * may be listed in CARD_JWE_PRIVATE_KEYS under its own key id with the same key material (the JWE key
 * rotation of README "Kubernetes": the Deployments keep passing the single key while the list holds
 * the new key and that one); it is then listed once. The same id with another key stops the app.
 */
export function parseJweKeys(get: (name: string) => string | undefined): JweKey[] {
  const keys: JweKey[] = [];
  const add = (name: string, kid: string, pem: string, single = false): void => {
    if (!JWE_KID_RE.test(kid)) throw new ConfigError(name, `has an invalid key id "${kid}" (A-Z a-z 0-9 _ . -, 1-64)`);
    const checked = rsaPrivateKeyPem(name, pem);
    const same = keys.find((k) => k.kid === kid);
    if (same) {
      if (single && keyMaterial(same.privateKeyPem).equals(keyMaterial(checked))) return;
      throw new ConfigError(
        name,
        single
          ? `repeats the key id "${kid}" of CARD_JWE_PRIVATE_KEYS with another key (the same id must name the same key)`
          : `repeats the key id "${kid}"`,
      );
    }
    keys.push({ kid, privateKeyPem: checked });
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
  if (inline !== undefined) add('CARD_JWE_PRIVATE_KEY', kid, inline, true);
  else if (file !== undefined)
    add('CARD_JWE_PRIVATE_KEY_FILE', kid, readKeyFile('CARD_JWE_PRIVATE_KEY_FILE', file), true);
  return keys;
}

/** What the one-shot migrator needs: the database only (no card keys, Redis or ports). */
export interface MigrateConfig {
  app: 'migrate';
  nodeEnv: string;
  databaseUrl: string;
}

/** The migrator's schema: DATABASE_URL (required in production, where the local default would be wrong). */
export function migrateSchema(nodeEnv: string) {
  const { NODE_ENV, DATABASE_URL } = configSchema('cli');
  return {
    NODE_ENV,
    DATABASE_URL: nodeEnv === 'production' ? { ...DATABASE_URL, default: undefined } : DATABASE_URL,
  };
}

/** The migration Job's config: other variables are ignored, so the Job needs no card keys or Redis. */
function loadMigrateConfig(env: NodeJS.ProcessEnv): MigrateConfig {
  const nodeEnv = env['NODE_ENV'] || 'development';
  const parsed = parseEnv(migrateSchema(nodeEnv), env);
  if (parsed.DATABASE_URL === undefined) throw new ConfigError('DATABASE_URL', 'is required in production');
  return { app: 'migrate', nodeEnv: parsed.NODE_ENV!, databaseUrl: parsed.DATABASE_URL };
}

export function loadConfig(app: 'migrate', env?: NodeJS.ProcessEnv): MigrateConfig;
export function loadConfig(app: AppName, env?: NodeJS.ProcessEnv): RetainConfig;
export function loadConfig(
  app: AppName | 'migrate',
  env: NodeJS.ProcessEnv = process.env,
): RetainConfig | MigrateConfig {
  if (app === 'migrate') return loadMigrateConfig(env);
  const v = parseEnv(configSchema(app), env);
  // Every variable with a default is defined after parsing; the optional ones are checked below.
  const nodeEnv = v.NODE_ENV!;

  let cardKeys = v.CARD_DATA_KEY;
  if (!cardKeys) {
    if (!DEV_KEY_ENVS.includes(nodeEnv)) {
      throw new ConfigError(
        'CARD_DATA_KEY',
        `is required when NODE_ENV is ${nodeEnv}: the built-in development key is only for NODE_ENV development and test`,
      );
    }
    cardKeys = cardKeyList(DEV_CARD_KEY);
  }
  let cardFingerprintKeys = v.CARD_FINGERPRINT_KEY;
  if (!cardFingerprintKeys) {
    if (!DEV_KEY_ENVS.includes(nodeEnv)) {
      throw new ConfigError(
        'CARD_FINGERPRINT_KEY',
        `is required when NODE_ENV is ${nodeEnv}: the built-in development key is only for NODE_ENV development and test`,
      );
    }
    cardFingerprintKeys = cardKeyList(DEV_FINGERPRINT_KEY);
  }

  const jweKeys = parseJweKeys((name) => v[name as keyof typeof v] as string | undefined);

  const pause = v.TEST_PAUSE_AFTER_PROCESSOR_MS!;
  if (pause > 0 && nodeEnv === 'production') {
    throw new ConfigError(
      'TEST_PAUSE_AFTER_PROCESSOR_MS',
      'must be a non-negative integer, and is refused in production',
    );
  }

  return {
    app,
    nodeEnv,
    testPauseAfterProcessorMs: pause,
    databaseUrl: v.DATABASE_URL!,
    redisUrl: v.REDIS_URL!,
    queuePrefix: v.QUEUE_PREFIX!,
    host: v.HOST!,
    port: v.PORT!,
    healthPort: v.HEALTH_PORT!,
    processor: v.PROCESSOR!,
    retryTimeScale: v.RETRY_TIME_SCALE!,
    retryPolicy: v.RETRY_POLICY!,
    refundBatchCron: v.REFUND_BATCH_CRON!,
    webhookRetryScheduleMs: v.WEBHOOK_RETRY_SCHEDULE!,
    webhookAllowPrivate: v.WEBHOOK_ALLOW_PRIVATE!,
    trustProxy: v.TRUST_PROXY as RetainConfig['trustProxy'],
    webhookTimeoutMs: 10_000,
    cardKeys,
    cardFingerprintKeys,
    jweKeys,
    logLevel: v.LOG_LEVEL!,
    bodyLimitBytes: 10 * 1024 * 1024,
    tickMs: v.SCHEDULER_TICK!,
    reconcileNotFoundMs: v.RECONCILE_NOT_FOUND_AFTER!,
    reconcileAlertMs: v.RECONCILE_ALERT_AFTER!,
    refundNotificationAlertMs: v.REFUND_NOTIFICATION_ALERT_AFTER!,
    settlementCheckMs: v.SETTLEMENT_CHECK_INTERVAL!,
    processorTimeoutMs: v.PROCESSOR_TIMEOUT!,
    httpRequestTimeoutMs: v.HTTP_REQUEST_TIMEOUT!,
    retention: {
      intervalMs: v.RETENTION_INTERVAL!,
      firstSweepDelayMs: v.RETENTION_FIRST_SWEEP_DELAY!,
      outboxMs: v.OUTBOX_RETENTION!,
      webhooksMs: v.WEBHOOK_RETENTION!,
      sandboxLedgerMs: v.SANDBOX_LEDGER_RETENTION!,
      cardDataMs: v.CARD_DATA_ERASE_AFTER!,
    },
  };
}

/** True when the card key is the built-in development key (logged as a warning at start). */
export function usesDevCardKey(config: RetainConfig): boolean {
  return config.cardKeys[0]!.id === 'dev';
}

/** Whether card fingerprints use the built-in development key (CARD_FINGERPRINT_KEY not set). */
export function usesDevFingerprintKey(config: RetainConfig): boolean {
  return config.cardFingerprintKeys[0]!.id === 'fp-dev';
}

/**
 * BullMQ job lock (and stalled-job check interval) of every worker, in ms: how long a crashed
 * worker's job stays claimed before another worker takes it over. Read at module load because
 * worker options are declared on the processor classes. JOB_LOCK_MS, default 30 s.
 */
export function jobLockMs(env: NodeJS.ProcessEnv = process.env): number {
  const { JOB_LOCK_MS } = configSchema('cli');
  return parseEnv({ JOB_LOCK_MS }, env).JOB_LOCK_MS!;
}

/**
 * The operator's overrides of the queue record's worker concurrency (read at module load, as
 * jobLockMs): RETRY_ATTEMPT_CONCURRENCY, unset by default. A processor that answers slowly bounds a
 * replica's attempts at (jobs at once x 25) / its response time; this raises it without more pods.
 */
export function concurrencySettings(env: NodeJS.ProcessEnv = process.env): { RETRY_ATTEMPT_CONCURRENCY?: number } {
  const { RETRY_ATTEMPT_CONCURRENCY } = configSchema('cli');
  const v = parseEnv({ RETRY_ATTEMPT_CONCURRENCY }, env).RETRY_ATTEMPT_CONCURRENCY;
  return v === undefined ? {} : { RETRY_ATTEMPT_CONCURRENCY: v };
}
