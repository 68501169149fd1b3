import './json-columns';
import { Client } from 'pg';
import { DataSource, type DataSourceOptions } from 'typeorm';
import { ENTITIES } from './entities';
import { InitialSchema1732280000000 } from './migrations/1732280000000-InitialSchema';
import { AttemptCardScope1732290000000 } from './migrations/1732290000000-AttemptCardScope';
import { WebhookReplayCount1795400000000 } from './migrations/1795400000000-WebhookReplayCount';
import { AttemptUnknownState1796000000000 } from './migrations/1796000000000-AttemptUnknownState';
import { FailedJobs1796100000000 } from './migrations/1796100000000-FailedJobs';
import { CardFingerprintKeyId1796200000000 } from './migrations/1796200000000-CardFingerprintKeyId';
import { ProcessorAccounts1796400000000 } from './migrations/1796400000000-ProcessorAccounts';
import { ProcessorThrottles1796500000000 } from './migrations/1796500000000-ProcessorThrottles';
import { PolicyVersions1797060000000 } from './migrations/1797060000000-PolicyVersions';
import { AccountPaymentMethods1797200000000 } from './migrations/1797200000000-AccountPaymentMethods';
import { MerchantAccounts1797350000000 } from './migrations/1797350000000-MerchantAccounts';
import { PortalSessions1797400000000 } from './migrations/1797400000000-PortalSessions';
import { AnalyticsRollup1797400000100 } from './migrations/1797400000100-AnalyticsRollup';
import { PolicyExperiments1797900000000 } from './migrations/1797900000000-PolicyExperiments';
import { PartialAuthorizations1797950000000 } from './migrations/1797950000000-PartialAuthorizations';
import { NetworkFees1797970000000 } from './migrations/1797970000000-NetworkFees';
import { NetworkAdviceCode1797980000000 } from './migrations/1797980000000-NetworkAdviceCode';
import { Settlement1797990000000 } from './migrations/1797990000000-Settlement';
import { ForcedDeposit1798000000000 } from './migrations/1798000000000-ForcedDeposit';
import { ListIndexes1798100000000 } from './migrations/1798100000000-ListIndexes';
import { PendingCounters1798200000000 } from './migrations/1798200000000-PendingCounters';
import { Retention1798300000000 } from './migrations/1798300000000-Retention';
import { ConcurrentSubmissions1798400000000 } from './migrations/1798400000000-ConcurrentSubmissions';
import { DeliveryPump1798500000000 } from './migrations/1798500000000-DeliveryPump';
import { UnreadAttemptIndexes1798600000000 } from './migrations/1798600000000-UnreadAttemptIndexes';
import { QuietRollupTriggers1798700000000 } from './migrations/1798700000000-QuietRollupTriggers';
import { KeyLedLookups1798800000000 } from './migrations/1798800000000-KeyLedLookups';
import { GroupedIntakeRollup1798900000000 } from './migrations/1798900000000-GroupedIntakeRollup';
import { SubmissionScopedTransactions1799000000000 } from './migrations/1799000000000-SubmissionScopedTransactions';
import { DueTransactions1799100000000 } from './migrations/1799100000000-DueTransactions';
import { StatementRollupUpdates1799200000000 } from './migrations/1799200000000-StatementRollupUpdates';
import { TimeOrderedIds1799300000000 } from './migrations/1799300000000-TimeOrderedIds';
import { RoomForHotUpdates1799400000000 } from './migrations/1799400000000-RoomForHotUpdates';
import { LongPaymentMethodIds1799500000000 } from './migrations/1799500000000-LongPaymentMethodIds';
import { ProcessorAccountVersions1799600000000 } from './migrations/1799600000000-ProcessorAccountVersions';
import { EndedPushRetention1799700000000 } from './migrations/1799700000000-EndedPushRetention';
import { RefundIdempotencyKeys1799800000000 } from './migrations/1799800000000-RefundIdempotencyKeys';
import { OriginalDeclines1799900000000 } from './migrations/1799900000000-OriginalDeclines';
import { OriginalDeclineCodes1799950000000 } from './migrations/1799950000000-OriginalDeclineCodes';
import { FairPushClaims1799960000000 } from './migrations/1799960000000-FairPushClaims';
import { BreakdownKeyColumns1800100000000 } from './migrations/1800100000000-BreakdownKeyColumns';
import { FixedBreakdownKeys1800100000100 } from './migrations/1800100000100-FixedBreakdownKeys';
import { ErasedPushBodies1800200000000 } from './migrations/1800200000000-ErasedPushBodies';
import { RefundedAttempt1800400000000 } from './migrations/1800400000000-RefundedAttempt';
import { NumericRollupAmounts1800450000000 } from './migrations/1800450000000-NumericRollupAmounts';
import { HashOnlyCardErasure1800300000000 } from './migrations/1800300000000-HashOnlyCardErasure';
import { LeftPendingAttempts1800500000000 } from './migrations/1800500000000-LeftPendingAttempts';
import { AttemptLastSent1800500000100 } from './migrations/1800500000100-AttemptLastSent';
import { ProcessorNotifications1800600000000 } from './migrations/1800600000000-ProcessorNotifications';
import { RefundNotificationAlert1800700000000 } from './migrations/1800700000000-RefundNotificationAlert';
import { OriginalPaymentMethod1800800000000 } from './migrations/1800800000000-OriginalPaymentMethod';
import { AccountUpdateReplaced1800900000000 } from './migrations/1800900000000-AccountUpdateReplaced';
import { ReEraseLegacyCardData1801000000000 } from './migrations/1801000000000-ReEraseLegacyCardData';
import { NotificationRefusalDetail1801200000000 } from './migrations/1801200000000-NotificationRefusalDetail';
import { TestPushLimit1801240000000 } from './migrations/1801240000000-TestPushLimit';
import { RefundRecheck1801250000000 } from './migrations/1801250000000-RefundRecheck';
import { OneRecoveryPerTransaction1801600000000 } from './migrations/1801600000000-OneRecoveryPerTransaction';
import { TransactionPartialAmount1801700000000 } from './migrations/1801700000000-TransactionPartialAmount';
import { NotificationRetentionIndex1801800000000 } from './migrations/1801800000000-NotificationRetentionIndex';

/** Migrations, listed explicitly and applied in this order. */
export const MIGRATIONS = [
  InitialSchema1732280000000,
  AttemptCardScope1732290000000,
  WebhookReplayCount1795400000000,
  AttemptUnknownState1796000000000,
  FailedJobs1796100000000,
  CardFingerprintKeyId1796200000000,
  ProcessorAccounts1796400000000,
  ProcessorThrottles1796500000000,
  PolicyVersions1797060000000,
  AccountPaymentMethods1797200000000,
  MerchantAccounts1797350000000,
  PortalSessions1797400000000,
  AnalyticsRollup1797400000100,
  PolicyExperiments1797900000000,
  PartialAuthorizations1797950000000,
  NetworkFees1797970000000,
  NetworkAdviceCode1797980000000,
  Settlement1797990000000,
  ForcedDeposit1798000000000,
  ListIndexes1798100000000,
  PendingCounters1798200000000,
  Retention1798300000000,
  ConcurrentSubmissions1798400000000,
  DeliveryPump1798500000000,
  UnreadAttemptIndexes1798600000000,
  QuietRollupTriggers1798700000000,
  KeyLedLookups1798800000000,
  GroupedIntakeRollup1798900000000,
  SubmissionScopedTransactions1799000000000,
  DueTransactions1799100000000,
  StatementRollupUpdates1799200000000,
  TimeOrderedIds1799300000000,
  RoomForHotUpdates1799400000000,
  LongPaymentMethodIds1799500000000,
  ProcessorAccountVersions1799600000000,
  EndedPushRetention1799700000000,
  RefundIdempotencyKeys1799800000000,
  OriginalDeclines1799900000000,
  OriginalDeclineCodes1799950000000,
  FairPushClaims1799960000000,
  BreakdownKeyColumns1800100000000,
  FixedBreakdownKeys1800100000100,
  ErasedPushBodies1800200000000,
  HashOnlyCardErasure1800300000000,
  RefundedAttempt1800400000000,
  NumericRollupAmounts1800450000000,
  LeftPendingAttempts1800500000000,
  AttemptLastSent1800500000100,
  ProcessorNotifications1800600000000,
  RefundNotificationAlert1800700000000,
  OriginalPaymentMethod1800800000000,
  AccountUpdateReplaced1800900000000,
  ReEraseLegacyCardData1801000000000,
  NotificationRefusalDetail1801200000000,
  TestPushLimit1801240000000,
  RefundRecheck1801250000000,
  OneRecoveryPerTransaction1801600000000,
  TransactionPartialAmount1801700000000,
  NotificationRetentionIndex1801800000000,
];

export interface PoolTuning {
  /**
   * Do not wait for the WAL flush at commit. Only for writes whose loss in a database crash is
   * harmless (webhook delivery state: at worst a push is delivered again, which is allowed).
   */
  asyncCommit?: boolean;
}

export function dataSourceOptions(databaseUrl: string, poolSize = 10, tuning: PoolTuning = {}): DataSourceOptions {
  return {
    type: 'postgres',
    url: databaseUrl,
    entities: ENTITIES,
    migrations: MIGRATIONS,
    migrationsRun: false,
    synchronize: false,
    logging: false,
    extra: {
      max: poolSize,
      connectionTimeoutMillis: 5000,
      ...(tuning.asyncCommit ? { options: '-c synchronous_commit=off' } : {}),
    },
  };
}

export function createDataSource(databaseUrl: string, poolSize = 10, tuning: PoolTuning = {}): DataSource {
  return new DataSource(dataSourceOptions(databaseUrl, poolSize, tuning));
}

/**
 * Runs `fn` with a client on the `postgres` database of the server `databaseUrl` names: where CREATE
 * and DROP DATABASE run (neither can run inside the database it creates or drops).
 */
export async function withAdminDatabase<T>(databaseUrl: string, fn: (admin: Client) => Promise<T>): Promise<T> {
  const url = new URL(databaseUrl);
  url.pathname = '/postgres';
  const client = new Client({ connectionString: url.toString() });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** Statements, one after another, on the admin database of that server (`withAdminDatabase`). */
export async function onAdminDatabase(databaseUrl: string, sql: readonly string[]): Promise<void> {
  await withAdminDatabase(databaseUrl, async (admin) => {
    for (const q of sql) await admin.query(q);
  });
}

/**
 * Creates the database named in the URL when it does not exist yet (fresh machines, tests). It asks
 * the database itself first: a deployment's role may have no access to `postgres` (PgBouncer, a
 * pg_hba limited to the service's database), and only a missing database (3D000) needs it.
 */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const name = databaseName(databaseUrl);
  if (!/^[A-Za-z0-9_]+$/.test(name)) throw new Error('DATABASE_URL names an unsupported database name');
  const own = new Client({ connectionString: databaseUrl });
  try {
    await own.connect();
    return;
  } catch (err) {
    if ((err as { code?: string }).code !== '3D000') throw err;
  } finally {
    await own.end().catch(() => undefined);
  }
  await withAdminDatabase(databaseUrl, async (admin) => {
    const found = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (found.rowCount === 0) {
      try {
        await admin.query(`CREATE DATABASE "${name}"`);
      } catch (err) {
        // Created meanwhile by another run (two migrations at once): 42P04, or the catalog's unique index.
        const code = (err as { code?: string }).code;
        if (code !== '42P04' && code !== '23505') throw err;
      }
    }
  });
}

/** Drops the database named in the URL, whoever is still connected (tests, benches). */
export async function dropDatabase(databaseUrl: string): Promise<void> {
  await onAdminDatabase(databaseUrl, [`DROP DATABASE IF EXISTS "${databaseName(databaseUrl)}" WITH (FORCE)`]);
}

/**
 * Creates the database named in the URL as a copy of `template` (tests: a copy of the run's migrated
 * database costs a fraction of applying every migration). Nobody may be connected to the template.
 */
export async function copyDatabase(databaseUrl: string, template: string): Promise<void> {
  await onAdminDatabase(databaseUrl, [`CREATE DATABASE "${databaseName(databaseUrl)}" TEMPLATE "${template}"`]);
}

/** The database a URL names. */
function databaseName(databaseUrl: string): string {
  return decodeURIComponent(new URL(databaseUrl).pathname.replace(/^\//, ''));
}

/** The session advisory lock key migration runs take turns on ('retain' in ASCII). */
export const MIGRATION_LOCK_KEY = '125780153691502';
const MIGRATION_LOCK_POLL_MS = 250;

/**
 * Applies pending migrations. Runs at once (the migrate command beside the Kubernetes Job, a Job
 * retried while the first still runs) take turns on a session-level advisory lock held on its own
 * connection: the next one finds the migrations applied and applies nothing (without the lock, two
 * on a fresh database both ran InitialSchema, one failing on pg_extension_name_index). The lock
 * goes with the session if the process dies.
 */
export async function migrate(databaseUrl: string): Promise<string[]> {
  await ensureDatabase(databaseUrl);
  const ds = createDataSource(databaseUrl, 2);
  await ds.initialize();
  const lock = ds.createQueryRunner();
  try {
    await lock.connect();
    // Polled, not pg_advisory_lock: a session blocked in that statement holds a snapshot, and the
    // running migrations' CREATE INDEX CONCURRENTLY waits for every older snapshot to go: a deadlock
    // Postgres does not detect. Between tries a waiter holds none.
    for (;;) {
      const [{ ok }] = (await lock.query(`SELECT pg_try_advisory_lock($1::bigint) AS ok`, [MIGRATION_LOCK_KEY])) as [
        { ok: boolean },
      ];
      if (ok) break;
      await new Promise((resolve) => setTimeout(resolve, MIGRATION_LOCK_POLL_MS));
    }
    try {
      const applied = await ds.runMigrations({ transaction: 'each' });
      return applied.map((m) => m.name);
    } finally {
      await lock.query(`SELECT pg_advisory_unlock($1::bigint)`, [MIGRATION_LOCK_KEY]);
    }
  } finally {
    await lock.release();
    await ds.destroy();
  }
}

/** Reverts the last migration (used by tests to prove each down() works). */
export async function revertLast(databaseUrl: string): Promise<void> {
  const ds = createDataSource(databaseUrl, 2);
  await ds.initialize();
  try {
    await ds.undoLastMigration({ transaction: 'each' });
  } finally {
    await ds.destroy();
  }
}
