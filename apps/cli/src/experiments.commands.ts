import type { Command } from 'commander';
import { ExperimentsRepository } from '@retain/db';
import { newExperimentId, parseExperiment } from '@retain/domain';
import { experimentView } from '@retain/recovery';
import type { DataSource } from 'typeorm';
import type { CliContext } from './main';

async function merchantId(db: DataSource, login: string): Promise<string> {
  const id = await ExperimentsRepository.merchantIdByLogin(db, login);
  if (!id) throw new Error(`no merchant with login "${login}"`);
  return id;
}

const collect = (value: string, previous: string[]): string[] => [...previous, value];

/** `--variant name=policy_version[:weight]` as an experiment variant. */
function variantOption(text: string): Record<string, unknown> {
  const m = /^([^=]+)=([^:]+)(?::([0-9.]+))?$/.exec(text);
  if (!m) throw new Error(`--variant "${text}": expected name=policy_version[:weight]`);
  return { name: m[1], policy_version: m[2], ...(m[3] ? { weight: Number(m[3]) } : {}) };
}

/**
 * `experiments start|list|show|stop` (issue 11): the same policy experiments and per-arm results
 * (95% intervals) as GET/POST /v1/retain/experiments, for an operator or a merchant's developer.
 */
export function registerExperimentCommands(program: Command, ctx: CliContext): void {
  const experiments = program.command('experiments').description('retry-policy experiments of a merchant');
  experiments
    .command('start')
    .requiredOption('--login <login>')
    .option('--name <name>', 'what the experiment compares')
    .option('--variant <name=version[:weight]>', 'a variant (repeat for each)', collect, [])
    .option('--holdout <share>', 'share of transactions kept on the default policy (0 to 0.5)', '0')
    .option('--json <body>', 'the whole experiment as the API takes it (variants with learning and config)')
    .action(async (o: { login: string; name?: string; variant: string[]; holdout: string; json?: string }) => {
      let body: unknown;
      if (o.json) {
        try {
          body = JSON.parse(o.json);
        } catch {
          throw new Error('--json is not valid JSON');
        }
      } else body = { name: o.name, holdout_share: Number(o.holdout), variants: o.variant.map(variantOption) };
      const parsed = parseExperiment(body);
      if (!parsed.ok) throw new Error(`${parsed.field}: ${parsed.detail}`);
      const db = await ctx.db();
      const id = await merchantId(db, o.login);
      const row = await ExperimentsRepository.create(db, {
        id: newExperimentId(),
        merchant_id: id,
        name: parsed.name,
        holdout_share: parsed.holdout_share,
        holdout_policy: ctx.config.retryPolicy,
        variants: parsed.variants,
      });
      if (!row)
        throw new Error(`experiment ${(await ExperimentsRepository.running(db, id))?.id} is running: stop it first`);
      ctx.print(experimentView(row, []));
    });
  experiments
    .command('list')
    .description('newest first, with their results: a page of --limit (the next with --starting-after the last id)')
    .requiredOption('--login <login>')
    .option('--limit <n>', 'at most n experiments, 1-100', '10')
    .option('--starting-after <id>', 'the experiments older than this one')
    .action(async (o: { login: string; limit: string; startingAfter?: string }) => {
      const limit = /^\d{1,3}$/.test(o.limit) ? Number(o.limit) : NaN;
      if (!(limit >= 1 && limit <= 100)) throw new Error(`--limit "${o.limit}": expected 1 to 100`);
      const db = await ctx.db();
      const id = await merchantId(db, o.login);
      const out = [];
      const page = await ExperimentsRepository.list(db, id, { limit, startingAfter: o.startingAfter ?? null });
      if (!page) throw new Error(`--starting-after ${o.startingAfter}: no experiment with that id for "${o.login}"`);
      for (const row of page.data) out.push(experimentView(row, await ExperimentsRepository.moments(db, id, row.id)));
      ctx.print(out);
    });
  for (const verb of ['show', 'stop'] as const)
    experiments
      .command(`${verb} <id>`)
      .requiredOption('--login <login>')
      .action(async (experimentId: string, o: { login: string }) => {
        const db = await ctx.db();
        const id = await merchantId(db, o.login);
        const row =
          verb === 'stop'
            ? await ExperimentsRepository.stop(db, id, experimentId)
            : await ExperimentsRepository.get(db, id, experimentId);
        if (!row) throw new Error(`no experiment ${experimentId} for merchant "${o.login}"`);
        ctx.print(experimentView(row, await ExperimentsRepository.moments(db, id, experimentId)));
      });
}
