// bench/recovery/payment-methods: what a customer's backup card and the account updater add
// (decisions §15), on the REAL retry policy (libs/domain) and the REAL sandbox recovery model, on a
// simulated clock: recovered transactions and amount with and without them.
//
// The world (assumptions, printed with the results): 35% of customers have a second payment method
// on file; a backup card is healthy with probability 0.6, else it is in a trouble drawn from the
// same decline mix as the failed charges; the account updater has new data for 50% of the cards
// with a data-quality decline (Visa/Mastercard updater coverage), and an updated card behaves like
// a healthy one. Every attempt obeys the network limits of the card it is on (per card).
//
// The policy is the service's default (adaptive-2026-11, its prior: no learning here), fed with the
// submitted fields. With --world (bench/recovery/world.ts; `all`: every world of bench/recovery/worlds),
// the submitted card's answers come from the world; backup cards and updated cards follow the
// sandbox model as above (a world does not know the customer's other cards).
//
// Run: node bench/run-ts.mjs bench/recovery/payment-methods.bench.ts [count] [seed] [--world <file.ts>|all]
import {
  classifyDecline,
  firstAttemptAt,
  planNextAttempt,
  DEFAULT_RETRY_POLICY,
  POLICY_VERSION,
  type CardAttempt,
  type Plan,
  type PlanInput,
} from '@retain/domain';
import { MemorySandboxLedger, SandboxProcessor, cardNetwork, type ChargeResult } from '@retain/processor';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import type { RecoveryWorld, SubmittedTransaction } from './world';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const argv = process.argv.slice(2);
const worldAt = argv.indexOf('--world');
const WORLD_ARG = worldAt >= 0 ? argv[worldAt + 1] : undefined;
const positional = argv.filter((_, i) => i !== worldAt && i !== worldAt + 1);
const N = Number(positional[0] ?? 10_000);
const SEED = Number(positional[1] ?? 20_261_122);
const WORLD_FILES: (string | null)[] =
  WORLD_ARG === undefined
    ? [null]
    : WORLD_ARG === 'all'
      ? readdirSync(path.join(__dirname, 'worlds'))
          .filter((f) => f.endsWith('.ts') && f !== 'dev-world.ts' && !f.startsWith('_'))
          .sort()
          .map((f) => path.join(__dirname, 'worlds', f))
      : [path.resolve(WORLD_ARG)];
const BACKUP_SHARE = 0.35;
const BACKUP_HEALTHY = 0.6;
const UPDATER_COVERAGE = 0.5;
/** A card with no known trouble: the model's technical group whose outage ended long ago. */
const HEALTHY = '91';

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

// The decline mix of bench/recovery (failed recurring charges after public processor reports).
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

interface Card {
  pan: string;
  /** The trouble the card is in (the model's original decline code). */
  code: string;
  /** Since when (the model measures issuer holds from it). */
  troubleSince: Date;
}

interface Case {
  index: number;
  /** The world's submitted transaction (--world): its card answers through world.charge. */
  tx: SubmittedTransaction | null;
  card: Card;
  backup: Card | null;
  /** The updater has new data for this card if asked. */
  updaterKnows: boolean;
  amountMinor: bigint;
  failedAt: Date;
}

function luhnDigit(body: string): string {
  let sum = 0;
  for (let i = 0; i < body.length; i++) {
    let d = Number(body[body.length - 1 - i]);
    if (i % 2 === 0) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
  }
  return String((10 - (sum % 10)) % 10);
}

function makeCases(): Case[] {
  const rnd = prng(SEED);
  const start = Date.parse('2026-01-01T00:00:00Z');
  const pan = (): string => {
    let body = rnd() < 0.6 ? '4' : `5${1 + Math.floor(rnd() * 5)}`;
    while (body.length < 15) body += Math.floor(rnd() * 10);
    return body + luhnDigit(body);
  };
  const code = (): string => {
    let acc = 0;
    const r = rnd();
    return DECLINE_MIX.find(([, p]) => (acc += p) > r)?.[0] ?? '05';
  };
  return Array.from({ length: N }, (_, index) => {
    const day = Math.floor(rnd() * 300);
    const hour = rnd() < 0.6 ? rnd() * 6 : rnd() * 24;
    const failedAt = new Date(start + day * DAY + Math.floor(hour * HOUR));
    const card = { pan: pan(), code: code(), troubleSince: failedAt };
    const hasBackup = rnd() < BACKUP_SHARE;
    const backupCode = rnd() < BACKUP_HEALTHY ? HEALTHY : code();
    const backup = hasBackup
      ? {
          pan: pan(),
          code: backupCode,
          troubleSince: new Date(failedAt.getTime() - (backupCode === HEALTHY ? 30 * DAY : 0)),
        }
      : null;
    return {
      index,
      tx: null,
      card,
      backup,
      updaterKnows: rnd() < UPDATER_COVERAGE,
      amountMinor: BigInt(Math.round(500 * Math.pow(40, rnd()))),
      failedAt,
    };
  });
}

/** Cases of a world: its transactions, with backup cards and updater coverage drawn as above. */
function worldCases(world: RecoveryWorld): Case[] {
  const base = makeCases();
  return world.transactions(N, SEED).map((tx, i) => {
    const pan = (tx.payment_method?.credit_card?.account ?? '').replace(/\D/g, '');
    const failedAt = new Date(tx.timestamp);
    const drawn = base[i]!;
    return {
      ...drawn,
      tx,
      card: { pan, code: tx.auth_code, troubleSince: failedAt },
      backup: drawn.backup ? { ...drawn.backup, troubleSince: new Date(failedAt.getTime() - 30 * DAY) } : null,
      amountMinor: BigInt(Math.round(Number(tx.amount) * 100)),
      failedAt,
    };
  });
}

/** The submitted fields the policy reads (cardholder zone, card, original advice code). */
function signals(c: Case): Partial<PlanInput> {
  const tx = c.tx;
  return {
    policy: { version: POLICY_VERSION, learning: false },
    originalResponseCode: c.card.code,
    originalAdviceCode: tx?.network_advice_code ?? null,
    cardholder: {
      country: tx?.payment_method?.billing_address?.country ?? null,
      postalCode: tx?.payment_method?.billing_address?.postal_code ?? null,
    },
    card: { bin: c.card.pan.slice(0, 8), expiry: tx?.payment_method?.credit_card?.expiration_date ?? null },
  };
}

interface Options {
  backup: boolean;
  updater: boolean;
}

const isDataDecline = (pan: string, code: string, mac?: string | null): boolean =>
  classifyDecline({ network: cardNetwork(pan), responseCode: code, merchantAdviceCode: mac }).cardBlock ===
  'new-card-data';

/**
 * One transaction: attempts on its card while the policy allows; when the card can no longer be
 * retried (the plan stops before the transaction's budget and window are used up), the updater's
 * new data for it, else the backup card, each first tried like a cleared outage (as the worker does).
 */
async function recover(
  c: Case,
  o: Options,
  processor: SandboxProcessor,
  world: RecoveryWorld | null,
): Promise<{ won: boolean; attempts: number }> {
  const windowEnd = c.failedAt.getTime() + DEFAULT_RETRY_POLICY.windowDays * DAY;
  let card = c.card;
  let history: CardAttempt[] = [];
  let usedBackup = false;
  let updated = false;
  let attempts = 0;
  let lastCode = c.card.code;
  let lastMac: string | null = null;
  const now0 = new Date(c.failedAt.getTime() + 10 * 60_000);
  let plan: Plan = firstAttemptAt({
    ...signals(c),
    startedAt: c.failedAt,
    firstFailedAt: c.failedAt,
    now: now0,
    lastDecline: { responseCode: c.card.code },
    network: cardNetwork(card.pan),
    amountMinor: c.amountMinor,
    cardHistory: [],
  });
  let now = now0;
  for (;;) {
    if (plan.kind === 'stop') {
      if (attempts >= DEFAULT_RETRY_POLICY.maxAttempts || now.getTime() > windowEnd) break;
      let next: Card | null = null;
      if (o.updater && !updated && card === c.card && c.updaterKnows && isDataDecline(card.pan, lastCode, lastMac)) {
        updated = true;
        next = { pan: card.pan, code: HEALTHY, troubleSince: new Date(now.getTime() - 30 * DAY) };
      } else if (o.backup && !usedBackup && c.backup) {
        usedBackup = true;
        next = c.backup;
      }
      if (!next) break;
      card = next;
      history = [];
      plan = planNextAttempt({
        ...signals(c),
        card: { bin: card.pan.slice(0, 8), expiry: null },
        originalResponseCode: null,
        attemptsMade: attempts,
        startedAt: c.failedAt,
        firstFailedAt: c.failedAt,
        now,
        lastDecline: { technical: true },
        network: cardNetwork(card.pan),
        amountMinor: c.amountMinor,
        cardHistory: [],
      });
      continue;
    }
    attempts++;
    now = plan.at;
    const fromWorld = world && c.tx && card === c.card ? world.charge(c.tx, now.getTime(), history.length + 1) : null;
    const result: ChargeResult = fromWorld
      ? fromWorld.approved
        ? { outcome: 'approved', responseCode: '00', processorTransactionId: '', message: '' }
        : {
            outcome: 'declined',
            responseCode: fromWorld.auth_code,
            merchantAdviceCode: fromWorld.network_advice_code ?? null,
            network: cardNetwork(card.pan),
            processorTransactionId: '',
            message: '',
          }
      : await processor.charge({
          idempotencyKey: `${o.backup ? 'b' : ''}${o.updater ? 'u' : ''}:${c.index}:${attempts}`,
          attemptNumber: history.length + 1,
          amountMinor: c.amountMinor,
          currency: 'USD',
          instrument: { kind: 'pan', pan: card.pan },
          originalResponseCode: card.code,
          divisionNumber: 'bench',
          at: now,
          originalFailedAt: card.troubleSince,
        });
    if (result.outcome === 'approved') return { won: true, attempts };
    const declined = result.outcome === 'declined';
    lastCode = declined ? result.responseCode : '96';
    lastMac = declined ? (result.merchantAdviceCode ?? null) : null;
    history.push({
      at: now,
      amountMinor: c.amountMinor,
      outcome: result.outcome,
      responseCode: declined ? result.responseCode : null,
      merchantAdviceCode: lastMac,
    });
    plan = planNextAttempt({
      ...signals(c),
      ...(card === c.card ? {} : { card: { bin: card.pan.slice(0, 8), expiry: null }, originalResponseCode: null }),
      attemptsMade: attempts,
      startedAt: c.failedAt,
      firstFailedAt: c.failedAt,
      now,
      lastDecline: declined ? { responseCode: lastCode, merchantAdviceCode: lastMac } : { technical: true },
      network: cardNetwork(card.pan),
      amountMinor: c.amountMinor,
      cardHistory: history,
    });
  }
  return { won: false, attempts };
}

async function runWorld(file: string | null): Promise<void> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const world: RecoveryWorld | null = file ? require(file).default : null;
  const cases = world ? worldCases(world) : makeCases();
  const started = Date.now();
  const total = cases.reduce((a, c) => a + c.amountMinor, 0n);
  const variants: [string, Options][] = [
    ['submitted card only', { backup: false, updater: false }],
    ['+ backup cards', { backup: true, updater: false }],
    ['+ account updater', { backup: false, updater: true }],
    ['+ both', { backup: true, updater: true }],
  ];
  const rows = [];
  let base = 0n;
  for (const [name, o] of variants) {
    const processor = new SandboxProcessor(new MemorySandboxLedger());
    let won = 0;
    let amount = 0n;
    let attempts = 0;
    for (const c of cases) {
      const r = await recover(c, o, processor, world);
      attempts += r.attempts;
      if (r.won) {
        won++;
        amount += c.amountMinor;
      }
    }
    if (name === 'submitted card only') base = amount;
    rows.push({
      variant: name,
      recovered: won,
      'recovery rate': `${((100 * won) / N).toFixed(1)}%`,
      'recovered amount': `$${(Number(amount) / 100).toFixed(0)}`,
      'of failed amount': `${((100 * Number(amount)) / Number(total)).toFixed(1)}%`,
      'added vs card only': `+$${(Number(amount - base) / 100).toFixed(0)}`,
      attempts,
    });
  }
  console.log(
    `\nbench/recovery/payment-methods: ${N} failed transactions (seed ${SEED}, world ${file ? path.basename(file, '.ts') : 'sandbox model'}), $${(Number(total) / 100).toFixed(0)} failed; ` +
      `world: ${BACKUP_SHARE * 100}% with a backup card (${BACKUP_HEALTHY * 100}% of them healthy), updater coverage ${UPDATER_COVERAGE * 100}%\n`,
  );
  console.table(rows);
  console.log(`(simulated in ${((Date.now() - started) / 1000).toFixed(1)} s)`);
}

async function main(): Promise<void> {
  for (const file of WORLD_FILES) await runWorld(file);
}

void main();
