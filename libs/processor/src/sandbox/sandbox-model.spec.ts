import { describe, expect, it } from 'vitest';
import { approvalProbability, cardProfile, fundsAvailable, modelOutcome, type ModelInput } from './sandbox-model';
import { MemorySandboxLedger } from './sandbox-ledger';
import { SandboxProcessor } from './sandbox.processor';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const input = (over: Partial<ModelInput> = {}): ModelInput => ({
  pan: '4242424242424242',
  network: 'visa',
  originalResponseCode: '51',
  amountMinor: 1999n,
  attemptNumber: 1,
  at: new Date('2026-03-13T09:00:00Z'),
  originalFailedAt: new Date('2026-03-10T01:00:00Z'),
  ...over,
});
/** Luhn-valid Visa numbers, none of them scripted. */
const cards = Array.from({ length: 400 }, (_, i) => {
  const body = `4${String(100_000_000_000_00 + i * 7919).padStart(14, '0')}`;
  let sum = 0;
  for (let j = 0; j < body.length; j++) {
    let d = Number(body[body.length - 1 - j]);
    if (j % 2 === 0) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
  }
  return body + ((10 - (sum % 10)) % 10);
});

describe('seeded recovery model', () => {
  it('is deterministic by card number and attempt number', async () => {
    const run = async () => {
      const p = new SandboxProcessor(new MemorySandboxLedger());
      const out: string[] = [];
      for (const pan of cards.slice(0, 50))
        for (let n = 1; n <= 3; n++) {
          const r = await p.charge({
            idempotencyKey: `${pan}:${n}`,
            attemptNumber: n,
            amountMinor: 1999n,
            currency: 'USD',
            instrument: { kind: 'pan', pan },
            originalResponseCode: '05',
            divisionNumber: 'd',
            at: new Date(Date.UTC(2026, 2, 10 + n * 2, 9)),
            originalFailedAt: new Date('2026-03-10T01:00:00Z'),
          });
          out.push(r.outcome === 'declined' ? r.responseCode : r.outcome);
        }
      return out;
    };
    const a = await run();
    expect(await run()).toEqual(a);
    expect(new Set(a).size).toBeGreaterThan(1);
    expect(modelOutcome(input())).toEqual(modelOutcome(input()));
  });

  it('insufficient funds recover around paydays: money lasts a few days after the deposit', () => {
    for (const pan of cards.slice(0, 100)) {
      const profile = cardProfile(pan, '51', 1999n);
      if (!profile.recoverable) continue;
      // Over five weeks every payer has money at some point, and lacks it at some other point.
      const hours = Array.from({ length: 35 * 24 }, (_, h) => new Date(Date.UTC(2026, 2, 2) + h * HOUR));
      const available = hours.map((t) => fundsAvailable(profile, t));
      expect(available.some(Boolean), pan).toBe(true);
      expect(available.every(Boolean), pan).toBe(false);
    }
  });

  it('varies with the day of month, the weekday and the hour', () => {
    const mean = (at: Date, over: Partial<ModelInput> = {}) =>
      cards.reduce((s, pan) => s + approvalProbability(input({ pan, at, ...over })), 0) / cards.length;
    // Day of month: the 1st (a payday) beats a plain Wednesday after mid-month.
    expect(mean(new Date('2026-04-01T09:00:00Z'))).toBeGreaterThan(1.5 * mean(new Date('2026-04-22T09:00:00Z')));
    // Weekday: Friday (weekly and biweekly pay) beats Thursday.
    expect(mean(new Date('2026-03-13T09:00:00Z'))).toBeGreaterThan(mean(new Date('2026-03-12T09:00:00Z')));
    // Hour: the same day at 09:00 beats 01:00 (salary not yet there, night-time risk rules).
    expect(mean(new Date('2026-03-13T09:00:00Z'))).toBeGreaterThan(mean(new Date('2026-03-13T01:00:00Z')));
    // Generic declines: weekend and night lower the odds too.
    const generic = { originalResponseCode: '05', originalFailedAt: new Date('2026-02-01T00:00:00Z') };
    expect(mean(new Date('2026-03-13T09:00:00Z'), generic)).toBeGreaterThan(
      mean(new Date('2026-03-14T09:00:00Z'), generic),
    );
    expect(mean(new Date('2026-03-13T09:00:00Z'), generic)).toBeGreaterThan(
      mean(new Date('2026-03-13T23:00:00Z'), generic),
    );
  });

  it('technical declines clear within hours, generic ones after days', () => {
    const failed = new Date('2026-03-10T09:00:00Z');
    const mean = (code: string, afterMs: number) =>
      cards.reduce(
        (s, pan) =>
          s +
          approvalProbability(
            input({
              pan,
              originalResponseCode: code,
              originalFailedAt: failed,
              at: new Date(failed.getTime() + afterMs),
            }),
          ),
        0,
      ) / cards.length;
    expect(mean('91', 12 * HOUR)).toBeGreaterThan(3 * mean('91', 0));
    expect(mean('05', 10 * DAY)).toBeGreaterThan(2 * mean('05', 6 * HOUR));
  });

  it('never approves hard, data-quality or authentication declines; repeated attempts approve less', () => {
    for (const code of ['41', '14', '54', '1A'])
      for (const pan of cards.slice(0, 50))
        expect(approvalProbability(input({ pan, originalResponseCode: code }))).toBe(0);
    const at = (n: number) => cards.reduce((s, pan) => s + approvalProbability(input({ pan, attemptNumber: n })), 0);
    expect(at(8)).toBeLessThan(at(1));
  });
});
