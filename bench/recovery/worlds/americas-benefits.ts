// A world the policy was not developed on (issue 11): cardholders across the Americas on the pay
// calendars of their countries, money that arrives early in the local morning and is gone within
// days, Mastercard issuers that advise when to come back, and customers who cancel over time.
// - Places: US (Eastern, Central, Mountain, Pacific), Canada, Mexico, Brazil, Colombia.
// - Income: US Social Security on the 2nd, 3rd or 4th Wednesday (by birthday) or the 3rd; SSI on the
//   1st; biweekly Friday payroll (deposited Thursday night by early-pay banks for a third of them);
//   Mexico's quincena (15th and last day); Brazil's salary on the 5th business day and the advance on
//   the 20th; Canada's biweekly Thursday; Colombia's 15th and 30th.
// - Funds stay 1 to 3 days after they arrive; the chance an issuer approves falls with attempts.
// - Decline mix: more insufficient funds and generic declines, 8% never-recover codes, expired
//   cards; Mastercard declines carry advice codes 24-30 (retry after a delay) or 01/03.
import { DateTime } from 'luxon';
import type { RecoveryWorld, SubmittedTransaction } from '../world';
import { DAY, draw, localDays, luhnCard, nthBusinessDay, pick, rng } from './_kit';

type Calendar =
  'ssa-wed' | 'ssa-3rd' | 'ssi-1st' | 'us-biweekly' | 'quincena' | 'br-salary' | 'ca-biweekly' | 'co-quincena';

const PLACES: readonly (readonly [[string, string, string, readonly (readonly [Calendar, number])[]], number])[] = [
  [
    [
      'US',
      '10001',
      'America/New_York',
      [
        ['us-biweekly', 5],
        ['ssa-wed', 2],
        ['ssa-3rd', 1],
        ['ssi-1st', 1],
      ],
    ],
    0.22,
  ],
  [
    [
      'US',
      '60601',
      'America/Chicago',
      [
        ['us-biweekly', 5],
        ['ssa-wed', 2],
        ['ssi-1st', 1],
      ],
    ],
    0.14,
  ],
  [
    [
      'US',
      '80202',
      'America/Denver',
      [
        ['us-biweekly', 5],
        ['ssa-wed', 2],
        ['ssa-3rd', 1],
      ],
    ],
    0.06,
  ],
  [
    [
      'US',
      '90012',
      'America/Los_Angeles',
      [
        ['us-biweekly', 5],
        ['ssa-wed', 2],
        ['ssi-1st', 1],
      ],
    ],
    0.14,
  ],
  [['CA', 'M5H 2N2', 'America/Toronto', [['ca-biweekly', 1]]], 0.08],
  [['MX', '06000', 'America/Mexico_City', [['quincena', 1]]], 0.14],
  [['BR', '20040-020', 'America/Sao_Paulo', [['br-salary', 1]]], 0.14],
  [['CO', '110111', 'America/Bogota', [['co-quincena', 1]]], 0.08],
];

const CODES: readonly (readonly [string, number])[] = [
  ['51', 0.52],
  ['05', 0.22],
  ['61', 0.04],
  ['54', 0.04],
  ['91', 0.03],
  ['96', 0.02],
  ['62', 0.02],
  ['13', 0.02],
  ['57', 0.02],
  ['14', 0.02],
  ['41', 0.02],
  ['65', 0.03],
];

interface Hidden {
  zone: string;
  calendar: Calendar;
  /** Which Wednesday (2-4) for SSA, the biweekly phase, or 0. */
  phase: number;
  earlyPay: boolean;
  depositHour: number;
  staysDays: number;
  giveUpDays: number;
}

function isPayday(h: Hidden, d: DateTime): boolean {
  const biweekly = (weekday: number): boolean =>
    d.weekday === weekday && Math.floor(d.toMillis() / DAY / 7) % 2 === h.phase % 2;
  switch (h.calendar) {
    case 'ssa-wed':
      return d.weekday === 3 && Math.ceil(d.day / 7) === h.phase;
    case 'ssa-3rd':
      return d.day === 3;
    case 'ssi-1st':
      return d.day === 1;
    case 'us-biweekly':
      // Early-pay banks post Friday's payroll on Wednesday.
      return biweekly(h.earlyPay ? 3 : 5);
    case 'ca-biweekly':
      return biweekly(4);
    case 'quincena':
    case 'co-quincena':
      return d.day === 15 || d.day === d.daysInMonth;
    case 'br-salary':
      return d.day === nthBusinessDay(d, 5) || d.day === 20;
  }
}

const hidden = new Map<string, Hidden>();

const world: RecoveryWorld = {
  transactions(count: number, seed: number): SubmittedTransaction[] {
    const r = rng(seed ^ 0xa3e1);
    const start = Date.parse('2026-01-05T00:00:00Z');
    return Array.from({ length: count }, (_, i) => {
      const [country, postal, zone, calendars] = pick(r(), PLACES);
      const id = `amb-${seed}-${i}`;
      const calendar = pick(r(), calendars);
      hidden.set(id, {
        zone,
        calendar,
        phase: calendar === 'ssa-wed' ? 2 + Math.floor(r() * 3) : Math.floor(r() * 2),
        earlyPay: r() < 0.33,
        depositHour: 1 + Math.floor(r() * 8),
        staysDays: Math.floor(r() * 3),
        giveUpDays: -Math.log(1 - r()) * 20,
      });
      const mastercard = r() < 0.4;
      const pan = luhnCard(mastercard ? `5${1 + Math.floor(r() * 5)}` : '4', r);
      const code = pick(r(), CODES);
      // Billing runs at the merchant's hour (02:00-08:00 UTC), evenly over 300 days.
      const failedAt = start + Math.floor((i / count) * 300) * DAY + Math.floor((2 + r() * 6) * 3_600_000);
      const mac =
        mastercard && (code === '51' || code === '05') && r() < 0.3
          ? pick(r(), [
              ['24', 1],
              ['25', 2],
              ['26', 2],
              ['27', 1],
              ['28', 1],
              ['29', 1],
              ['30', 1],
            ] as const)
          : undefined;
      const exp = DateTime.fromMillis(failedAt).plus({ months: code === '54' ? -1 : 6 + Math.floor(r() * 36) });
      return {
        id,
        amount: Math.round(800 + 6000 * r() ** 2) / 100,
        currency: 'USD',
        timestamp: new Date(failedAt).toISOString(),
        auth_code: code,
        ...(mac ? { network_advice_code: mac } : {}),
        subscription: { id: `sub-${id}`, starts: new Date(failedAt - Math.floor(30 + r() * 600) * DAY).toISOString() },
        account: { id: `acc-${id}` },
        payment_method: {
          billing_address: { country, postal_code: postal },
          credit_card: { account: pan, expiration_date: exp.toFormat('yyyyMM') },
        },
      };
    });
  },

  charge(tx, at, n) {
    const h = hidden.get(tx.id)!;
    const u = draw(tx.id, n, 'approve');
    const mastercard = tx.payment_method!.credit_card!.account!.startsWith('5');
    const declined = (code = tx.auth_code) => {
      // Mastercard issuers advise a delay on a fifth of soft declines.
      const v = draw(tx.id, n, 'mac');
      return mastercard && v < 0.2
        ? { approved: false, auth_code: code, network_advice_code: v < 0.1 ? '25' : '26' }
        : { approved: false, auth_code: code };
    };
    const days = (at - Date.parse(tx.timestamp)) / DAY;
    if (days > h.giveUpDays) return { approved: false, auth_code: '05' };
    const fatigue = 0.93 ** (n - 1);
    const local = DateTime.fromMillis(at, { zone: h.zone });
    const awake = local.hour >= 6 && local.hour < 22 ? 1 : 0.6;
    switch (tx.auth_code) {
      case '51':
      case '61':
      case '65': {
        const funded = localDays(at, h.zone, h.staysDays).some(
          (d, k) => isPayday(h, d) && (k > 0 || local.hour >= h.depositHour),
        );
        return u < (funded ? 0.75 : 0.03) * fatigue * awake ? { approved: true, auth_code: '00' } : declined();
      }
      case '05':
        // Generic declines: issuer risk rules that relax after a few days.
        return u < (days < 2 ? 0.04 : 0.14) * fatigue * awake ? { approved: true, auth_code: '00' } : declined();
      case '91':
      case '96':
        return u < (days < 0.25 ? 0.1 : 0.55) ? { approved: true, auth_code: '00' } : declined('05');
      default:
        // Never recover: expired (no updater here), restricted, invalid amount, lost, closed.
        return { approved: false, auth_code: tx.auth_code };
    }
  },
};

export default world;
