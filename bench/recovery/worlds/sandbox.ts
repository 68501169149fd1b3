// The sandbox processor's recovery model (libs/processor sandbox-model.ts) as a world: the default
// of bench/recovery. Cardholders with no billing address (the model's calendars run in UTC), 60%
// Visa and 40% Mastercard, a decline mix after public processor reports, most billing runs at night
// UTC. A processor error answers `96` (decisions §16: an error without a response code).
// The policy's prior was tuned on this model: it is a regression check, not an evaluation.
import { cardNetwork, modelOutcome } from '@retain/processor';
import type { RecoveryWorld, SubmittedTransaction } from '../world';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** mulberry32: a small seeded PRNG, so every run simulates the same transactions. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** Original decline codes of failed recurring charges: insufficient funds dominate, then generic. */
const DECLINE_MIX: readonly [string, number][] = [
  ['51', 0.44],
  ['05', 0.2],
  ['54', 0.06],
  ['91', 0.04],
  ['96', 0.01],
  ['61', 0.03],
  ['65', 0.02],
  ['62', 0.01],
  ['01', 0.02],
  ['59', 0.02],
  ['63', 0.01],
  ['14', 0.03],
  ['41', 0.02],
  ['43', 0.01],
  ['57', 0.02],
  ['R1', 0.02],
  ['1A', 0.01],
  ['13', 0.02],
];

function luhnDigit(body: string): string {
  let sum = 0;
  for (let i = 0; i < body.length; i++) {
    let d = Number(body[body.length - 1 - i]);
    if (i % 2 === 0) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
  }
  return String((10 - (sum % 10)) % 10);
}

const world: RecoveryWorld = {
  transactions(count: number, seed: number): SubmittedTransaction[] {
    const rnd = prng(seed);
    const start = Date.parse('2026-01-01T00:00:00Z');
    return Array.from({ length: count }, (_, index) => {
      const prefix = rnd() < 0.6 ? '4' : `5${1 + Math.floor(rnd() * 5)}`;
      let body = prefix;
      while (body.length < 15) body += Math.floor(rnd() * 10);
      const pan = body + luhnDigit(body);
      let acc = 0;
      const r = rnd();
      const code = DECLINE_MIX.find(([, p]) => (acc += p) > r)?.[0] ?? '05';
      // Subscription prices: $5 to $200, more small ones than large ones.
      const amountMinor = Math.round(500 * Math.pow(40, rnd()));
      // Billing runs: most at night (00-06 UTC), the rest at any hour; any day of ten months.
      const day = Math.floor(rnd() * 300);
      const hour = rnd() < 0.6 ? rnd() * 6 : rnd() * 24;
      return {
        id: `bench-${index}`,
        amount: amountMinor / 100,
        currency: 'USD',
        timestamp: new Date(start + day * DAY + Math.floor(hour * HOUR)).toISOString(),
        auth_code: code,
        subscription: { id: `sub-${index}` },
        account: { id: `acc-${index}` },
        payment_method: { credit_card: { account: pan } },
      };
    });
  },
  charge(tx, at, n) {
    const pan = tx.payment_method!.credit_card!.account!;
    const outcome = modelOutcome({
      pan,
      network: cardNetwork(pan),
      originalResponseCode: tx.auth_code,
      amountMinor: BigInt(Math.round(Number(tx.amount) * 100)),
      attemptNumber: n,
      at: new Date(at),
      originalFailedAt: new Date(tx.timestamp),
    });
    if (outcome.kind === 'approve') return { approved: true, auth_code: '00' };
    if (outcome.kind === 'error') return { approved: false, auth_code: '96' };
    return { approved: false, auth_code: outcome.code, ...(outcome.mac ? { network_advice_code: outcome.mac } : {}) };
  },
};

export default world;
