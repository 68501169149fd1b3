// A world the policy was not developed on (issue 11): Asia-Pacific cardholders, many living on gig
// and platform income paid out in the evening, monthly salaries on the 25th (Japan) or the last
// business day (India, Singapore), fortnightly Thursday pay (Australia, New Zealand), the 15th and
// 30th (Philippines). Issuers approve best in the local evening (18-23 h), worst overnight. More
// technical declines (which clear within hours) and more codes that never recover.
import { DateTime } from 'luxon';
import type { RecoveryWorld, SubmittedTransaction } from '../world';
import { DAY, HOUR, draw, lastBusinessDay, localDays, luhnCard, pick, rng } from './_kit';

type Calendar = 'au-fortnight' | 'jp-25th' | 'in-last' | 'ph-15-30' | 'gig';

const PLACES: readonly (readonly [[string, string, string, readonly (readonly [Calendar, number])[]], number])[] = [
  [
    [
      'AU',
      '2000',
      'Australia/Sydney',
      [
        ['au-fortnight', 3],
        ['gig', 1],
      ],
    ],
    0.18,
  ],
  [
    [
      'AU',
      '6000',
      'Australia/Perth',
      [
        ['au-fortnight', 3],
        ['gig', 1],
      ],
    ],
    0.06,
  ],
  [
    [
      'NZ',
      '1010',
      'Pacific/Auckland',
      [
        ['au-fortnight', 3],
        ['gig', 1],
      ],
    ],
    0.06,
  ],
  [
    [
      'JP',
      '100-0001',
      'Asia/Tokyo',
      [
        ['jp-25th', 4],
        ['gig', 1],
      ],
    ],
    0.16,
  ],
  [
    [
      'IN',
      '400001',
      'Asia/Kolkata',
      [
        ['in-last', 2],
        ['gig', 2],
      ],
    ],
    0.2,
  ],
  [
    [
      'SG',
      '018956',
      'Asia/Singapore',
      [
        ['in-last', 3],
        ['gig', 1],
      ],
    ],
    0.08,
  ],
  [
    [
      'PH',
      '1000',
      'Asia/Manila',
      [
        ['ph-15-30', 2],
        ['gig', 2],
      ],
    ],
    0.14,
  ],
  [
    [
      'ID',
      '10110',
      'Asia/Jakarta',
      [
        ['in-last', 1],
        ['gig', 2],
      ],
    ],
    0.12,
  ],
];

const CODES: readonly (readonly [string, number])[] = [
  ['51', 0.38],
  ['05', 0.24],
  ['91', 0.07],
  ['96', 0.04],
  ['61', 0.04],
  ['54', 0.05],
  ['62', 0.04],
  ['13', 0.03],
  ['57', 0.04],
  ['14', 0.03],
  ['59', 0.04],
];

interface Hidden {
  zone: string;
  calendar: Calendar;
  phase: number;
  /** Gig workers are paid out on some evenings: the chance of a payout on a given day. */
  gigRate: number;
  staysDays: number;
  giveUpDays: number;
}

function paidOn(h: Hidden, d: DateTime, id: string): boolean {
  switch (h.calendar) {
    case 'au-fortnight':
      return d.weekday === 4 && Math.floor(d.toMillis() / DAY / 7) % 2 === h.phase;
    case 'jp-25th': {
      // The 25th, or the business day before it.
      let pay = d.set({ day: 25 });
      while (pay.weekday > 5) pay = pay.minus({ days: 1 });
      return d.day === pay.day;
    }
    case 'in-last':
      return d.day === lastBusinessDay(d);
    case 'ph-15-30':
      return d.day === 15 || d.day === Math.min(30, d.daysInMonth!);
    case 'gig':
      return draw(id, d.toISODate()!, 'payout') < h.gigRate;
  }
}

const hidden = new Map<string, Hidden>();

const world: RecoveryWorld = {
  transactions(count: number, seed: number): SubmittedTransaction[] {
    const r = rng(seed ^ 0x7a9c);
    const start = Date.parse('2026-01-05T00:00:00Z');
    return Array.from({ length: count }, (_, i) => {
      const [country, postal, zone, calendars] = pick(r(), PLACES);
      const id = `apg-${seed}-${i}`;
      const calendar = pick(r(), calendars);
      hidden.set(id, {
        zone,
        calendar,
        phase: Math.floor(r() * 2),
        gigRate: 0.15 + r() * 0.3,
        staysDays: calendar === 'gig' ? 0 : 1 + Math.floor(r() * 3),
        giveUpDays: -Math.log(1 - r()) * 18,
      });
      const mastercard = r() < 0.45;
      const pan = luhnCard(mastercard ? `5${1 + Math.floor(r() * 5)}` : '4', r);
      const code = pick(r(), CODES);
      // A merchant billing from Europe: runs at 08:00-12:00 UTC, afternoon to night in APAC.
      const failedAt = start + Math.floor((i / count) * 300) * DAY + Math.floor((8 + r() * 4) * HOUR);
      const exp = DateTime.fromMillis(failedAt).plus({ months: code === '54' ? -2 : 3 + Math.floor(r() * 40) });
      return {
        id,
        amount: Math.round(300 + 3000 * r() ** 1.5) / 100,
        currency: 'USD',
        timestamp: new Date(failedAt).toISOString(),
        auth_code: code,
        subscription: { id: `sub-${id}` },
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
    const days = (at - Date.parse(tx.timestamp)) / DAY;
    if (days > h.giveUpDays) return { approved: false, auth_code: '05' };
    const local = DateTime.fromMillis(at, { zone: h.zone });
    // Evening is when balances are topped up and spent; overnight risk rules are strict.
    const hourFactor = local.hour >= 18 && local.hour < 23 ? 1.2 : local.hour >= 1 && local.hour < 7 ? 0.4 : 0.8;
    const fatigue = 0.92 ** (n - 1);
    switch (tx.auth_code) {
      case '51':
      case '61': {
        const funded = localDays(at, h.zone, h.staysDays).some((d, k) => {
          if (!paidOn(h, d, tx.id)) return false;
          // Salaries land at 09:00 local, gig payouts at 18:00.
          return k > 0 || local.hour >= (h.calendar === 'gig' ? 18 : 9);
        });
        return u < (funded ? 0.65 : 0.02) * hourFactor * fatigue
          ? { approved: true, auth_code: '00' }
          : { approved: false, auth_code: tx.auth_code };
      }
      case '05':
      case '59':
        return u < 0.1 * hourFactor * fatigue
          ? { approved: true, auth_code: '00' }
          : { approved: false, auth_code: '05' };
      case '91':
      case '96':
        return u < (days < 0.5 ? 0.15 : 0.6)
          ? { approved: true, auth_code: '00' }
          : { approved: false, auth_code: '91' };
      default:
        return { approved: false, auth_code: tx.auth_code };
    }
  },
};

export default world;
