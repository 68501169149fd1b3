// A development world of the retry policy's author (issue 11), for `--world`: NOT an independent
// evaluation (the policy was developed against it), kept as an example of the plug-in and as a
// regression check. Cardholders in eight countries (the billing address gives the zone), six pay
// calendars (weekly and biweekly Fridays, semi-monthly, the 1st, the 3rd as for benefits, gig income
// every few days), salaries posted at `depositHour` local time and available for `staysDays` days,
// cardholders who give up after an exponential time (mean 25 days), generic declines that approve
// at random (less at night), codes that never recover.
import { seededRng } from '@retain/domain';
import { DateTime } from 'luxon';
import type { SubmittedFields } from '../learning-policy';

const DAY = 86_400_000;

const PLACES: readonly [country: string, postalCode: string, zone: string, share: number][] = [
  ['US', '10001', 'America/New_York', 0.25],
  ['US', '60601', 'America/Chicago', 0.15],
  ['US', '94105', 'America/Los_Angeles', 0.15],
  ['BR', '01310-100', 'America/Sao_Paulo', 0.1],
  ['GB', 'SW1A 1AA', 'Europe/London', 0.1],
  ['AU', '2000', 'Australia/Sydney', 0.1],
  ['JP', '100-0001', 'Asia/Tokyo', 0.05],
  ['IN', '110001', 'Asia/Kolkata', 0.1],
];
const CODES: readonly [string, number][] = [
  ['51', 0.5],
  ['05', 0.25],
  ['54', 0.05],
  ['91', 0.04],
  ['13', 0.03],
  ['62', 0.03],
  ['59', 0.03],
  ['41', 0.04],
  ['61', 0.03],
];
const CALENDARS: readonly [string, number][] = [
  ['weekly', 0.2],
  ['biweekly', 0.25],
  ['semimonthly', 0.2],
  ['monthly3', 0.15],
  ['monthly1', 0.1],
  ['gig', 0.1],
];

const pick = <T>(r: number, xs: readonly (readonly [T, number])[]): T => {
  let acc = 0;
  for (const [x, p] of xs) if ((acc += p) > r) return x;
  return xs[0]![0];
};

interface Hidden {
  zone: string;
  calendar: string;
  phase: number;
  giveUpDays: number;
}

function isPayday(h: Hidden, d: DateTime): boolean {
  switch (h.calendar) {
    case 'weekly':
      return d.weekday === 5;
    case 'biweekly':
      return d.weekday === 5 && Math.floor(d.toMillis() / DAY / 7) % 2 === h.phase;
    case 'semimonthly':
      return d.day === 15 || d.day === d.daysInMonth;
    case 'monthly3':
      return d.day === 3;
    case 'monthly1':
      return d.day === 1;
    default:
      return (d.day * 7 + d.month * 3 + h.phase) % 4 === 0;
  }
}

export function devWorld(depositHour: number, staysDays: number) {
  const hidden = new Map<string, Hidden>();
  return {
    transactions(count: number, seed: number): SubmittedFields[] {
      const r = seededRng(seed);
      const start = Date.parse('2026-01-01T00:00:00Z');
      return Array.from({ length: count }, (_, i) => {
        const [country, postalCode, zone] = pick(
          r(),
          PLACES.map(([c, p, z, share]) => [[c, p, z] as const, share] as const),
        );
        const id = `dev-${seed}-${i}`;
        hidden.set(id, {
          zone,
          calendar: pick(r(), CALENDARS),
          phase: Math.floor(r() * 2),
          giveUpDays: -Math.log(1 - r()) * 25,
        });
        const visa = r() < 0.6;
        let pan = visa ? '4' : '51';
        while (pan.length < 16) pan += Math.floor(r() * 10);
        const code = pick(r(), CODES);
        const failedAt = start + Math.floor((i / count) * 300 * DAY) + Math.floor(r() * DAY);
        return {
          id,
          amount: Math.round(5 + 100 * r() ** 2),
          timestamp: new Date(failedAt).toISOString(),
          auth_code: code,
          network_advice_code: !visa && code === '51' && r() < 0.2 ? '25' : undefined,
          subscription: { id: `sub-${id}` },
          account: { id: `acc-${id}` },
          payment_method: {
            billing_address: { country, postal_code: postalCode },
            credit_card: { account: pan, expiration_date: '202912' },
          },
        };
      });
    },
    charge(tx: SubmittedFields, at: number, n: number): { approved: boolean; auth_code: string } {
      const h = hidden.get(tx.id)!;
      const declined = { approved: false, auth_code: tx.auth_code };
      if ((at - Date.parse(tx.timestamp)) / DAY > h.giveUpDays) return { approved: false, auth_code: '05' };
      const local = DateTime.fromMillis(at, { zone: h.zone });
      const r = Math.abs(Math.sin(at * 1e-5 + n * 7.3 + tx.id.length));
      const night = local.hour < 6 || local.hour >= 23 ? 0.4 : 1;
      switch (tx.auth_code) {
        case '51':
        case '61': {
          for (let k = 0; k <= staysDays; k++) {
            const d = local.minus({ days: k }).startOf('day');
            if (isPayday(h, d) && (k > 0 || local.hour >= depositHour))
              return r < 0.8 * night ? { approved: true, auth_code: '00' } : declined;
          }
          return r < 0.02 ? { approved: true, auth_code: '00' } : declined;
        }
        case '05':
        case '91':
        case '59':
          return r < (tx.auth_code === '91' ? 0.5 : 0.12) * night ? { approved: true, auth_code: '00' } : declined;
        default:
          return declined;
      }
    },
  };
}
