import type { Command } from 'commander';
import {
  CLEAR_KEY_ID,
  CardKeysRepository,
  SEALED_KIND_NAMES,
  type ResealCounts,
  type SealedCounts,
  type SealedKindName,
} from '@retain/db';
import type { CliContext } from './main';

const MAX_BATCH = 10_000;

/**
 * `card-keys status` and `card-keys reseal [--batch N]`: what each CARD_DATA_KEY key id still seals,
 * and re-sealing every sealed value (card numbers, cryptograms, webhook secrets, processor configs)
 * under the current (first) key, so that an old key can be dropped (README "Rotating CARD_DATA_KEY").
 * Only counts and key ids are printed, never a value.
 */
export function registerCardKeyCommands(program: Command, ctx: CliContext): void {
  const cardKeys = program.command('card-keys').description('CARD_DATA_KEY rotation: status and re-seal');
  const repo = async (): Promise<CardKeysRepository> => new CardKeysRepository(await ctx.db(), ctx.config.cardKeys);

  cardKeys
    .command('status')
    .description('how many sealed values each key id still seals, per kind')
    .action(async () => {
      ctx.print(await statusView(await repo(), ctx));
    });

  cardKeys
    .command('reseal')
    .description('re-seal every value not under the current (first) key, in batches; safe while the apps run')
    .option('--batch <n>', `rows per statement (1 to ${MAX_BATCH})`, '500')
    .action(async (o: { batch: string }) => {
      const batch = /^\d+$/.test(o.batch) ? Number(o.batch) : NaN;
      if (!(batch >= 1 && batch <= MAX_BATCH)) throw new Error(`--batch must be an integer from 1 to ${MAX_BATCH}`);
      const counts = await (await repo()).reseal({ batch });
      const per = (field: keyof ResealCounts): Record<SealedKindName, number> =>
        Object.fromEntries(SEALED_KIND_NAMES.map((k) => [k, counts[k][field]])) as Record<SealedKindName, number>;
      ctx.print({
        batch,
        resealed: per('resealed'),
        busy: per('busy'),
        unreadable: per('unreadable'),
        ...(await statusView(await repo(), ctx)),
      });
    });
}

/**
 * The status as printed: the current key id, each key id with what it seals (configured ones, and
 * ids found in rows but no longer configured: a renamed key), per kind, the total not under the
 * current key, the old keys that seal nothing (dropping them loses no row), and the card fingerprints
 * still derived from a data key (key id `legacy`).
 */
async function statusView(repo: CardKeysRepository, ctx: CliContext): Promise<Record<string, unknown>> {
  const sealed: SealedCounts = await repo.status();
  const configured = ctx.config.cardKeys.map((k) => k.id);
  const current = configured[0]!;
  const byKey = new Map<string, number>(configured.map((id) => [id, 0]));
  for (const kind of SEALED_KIND_NAMES)
    for (const [id, n] of Object.entries(sealed[kind])) byKey.set(id, (byKey.get(id) ?? 0) + n);
  return {
    current_key_id: current,
    keys: [...byKey].map(([id, n]) => ({
      key_id: id,
      ...(id === CLEAR_KEY_ID ? {} : { configured: configured.includes(id), current: id === current }),
      sealed: n,
    })),
    sealed,
    not_current: [...byKey].reduce((sum, [id, n]) => sum + (id === current ? 0 : n), 0),
    droppable_key_ids: configured.filter((id) => id !== current && byKey.get(id) === 0),
    legacy_fingerprints: await repo.legacyFingerprints(),
  };
}
