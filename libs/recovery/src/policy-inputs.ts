import {
  ExperimentsRepository,
  PolicyStatsRepository,
  type AccountHistory,
  type PolicyTransactionRow,
  type SlotCountRow,
} from '@retain/db';
import {
  LEGACY_POLICY_VERSION,
  declineClassOf,
  originalDeclineAt,
  overridesWithinLimits,
  recoveryWindowEnd,
  slotKeyFor,
  timeZoneFor,
  type ExperimentVariant,
  type PlanInput,
  type PlanExplanation,
  type SlotStat,
} from '@retain/domain';
import type { DataSource, EntityManager } from 'typeorm';
import { updaterReaches } from './payment-methods';

type Sql = Pick<EntityManager, 'query'> | Pick<DataSource, 'query'>;

/** A transaction planned by the adaptive policy (any version but the UTC heuristics of before). */
const adaptive = (row: Pick<PolicyTransactionRow, 'policy_version'>): boolean =>
  !!row.policy_version && row.policy_version !== LEGACY_POLICY_VERSION;

const cardholderOf = (row: PolicyTransactionRow) => ({ country: row.country, postalCode: row.postal_code });

/** The original decline's time for the rules, as the review reads it (never after the submission). */
const declinedAtOf = (row: PolicyTransactionRow): Date => originalDeclineAt(row.failed_at, row.submitted_ts);

/**
 * What the retry policy needs beyond the attempt history, read from the transaction's own rows: its
 * recorded policy version (a RETRY_POLICY change never alters it), the original decline, the
 * cardholder's billing address (local time), the card, the account's earlier charges at this
 * merchant (its pay calendar) and outcomes, and the learned slot counts (this merchant's and all
 * merchants'). Transactions of the UTC heuristics get nothing but their experiment arm's tunables:
 * they plan as before. A transaction in a policy experiment also gets its arm's tunables and
 * learner setting (the experiment's variants never change once created).
 */
export async function policyInputsFor(
  m: Sql,
  merchantId: string,
  transactionId: string,
  updaterOn: boolean,
  shared?: SharedPolicyReads,
): Promise<Partial<PlanInput>> {
  // The grouped read (policyInputsForMany) of one transaction: one piece of code for both paths.
  const rows = await policyRowsFor(m, [{ merchantId, transactionId }]);
  return (await policyInputsForMany(m, rows, [transactionId], updaterOn, shared)).get(transactionId) ?? {};
}

/**
 * What the plans of many transactions read alike, read once for all of them: the slot counts by
 * merchant and decline class (filled as classes come up), and the account histories by transaction
 * (sharedPolicyReads). For a caller that plans one transaction after another in one database
 * transaction, and writes neither in between: the review (it decides no attempt and counts no slot).
 */
export interface SharedPolicyReads {
  slots: Map<string, SlotCountRow[]>;
  histories: Map<string, AccountHistory>;
}

/** The shared reads of these transactions' plans: their account histories (one statement); slots as they come. */
export async function sharedPolicyReads(
  m: Sql,
  refs: readonly { merchantId: string; transactionId: string }[],
): Promise<SharedPolicyReads> {
  const rows = [...(await policyRowsFor(m, refs)).values()].filter(adaptive);
  return { slots: new Map(), histories: await accountHistoriesOf(m, rows) };
}

/** The account histories the adaptive plans of these rows read (none without an account), by transaction: one statement. */
async function accountHistoriesOf(m: Sql, rows: readonly PolicyTransactionRow[]): Promise<Map<string, AccountHistory>> {
  const withAccount = rows.filter((r) => r.account_id);
  const histories = await PolicyStatsRepository.accountHistories(
    m,
    withAccount.map((r) => ({ merchantId: r.merchant_id, accountId: r.account_id!, exceptTransactionId: r.id })),
  );
  return new Map(withAccount.map((r, i) => [r.id, histories[i]!]));
}

/** A transaction's experiment arm (null: none) and the tunables it overrides (undefined: none). */
async function experimentArm(
  m: Sql,
  merchantId: string,
  experimentId: string | null,
  armName: string | null,
): Promise<{ variant: ExperimentVariant | null; config: ExperimentVariant['config'] | undefined }> {
  const variant =
    experimentId && armName ? await ExperimentsRepository.armOf(m, merchantId, experimentId, armName) : null;
  const config = variant ? overridesWithinLimits(variant.config) : {};
  return { variant, config: Object.keys(config).length > 0 ? config : undefined };
}

/**
 * The end of a transaction's recovery window under its own policy version and experiment arm: no
 * attempt is ever made after it (README, the retry policy). It depends only on the submission time,
 * the version and the arm's settings (what policyInputsFor would give recoveryWindowEnd), so it reads
 * nothing but the arm: a late attempt of a backlog checks it without the slot counts and account
 * history a plan reads.
 */
export async function transactionWindowEnd(
  m: Sql,
  txn: {
    merchantId: string;
    submittedTs: Date;
    policyVersion: string | null;
    experimentId: string | null;
    experimentArm: string | null;
  },
  timeScale: number,
): Promise<Date> {
  const { variant, config } = await experimentArm(m, txn.merchantId, txn.experimentId, txn.experimentArm);
  const policy = adaptive({ policy_version: txn.policyVersion })
    ? { version: txn.policyVersion!, learning: variant?.learning ?? true }
    : undefined;
  return recoveryWindowEnd({ config, policy, startedAt: txn.submittedTs, timeScale });
}

function adaptiveInputs(
  row: PolicyTransactionRow,
  variant: ExperimentVariant | null,
  config: Partial<PlanInput>,
  slots: readonly SlotCountRow[],
  history: AccountHistory,
  renewable: boolean,
): Partial<PlanInput> {
  const merchantId = row.merchant_id;
  const learned: SlotStat[] = slots.map((s) => ({
    scope: s.scope === merchantId ? 'merchant' : 'global',
    declineClass: s.decline_class,
    country: null,
    binPrefix: null,
    dayAfterFailure: s.day_after_failure,
    localHour: s.local_hour,
    attempts: s.attempts,
    approvals: s.approvals,
  }));
  return {
    ...config,
    policy: { version: row.policy_version!, learning: variant?.learning ?? true },
    originalResponseCode: row.auth_code,
    ...(row.on_original_card === false ? { originalOnAnotherCard: true } : {}),
    originalDeclinedAt: declinedAtOf(row),
    originalAdviceCode: row.network_advice_code,
    cardholder: cardholderOf(row),
    card: { bin: row.card_bin, expiry: row.expiration_date, renewable },
    paidBefore: history.paidAt,
    accountOutcomes: { approvals: history.approvals, declines: history.declines },
    learned,
  };
}

/**
 * What a batch of attempts records about many transactions at once (the retry worker's grouped
 * record): their policy rows, read once and shared by the counts and the policy inputs.
 */
export function policyRowsFor(
  m: Sql,
  refs: readonly { merchantId: string; transactionId: string }[],
): Promise<Map<string, PolicyTransactionRow>> {
  return PolicyStatsRepository.transactions(m, refs);
}

/** The slot of a decided attempt (null: not counted, the transaction is not on the adaptive policy). */
export function outcomeSlotOf(
  row: PolicyTransactionRow | undefined,
  attemptAt: Date,
): { declineClass: string; dayAfterFailure: number; localHour: number } | null {
  if (!row || !adaptive(row)) return null;
  const { timeZone } = timeZoneFor({ cardholder: cardholderOf(row) });
  return slotKeyFor({
    declineClass: declineClassOf(row.card_network, row.auth_code, null, declinedAtOf(row)),
    country: null,
    binPrefix: null,
    failedAt: declinedAtOf(row),
    at: attemptAt,
    timeZone,
  });
}

/** countAttemptOutcome of many attempts, from their rows (policyRowsFor): one statement. */
export async function countAttemptOutcomes(
  m: Sql,
  rows: ReadonlyMap<string, PolicyTransactionRow>,
  items: readonly { merchantId: string; transactionId: string; attemptAt: Date; approved: boolean }[],
): Promise<void> {
  const counted = items.flatMap((i) => {
    const slot = outcomeSlotOf(rows.get(i.transactionId), i.attemptAt);
    return slot ? [{ merchantId: i.merchantId, slot, approved: i.approved }] : [];
  });
  await PolicyStatsRepository.countMany(m, counted);
}

/**
 * policyInputsFor of many transactions, from their rows (policyRowsFor), with the statements
 * shared: the slot counts once per merchant and decline class, the account histories in one
 * statement. The same inputs as policyInputsFor, by transaction id (a transaction without a row
 * gets `{}`). `updaterOn`: an account updater answers (decisions §15: for every merchant, whether
 * or not it registered a key), so the expiry of a card it reaches (a stored card number, a token the
 * processor de-tokenized: updaterReaches) ends nothing: it is renewed first.
 */
export async function policyInputsForMany(
  m: Sql,
  rows: ReadonlyMap<string, PolicyTransactionRow>,
  transactionIds: readonly string[],
  updaterOn: boolean,
  shared?: SharedPolicyReads,
): Promise<Map<string, Partial<PlanInput>>> {
  const result = new Map<string, Partial<PlanInput>>();
  const adaptiveRows: { row: PolicyTransactionRow; variant: ExperimentVariant | null; config: Partial<PlanInput> }[] =
    [];
  for (const id of new Set(transactionIds)) {
    const row = rows.get(id);
    if (!row) {
      result.set(id, {});
      continue;
    }
    const arm = await experimentArm(m, row.merchant_id, row.experiment_id, row.experiment_arm);
    const { variant } = arm;
    const config = arm.config ? { config: arm.config } : {};
    if (adaptive(row)) adaptiveRows.push({ row, variant, config });
    else result.set(id, config);
  }
  if (adaptiveRows.length === 0) return result;
  const classOf = (row: PolicyTransactionRow) =>
    declineClassOf(row.card_network, row.auth_code, null, declinedAtOf(row));
  const slotKeys = new Map(adaptiveRows.map(({ row }) => [`${row.merchant_id}|${classOf(row)}`, row]));
  const slots = shared?.slots ?? new Map<string, SlotCountRow[]>();
  for (const [key, row] of slotKeys)
    if (!slots.has(key)) slots.set(key, await PolicyStatsRepository.slots(m, row.merchant_id, classOf(row)));
  const read = await accountHistoriesOf(
    m,
    adaptiveRows.map(({ row }) => row).filter((row) => !shared?.histories.has(row.id)),
  );
  const historyOf = (id: string): AccountHistory | undefined => shared?.histories.get(id) ?? read.get(id);
  for (const { row, variant, config } of adaptiveRows) {
    result.set(
      row.id,
      adaptiveInputs(
        row,
        variant,
        config,
        slots.get(`${row.merchant_id}|${classOf(row)}`) ?? [],
        historyOf(row.id) ?? { paidAt: [], approvals: 0, declines: 0 },
        updaterOn && updaterReaches({ cardKind: row.card_kind, cardLast4: row.card_last4 }),
      ),
    );
  }
  return result;
}

/**
 * Counts a decided attempt (captured or declined) in its slot, for the learner: called once per
 * attempt, in the database transaction that records its outcome (the attempt's state change is the
 * guard, so a redelivered job counts nothing). Only transactions of the adaptive policy are counted.
 */
export async function countAttemptOutcome(
  m: Sql,
  merchantId: string,
  transactionId: string,
  attemptAt: Date,
  approved: boolean,
): Promise<void> {
  const rows = await policyRowsFor(m, [{ merchantId, transactionId }]);
  await countAttemptOutcomes(m, rows, [{ merchantId, transactionId, attemptAt, approved }]);
}

/** The plan's explanation as stored (transactions.next_attempt_plan, then attempts.plan). */
export const storedExplanation = (
  explain: PlanExplanation | undefined,
  policyVersion: string | null | undefined,
): Record<string, unknown> | null =>
  explain ? { ...explain, policy_version: policyVersion ?? LEGACY_POLICY_VERSION } : null;
