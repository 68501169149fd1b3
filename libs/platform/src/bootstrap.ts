import 'reflect-metadata';
import type { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import {
  exitOnConfigError,
  usesDevCardKey,
  usesDevFingerprintKey,
  type AppName,
  type RetainConfig,
} from '@retain/config';
import { Logger } from 'nestjs-pino';
import { RetainMetrics } from './metrics';
import { RETAIN_CONFIG } from './tokens';

export interface BootstrapOptions {
  /** intake-api listens on PORT; workers serve health and metrics on HEALTH_PORT. */
  listenOn: 'port' | 'healthPort';
  configure?: (app: NestFastifyApplication, config: RetainConfig) => Promise<void> | void;
  host?: string;
  /** Extra Fastify server options (request ids, URL rewriting). */
  adapterOptions?: Record<string, unknown>;
}

/** Creates the Nest app on Fastify, wires logging, metrics and graceful shutdown, and listens. */
export async function createApp(
  module: unknown,
  config: RetainConfig,
  options: BootstrapOptions,
): Promise<NestFastifyApplication> {
  const adapter = new FastifyAdapter({
    bodyLimit: config.bodyLimitBytes,
    logger: false,
    ...(config.trustProxy !== undefined ? { trustProxy: config.trustProxy } : {}),
    ...options.adapterOptions,
  });
  const app = await NestFactory.create<NestFastifyApplication>(module as never, adapter, {
    bufferLogs: true,
    abortOnError: false,
  });
  app.useLogger(app.get(Logger));
  const metrics = app.get(RetainMetrics);
  const fastify = app.getHttpAdapter().getInstance();
  fastify.addHook('onResponse', (req, reply, done) => {
    const route = req.routeOptions?.url ?? 'unmatched';
    metrics.httpDuration.observe(
      { method: req.method, route, status: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
    done();
  });
  // While shutting down, answers close their keep-alive connection so the server can close.
  fastify.addHook('onSend', (_req, reply, payload, done) => {
    if (shuttingDown) void reply.header('connection', 'close');
    done(null, payload);
  });
  await options.configure?.(app, config);
  const port = options.listenOn === 'port' ? config.port : config.healthPort;
  await app.listen(port, options.host ?? config.host);
  return app;
}

/** Entry point of each app: a bad configuration stops it with the variable's name. */
export async function runApp(
  app: AppName,
  moduleFactory: (config: RetainConfig) => unknown,
  loadConfig: (app: AppName) => RetainConfig,
  options: BootstrapOptions,
): Promise<INestApplication> {
  let config: RetainConfig;
  try {
    config = loadConfig(app);
  } catch (err) {
    exitOnConfigError(app, err);
    throw err;
  }
  const nest = await createApp(moduleFactory(config), config, options);
  installGracefulShutdown(nest, app);
  if (usesDevCardKey(config)) {
    nest
      .get(Logger)
      .warn(
        `CARD_DATA_KEY is not set: ${app} uses the built-in development card key (refused outside NODE_ENV development and test)`,
      );
  }
  if (usesDevFingerprintKey(config)) {
    // Fingerprints are what the network rules count a card by: one made with a key published in the
    // source can be matched by anyone who has a card number. Warned on its own: CARD_DATA_KEY may be set.
    nest
      .get(Logger)
      .warn(
        `CARD_FINGERPRINT_KEY is not set: ${app} uses the built-in development fingerprint key (refused outside NODE_ENV development and test)`,
      );
  }
  nest.get(Logger).log(`${app} started on port ${options.listenOn === 'port' ? config.port : config.healthPort}`);
  return nest;
}

export { RETAIN_CONFIG };

/** Longest a shutdown may take before the process gives up (above the longest job lock). */
const SHUTDOWN_TIMEOUT_MS = 60_000;

/**
 * On SIGTERM/SIGINT: stop taking work and close. app.close() stops the HTTP server (requests in
 * flight finish), runs the shutdown hooks (BullMQ workers finish their active jobs), then closes
 * Postgres and Redis; the process exits 0. Further signals are logged and ignored: Ctrl-C under
 * `npm start` always delivers two (the terminal's SIGINT to the process group, then the one
 * start.mjs forwards), and exiting on the second would abandon the jobs in flight. Only the
 * timeout forces an exit (1); an operator who cannot wait sends SIGKILL.
 */
let shuttingDown = false;

function installGracefulShutdown(nest: INestApplication, app: AppName): void {
  const onSignal = (signal: NodeJS.Signals): void => {
    const logger = nest.get(Logger);
    if (shuttingDown) {
      logger.log(`${app} received ${signal} again: still finishing the work in flight`);
      return;
    }
    shuttingDown = true;
    logger.log(`${app} received ${signal}: shutting down`);
    const timer = setTimeout(() => {
      logger.error(`${app} did not shut down within ${SHUTDOWN_TIMEOUT_MS} ms`);
      process.exit(1);
    }, SHUTDOWN_TIMEOUT_MS);
    timer.unref();
    nest.close().then(
      () => {
        logger.log(`${app} stopped`);
        process.exit(0);
      },
      (err: unknown) => {
        logger.error(`${app} shutdown failed: ${(err as Error).message}`);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}
