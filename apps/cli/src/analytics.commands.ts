import type { Command } from 'commander';
import { AnalyticsRepository, ExperimentsRepository } from '@retain/db';
import { fromMinorUnits } from '@retain/domain';
import type { CliContext } from './main';

const DAY = /^\d{4}-\d{2}-\d{2}$/;

/**
 * `analytics fees --login <l> [--from <day>] [--to <day>]` (issue 12): the card-network fees avoided
 * against a naive daily schedule, per transaction currency, in USD (as GET /v1/retain/analytics's
 * network_fees_avoided). Days are submission days (UTC); default: the last 30 days.
 */
export function registerAnalyticsCommands(program: Command, ctx: CliContext): void {
  const analytics = program.command('analytics').description('recovery figures of a merchant');
  analytics
    .command('fees')
    .requiredOption('--login <login>')
    .option('--from <day>', 'first submission day (YYYY-MM-DD)')
    .option('--to <day>', 'last submission day (YYYY-MM-DD)')
    .action(async (o: { login: string; from?: string; to?: string }) => {
      const to = o.to ?? new Date().toISOString().slice(0, 10);
      const from = o.from ?? new Date(Date.parse(`${to}T00:00:00Z`) - 29 * 86_400_000).toISOString().slice(0, 10);
      if (!DAY.test(from) || !DAY.test(to)) throw new Error('--from and --to are YYYY-MM-DD days');
      const db = await ctx.db();
      const merchantId = await ExperimentsRepository.merchantIdByLogin(db, o.login);
      if (!merchantId) throw new Error(`no merchant with login "${o.login}"`);
      const rows = await new AnalyticsRepository(db).feesAvoided(merchantId, from, to);
      ctx.print({
        login: o.login,
        from,
        to,
        fees_currency: 'USD',
        naive_schedule: 'daily for 30 days, blind to the network rules',
        currencies: rows.map((r) => ({ currency: r.currency, network_fees_avoided: fromMinorUnits(r.minor, 'USD') })),
      });
    });
}
