import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { REDACT_PATHS, loggerOptions, scrubSecrets } from './logging';

describe('log scrubbing', () => {
  it('masks card numbers, API keys and webhook secrets wherever they hide', () => {
    const line = JSON.stringify({
      msg: 'card 4111111111111111 and 5555 5555 5555 4444 and 4000-0000-0000-0077',
      key: 'rk_abcdefghijklmnopqrstuvwxyz0123456789ABCD',
      secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    });
    const out = scrubSecrets(line);
    expect(out).not.toMatch(/4111111111111111|5555 5555 5555 4444|4000-0000-0000-0077/);
    expect(out).toContain('411111******1111');
    expect(out).not.toContain('abcdefghijklmnopqrstuvwxyz0123456789');
    expect(out).not.toContain('MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');
  });

  it("masks processor accounts' keys too (Stripe sk_/rk_ live and test keys), in text and in a config object", () => {
    const out = scrubSecrets(
      'Stripe said: Invalid API Key provided: sk_live_51HxAbCdEfGhIjKlMnOp and rk_test_51HxQrStUvWxYz0123',
    );
    expect(out).not.toMatch(/51HxAbCdEfGhIjKlMnOp|51HxQrStUvWxYz0123/);
    expect(out).toContain('sk_live_[REDACTED]');
    expect(REDACT_PATHS).toContain('*.secret_key');
  });

  it('censors processor credentials by field name at the top level and two levels down (an Adyen key has no pattern to mask)', () => {
    // The secrets audit (session 25): `api_key` was censored only one level down, `hmac_key` nowhere.
    const lines: string[] = [];
    const out = new Writable({
      write(chunk: Buffer, _enc, cb) {
        lines.push(chunk.toString());
        cb();
      },
    });
    const log = pino(loggerOptions('test', 'info'), out);
    const adyen = { api_key: 'AQEyhmfxKo3NaRVK', hmac_key: '44782DEF547AAA06', merchant_account: 'RetainECOM' };
    log.info({ ...adyen, secret_key: 'sk_zzTopLevel', webhook_secret: 'whTopLevel' }, 'top level');
    log.info({ account: adyen }, 'one level down');
    log.info({ merchant: { account: { ...adyen, secret_key: 'sk_zzDeep' } } }, 'two levels down');
    const text = lines.join('');
    expect(lines).toHaveLength(3);
    expect(text).not.toMatch(/AQEyhmfxKo3NaRVK|44782DEF547AAA06|sk_zz|whTopLevel/);
    expect(text).toContain('RetainECOM');
  });

  it('leaves ordinary numbers alone', () => {
    expect(scrubSecrets('{"latency_ms":1234,"port":3000,"count":12345678901}')).toBe(
      '{"latency_ms":1234,"port":3000,"count":12345678901}',
    );
  });
});
