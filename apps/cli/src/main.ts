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
 * object on stdout, on one line (a caller reading the last line of npm's output gets all of it; `jq`
 * prints it indented); errors print `{"error": "..."}` on stderr and exit non-zero.
 */
const print = (value: unknown): void => {
  process.stdout.write(JSON.stringify(value) + '\n');
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

  // Usage errors are JSON like every other error (main's catch prints them): commander writes no text
  // of its own for them. Help asked for (--help) stays text on stdout.
  const program = new Command('retain')
    .description('Retain operator CLI')
    .exitOverride()
    .configureOutput({ writeErr: () => undefined, outputError: () => undefined });
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
  } catch (err) {
    throw err instanceof CommanderError ? usageError(program, argv.slice(2), err) : err;
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

/**
 * A CommanderError as the CLI reports it: help asked for (exit 0) stays as is; any other (a missing
 * or unknown option, command or argument, a group named without its command) becomes an Error with
 * commander's message, without its "error: " prefix.
 */
function usageError(program: Command, args: string[], err: CommanderError): Error {
  if (err.exitCode === 0) return err;
  if (err.code === 'commander.help' || err.code === 'commander.executeSubCommandAsync') {
    // A group without its command (`merchant`, or nothing at all): commander's help on stderr, which we drop.
    let command = program;
    for (const arg of args) {
      const sub = command.commands.find((c) => c.name() === arg || c.aliases().includes(arg));
      if (!sub) break;
      command = sub;
    }
    const path: string[] = [];
    for (let c: Command | null = command; c; c = c.parent) path.unshift(c.name());
    return new Error(`${path.join(' ')} needs a command: ${command.commands.map((c) => c.name()).join(', ')}`);
  }
  return new Error(err.message.replace(/^error: /, ''));
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
