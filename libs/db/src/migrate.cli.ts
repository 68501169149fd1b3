import 'reflect-metadata';
import { loadConfig } from '@retain/config';
import { migrate } from './data-source';

/** `npm run db:migrate` and the migration Job: apply pending migrations once, then exit (needs DATABASE_URL only). */
async function main(): Promise<void> {
  const config = loadConfig('migrate');
  const applied = await migrate(config.databaseUrl);
  process.stdout.write(
    JSON.stringify({ level: 'info', msg: 'migrations applied', applied, count: applied.length }) + '\n',
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`migration failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
