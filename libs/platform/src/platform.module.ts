import { BullModule, WorkerHost } from '@nestjs/bullmq';
import {
  Controller,
  Get,
  Global,
  Header,
  Inject,
  Injectable,
  Module,
  type DynamicModule,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
} from '@nestjs/common';
import { DiscoveryModule, DiscoveryService } from '@nestjs/core';
import { HealthCheck, HealthCheckService, HealthIndicatorService, TerminusModule } from '@nestjs/terminus';
import { loadConfig, type AppName, type RetainConfig } from '@retain/config';
import { AlertReadingsRepository, AttemptsRepository, RefundsRepository, createDataSource } from '@retain/db';
import { ConnectionErrorLog, FailedJobs, OutboxRelay, QueueRegistry, createRedis } from '@retain/queues';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { LoggerModule } from 'nestjs-pino';
import { DataSource } from 'typeorm';
import { JobRunner, OutboxSweeper } from './jobs';
import { createLogger } from './logging';
import { QUEUES_BY_APP, RetainMetrics, withTimeout, type DbPoolStats } from './metrics';
import { FailedJobsHook } from './queues';
import { DbRepositoryProviders } from './repositories.provider';
import { REDIS, RETAIN_CONFIG } from './tokens';

/** Postgres and Redis must answer within this time for /readyz to say ready. */
const READY_TIMEOUT_MS = 2000;

/** The counts of TypeORM's pg pool (its driver's `master`), null before it exists. */
function poolStats(db: DataSource): DbPoolStats | null {
  const pool = (
    db.driver as unknown as {
      master?: { totalCount: number; idleCount: number; waitingCount: number; options: { max: number } };
    }
  ).master;
  if (!pool) return null;
  return { total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount, max: pool.options.max };
}

/** A readiness condition beyond Postgres and Redis: null when fine, else the reason it is not. */
export type ReadinessCheck = () => Promise<string | null>;

/**
 * Extra readiness checks an app adds at start (e.g. the refund batcher's schedule); /readyz reports
 * each under its name, down with the reason.
 */
@Injectable()
export class ReadinessChecks {
  private readonly checks = new Map<string, ReadinessCheck>();

  add(name: string, check: ReadinessCheck): void {
    this.checks.set(name, check);
  }

  entries(): [string, ReadinessCheck][] {
    return [...this.checks.entries()];
  }
}

@Controller()
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly indicators: HealthIndicatorService,
    private readonly db: DataSource,
    @Inject(REDIS) private readonly redis: Redis,
    private readonly metrics: RetainMetrics,
    private readonly extra: ReadinessChecks,
  ) {}

  /** Liveness: the process answers; dependencies are not checked (restarts would not help). */
  @Get('healthz')
  healthz(): { status: string } {
    return { status: 'ok' };
  }

  /** Readiness: Postgres and Redis reachable (decisions §1), and the app's own checks. */
  @Get('readyz')
  // Without terminus' OpenAPI decorators: they require @nestjs/swagger (~200 ms of CPU at every start
  // of the four apps that serve no OpenAPI document). The intake-api's document still lists /readyz.
  @HealthCheck({ noCache: true, swaggerDocumentation: false })
  readyz() {
    return this.health.check([
      async () => {
        const s = this.indicators.check('postgres');
        try {
          await withTimeout(this.db.query('SELECT 1'), READY_TIMEOUT_MS, 'postgres');
          return s.up();
        } catch (e) {
          return s.down({ message: (e as Error).message });
        }
      },
      async () => {
        const s = this.indicators.check('redis');
        try {
          await withTimeout(this.redis.ping(), READY_TIMEOUT_MS, 'redis');
          return s.up();
        } catch (e) {
          return s.down({ message: (e as Error).message });
        }
      },
      ...this.extra.entries().map(([name, check]) => async () => {
        const s = this.indicators.check(name);
        try {
          const problem = await withTimeout(check(), READY_TIMEOUT_MS, name);
          return problem === null ? s.up() : s.down({ message: problem });
        } catch (e) {
          return s.down({ message: (e as Error).message });
        }
      }),
    ]);
  }

  @Get('metrics')
  @Header('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')
  async prometheus(): Promise<string> {
    return this.metrics.registry.metrics();
  }
}

/** Owns the process-wide connections and closes them last, after the workers stopped. */
@Injectable()
export class ConnectionsLifecycle implements OnApplicationShutdown {
  constructor(
    private readonly db: DataSource,
    @Inject(REDIS) private readonly redis: Redis,
    private readonly queues: QueueRegistry,
  ) {}

  async onApplicationShutdown(): Promise<void> {
    await this.queues.close();
    if (this.db.isInitialized) await this.db.destroy();
    this.redis.disconnect();
  }
}

/**
 * Routes the connection errors of the BullMQ workers and queues Nest created (@Processor classes,
 * BullModule.registerQueue) through the rate-limited log. Runs once every module is initialised,
 * which is when @nestjs/bullmq has created the workers.
 */
@Injectable()
export class BullConnectionErrors implements OnApplicationBootstrap {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly errors: ConnectionErrorLog,
  ) {}

  onApplicationBootstrap(): void {
    for (const { instance } of this.discovery.getProviders()) {
      if (instance instanceof WorkerHost) this.errors.watch(`worker ${instance.worker.name}`, instance.worker);
      else if (instance instanceof Queue) this.errors.watch(`queue ${instance.name}`, instance);
    }
  }
}

@Global()
@Module({})
export class PlatformModule {
  /** Config, Postgres, Redis, queues, outbox relay, logging, metrics and health for one app. */
  static forApp(app: AppName, config: RetainConfig = loadConfig(app)): DynamicModule {
    const logger = createLogger(app, config.logLevel);
    // Redis connection errors: JSON lines through pino, one per connection per interval.
    const errors = new ConnectionErrorLog((fields, msg) => logger.warn(fields, msg));
    const redis = errors.watch('redis', createRedis(config.redisUrl));
    // The API and the dispatcher (64 concurrent deliveries) need more connections than the others.
    const poolSize = app === 'intake-api' || app === 'webhook-dispatcher' ? 20 : 10;
    // Apps that run workers: they sweep the outbox, record jobs that failed for good and report them.
    const worker = app !== 'intake-api' && app !== 'cli';
    return {
      module: PlatformModule,
      imports: [
        DiscoveryModule,
        TerminusModule.forRoot({ logger: false }),
        LoggerModule.forRoot({
          pinoHttp: {
            logger,
            autoLogging: { ignore: (req) => /^\/(healthz|readyz|metrics)/.test(req.url ?? '') },
            quietReqLogger: true,
          },
        }),
        BullModule.forRoot({ connection: redis, prefix: config.queuePrefix }),
      ],
      controllers: [HealthController],
      providers: [
        { provide: RETAIN_CONFIG, useValue: config },
        { provide: REDIS, useValue: redis },
        { provide: ConnectionErrorLog, useValue: errors },
        BullConnectionErrors,
        {
          provide: DataSource,
          useFactory: async () => {
            // The dispatcher's writes (delivery state and log) may skip the commit flush: losing the last
            // few in a database crash only re-delivers a push, which at-least-once delivery allows.
            const ds = createDataSource(config.databaseUrl, poolSize, { asyncCommit: app === 'webhook-dispatcher' });
            await ds.initialize();
            return ds;
          },
        },
        {
          provide: RetainMetrics,
          inject: [QueueRegistry, FailedJobs, DataSource],
          useFactory: (q: QueueRegistry, failed: FailedJobs, db: DataSource) => {
            const metrics = new RetainMetrics(app);
            metrics.trackQueueDepth(QUEUES_BY_APP[app], (name, states) => q.get(name).getJobCounts(...states));
            if (worker) metrics.trackFailedJobs(() => failed.openCounts());
            // The money alerts' gauges, read from Postgres on every scrape by every pod of the owning app.
            const scaled = (ms: number) => ms / config.retryTimeScale;
            if (app === 'retry-worker')
              metrics.trackValue(metrics.unreconciledAttempts, () =>
                AttemptsRepository.countUnknownOlderThan(db, scaled(config.reconcileAlertMs)),
              );
            if (app === 'refund-batcher') {
              metrics.trackValue(metrics.refundsAwaitingNotification, () =>
                RefundsRepository.countOverdueAwaitingNotification(db, scaled(config.refundNotificationAlertMs)),
              );
              metrics.trackValue(metrics.refundsOldestUnsent, () =>
                AlertReadingsRepository.oldestUnsentRefundSeconds(db),
              );
              metrics.trackValue(metrics.refundsOldestHeld, () => AlertReadingsRepository.oldestHeldRefundSeconds(db));
            }
            // Every worker sweeps the outbox, so any of them reports what the sweep cannot enqueue.
            if (worker)
              metrics.trackValue(metrics.outboxOldestUnpublished, () =>
                AlertReadingsRepository.oldestUnpublishedOutboxSeconds(db),
              );
            metrics.trackDbPool(() => poolStats(db));
            return metrics;
          },
        },
        {
          provide: QueueRegistry,
          useFactory: () => new QueueRegistry(redis, config.queuePrefix, errors),
        },
        {
          provide: OutboxRelay,
          inject: [DataSource, QueueRegistry],
          useFactory: (db: DataSource, q: QueueRegistry) => new OutboxRelay(db, q),
        },
        {
          provide: FailedJobs,
          inject: [DataSource, QueueRegistry, OutboxRelay],
          useFactory: (db: DataSource, queues: QueueRegistry, relay: OutboxRelay) =>
            new FailedJobs(db, { queues, relay }),
        },
        ConnectionsLifecycle,
        ReadinessChecks,
        JobRunner,
        // Workers sweep the outbox; the API only writes to it and publishes after commit.
        ...(worker ? [OutboxSweeper, FailedJobsHook] : []),
        ...DbRepositoryProviders,
      ],
      exports: [
        RETAIN_CONFIG,
        REDIS,
        DataSource,
        RetainMetrics,
        QueueRegistry,
        OutboxRelay,
        FailedJobs,
        JobRunner,
        ReadinessChecks,
        ...DbRepositoryProviders,
      ],
    };
  }
}
