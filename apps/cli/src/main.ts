import 'reflect-metadata';
import { Command, CommanderError } from 'commander';
import { ConfigError, loadConfig } from '@retain/config';
import { MerchantsRepository, createDataSource } from '@retain/db';
import { loginProblem, parseWebhookUrl, webhookUrlProblem } from '@retain/domain';
import type { DataSource } from 'typeorm';
import { registerExtraCommands } from './commands';
import { registerUpdaterKeyCommands } from './updater-key.commands';

/**
 * The operator CLI (decisions §11): `npm run retain -- <command>`. Every command prints one JSON
 * object on stdout; errors print `{"error": "..."}` on stderr and exit non-zero.
 */
const print = (value: unknown): void => {
  process.stdout.write(JSON.stringify(value, null, 2) + '\n');
};

export interface CliContext {
  db: () => Promise<DataSource>;
  print: (value: unknown) => void;
  config: ReturnType<typeof loadConfig>;
}

async function main(argv: string[]): Promise<void> {
  const config = loadConfig('cli');
  let ds: DataSource | undefined;
  const db = async (): Promise<DataSource> => {
    if (!ds) {
      ds = createDataSource(config.databaseUrl, 2);
      await ds.initialize();
    }
    return ds;
  };
  const merchants = async (): Promise<MerchantsRepository> => new MerchantsRepository(await db(), config.cardKeys);

  const program = new Command('retain').description('Retain operator CLI').exitOverride();
  const merchant = program.command('merchant').description('manage merchants and their credentials');
  merchant
    .command('create')
    .requiredOption('--login <login>', 'merchant login (author_id of pushes)')
    .option('--webhook-url <url>', 'where push notifications are sent')
    .action(async (o: { login: string; webhookUrl?: string }) => {
      const problem = loginProblem(o.login);
      if (problem) throw new Error(problem);
      const url = o.webhookUrl === undefined ? null : webhookUrl(o.webhookUrl);
      print(await (await merchants()).create(o.login, url));
    });
  merchant
    .command('set-webhook')
    .requiredOption('--login <login>')
    .option('--url <url>', 'new webhook URL (omitted: the URL is kept)')
    .option('--webhook-url <url>', 'alias of --url')
    .option('--clear-url', 'remove the webhook URL (pushes then end no_endpoint, undelivered)')
    .option('--rotate-secret', 'also issue a new signing secret (printed once)')
    .action(
      async (o: { login: string; url?: string; webhookUrl?: string; clearUrl?: boolean; rotateSecret?: boolean }) => {
        const url = o.url ?? o.webhookUrl;
        if (url !== undefined && o.clearUrl) throw new Error('give --url or --clear-url, not both');
        if (url === undefined && !o.clearUrl && !o.rotateSecret)
          throw new Error('give --url <url>, --clear-url or --rotate-secret');
        // No --url and no --clear-url: the URL is kept (a secret rotation alone leaves it in place).
        const change = o.clearUrl ? null : url === undefined ? undefined : webhookUrl(url);
        print(await (await merchants()).setWebhook(o.login, change, o.rotateSecret === true));
      },
    );
  merchant
    .command('rotate-key')
    .requiredOption('--login <login>')
    .option('--keep-old', 'leave the current keys valid (revoke them later with another rotate-key)')
    .action(async (o: { login: string; keepOld?: boolean }) => {
      print(await (await merchants()).rotateKey(o.login, o.keepOld === true));
    });
  merchant
    .command('disable')
    .requiredOption('--login <login>')
    .action(async (o: { login: string }) => {
      print(await (await merchants()).setDisabled(o.login, true));
    });
  merchant
    .command('enable')
    .requiredOption('--login <login>')
    .action(async (o: { login: string }) => {
      print(await (await merchants()).setDisabled(o.login, false));
    });
  merchant
    .command('set-forced-deposit')
    .requiredOption('--login <login>')
    .option('--on', 'capture without authorization when a recovery would end after soft declines')
    .option('--off', 'never (the default)')
    .action(async (o: { login: string; on?: boolean; off?: boolean }) => {
      if (o.on === o.off) throw new Error('give exactly one of --on and --off');
      print(await (await merchants()).setForcedDeposit(o.login, o.on === true));
    });
  registerUpdaterKeyCommands(merchant, { db, print, config });
  registerExtraCommands(program, { db, print, config });

  try {
    await program.parseAsync(argv);
  } finally {
    if (ds?.isInitialized) await ds.destroy();
  }
}

/** The URL as the API stores it (PUT /v1/retain/merchant/webhook: the same rules), or the reason it cannot be. */
function webhookUrl(url: string): string {
  const problem = webhookUrlProblem(url);
  if (problem) throw new Error(problem);
  return parseWebhookUrl(url)!;
}

main(process.argv).then(
  () => process.exit(0),
  (err: unknown) => {
    if (err instanceof CommanderError) process.exit(err.exitCode);
    const message = err instanceof ConfigError || err instanceof Error ? err.message : String(err);
    process.stderr.write(JSON.stringify({ error: message }) + '\n');
    process.exit(1);
  },
);
