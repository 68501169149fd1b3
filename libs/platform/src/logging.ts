import { Writable } from 'node:stream';
import { scrubSecrets } from '@retain/domain';
import pino, { type Logger, type LoggerOptions } from 'pino';

/** Field names that hold a credential or card data wherever they are (a processor account's config). */
const SECRET_FIELDS = [
  'api_key',
  'apiKey',
  'webhook_secret',
  'webhookSecret',
  'secret',
  'secret_key',
  'hmac_key',
  'password',
  'pan',
  'card_number',
  'cryptogram',
];

/**
 * Structured paths that may carry secrets; censored before a line is written. pino's wildcards match
 * one level each: the fields are listed at the top level and one and two levels down. (Text masking,
 * scrubSecrets, has no pattern for every credential: an Adyen key is any string.)
 */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  ...SECRET_FIELDS.flatMap((f) => [f, `*.${f}`, `*.*.${f}`]),
  '*.credit_card.account',
  '*.*.credit_card.account',
];

// The masking rule lives in libs/domain (also used for failed-job rows); re-exported for callers here.
export { scrubSecrets };

/** A destination that scrubs each line before it reaches stdout (or the given stream). */
export function scrubbingDestination(out: NodeJS.WritableStream = process.stdout): Writable {
  return new Writable({
    write(chunk: Buffer | string, _enc, cb) {
      out.write(scrubSecrets(chunk.toString()));
      cb();
    },
  });
}

export function loggerOptions(app: string, level: string): LoggerOptions {
  return {
    level,
    base: { app },
    redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  };
}

export function createLogger(app: string, level: string): Logger {
  return pino(loggerOptions(app, level), scrubbingDestination());
}
