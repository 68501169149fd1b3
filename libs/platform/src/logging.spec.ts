import { describe, expect, it } from 'vitest';
import { REDACT_PATHS, scrubSecrets } from './logging';

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

  it('leaves ordinary numbers alone', () => {
    expect(scrubSecrets('{"latency_ms":1234,"port":3000,"count":12345678901}')).toBe(
      '{"latency_ms":1234,"port":3000,"count":12345678901}',
    );
  });
});
