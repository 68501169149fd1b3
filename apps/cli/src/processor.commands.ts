import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { MerchantsRepository, ProcessorAccountsRepository } from '@retain/db';
import { accountView, parseAccountConfig } from '@retain/processor';
import type { CliContext } from './main';

/**
 * `processor set|list|remove` (decisions §13): a merchant's processor accounts, per division.
 * What is printed never contains a secret (API keys stay sealed in the database).
 */
export function registerProcessorCommands(program: Command, ctx: CliContext): void {
  const processor = program.command('processor').description("merchants' payment processor accounts");
  const merchantId = async (login: string): Promise<string> => {
    const m = await new MerchantsRepository(await ctx.db(), ctx.config.cardKeys).findByLogin(login);
    if (!m) throw new Error(`no merchant with login "${login}"`);
    return m.id;
  };
  const accounts = async (): Promise<ProcessorAccountsRepository> =>
    new ProcessorAccountsRepository(await ctx.db(), ctx.config.cardKeys);

  processor
    .command('set')
    .requiredOption('--login <login>')
    .requiredOption('--processor <name>', 'sandbox, stripe or adyen')
    .option('--division <division_number>', "the division's account (default: the merchant's default account)")
    .requiredOption('--config-file <file.json>', 'the account config (keys, endpoints, raw_card_data, mit_exemption)')
    .action(async (o: { login: string; processor: string; division?: string; configFile: string }) => {
      let raw: unknown;
      try {
        raw = JSON.parse(readFileSync(o.configFile, 'utf8'));
      } catch (e) {
        // The parser's message may quote the file's content: keep only what is safe.
        throw new Error(`cannot read the config file as JSON (${(e as NodeJS.ErrnoException).code ?? 'invalid JSON'})`);
      }
      const parsed = parseAccountConfig(o.processor, raw);
      const id = await merchantId(o.login);
      const stored = await (
        await accounts()
      ).set(id, o.division ?? '', parsed.processor, parsed.config as Record<string, unknown>);
      ctx.print({
        login: o.login,
        ...accountView({ ...parsed, divisionNumber: stored.divisionNumber, updatedAt: stored.updatedAt }),
      });
    });

  processor
    .command('list')
    .requiredOption('--login <login>')
    .action(async (o: { login: string }) => {
      const list = await (await accounts()).list(await merchantId(o.login));
      ctx.print({
        login: o.login,
        accounts: list.map((a) =>
          accountView({
            ...parseAccountConfig(a.processor, a.config),
            divisionNumber: a.divisionNumber,
            updatedAt: a.updatedAt,
          }),
        ),
      });
    });

  processor
    .command('remove')
    .requiredOption('--login <login>')
    .option('--division <division_number>')
    .action(async (o: { login: string; division?: string }) => {
      const removed = await (await accounts()).remove(await merchantId(o.login), o.division ?? '');
      if (!removed)
        throw new Error(
          `no ${o.division ? `account for division "${o.division}"` : 'default account'} for "${o.login}"`,
        );
      ctx.print({ login: o.login, division_number: o.division ?? null, removed: true });
    });
}
