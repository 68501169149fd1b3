import { Writable } from 'node:stream';
import pino, { type Logger, type LoggerOptions } from 'pino';

/** Structured paths that may carry secrets; censored before a line is written. */
export const REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  '*.api_key',
  '*.apiKey',
  '*.webhook_secret',
  '*.webhookSecret',
  '*.secret',
  '*.password',
  '*.pan',
  '*.card_number',
  '*.cryptogram',
  '*.credit_card.account',
  '*.*.credit_card.account',
];

// Digit runs that could be a full card number (12-19 digits, optionally separated), API keys
// and webhook secrets are masked in the final text, whatever field or message they hid in.
const PAN_RE = /\b\d(?:[ -]?\d){11,18}\b/g;
const SECRET_RE = /\b(rk_[A-Za-z0-9_-]{8})[A-Za-z0-9_-]+|\b(whsec_)[A-Za-z0-9+/=]+/g;

export function scrubSecrets(line: string): string {
  return line
    .replace(PAN_RE, (m) => {
      const digits = m.replace(/\D/g, '');
      return `${digits.slice(0, 6)}${'*'.repeat(Math.max(0, digits.length - 10))}${digits.slice(-4)}`;
    })
    .replace(SECRET_RE, (_m, key: string | undefined, wh: string | undefined) =>
      key ? `${key}[REDACTED]` : `${wh}[REDACTED]`,
    );
}

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
