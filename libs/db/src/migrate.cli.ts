import 'reflect-metadata';
import { exitOnConfigError, loadConfig } from '@retain/config';
import { createDataSource, migrate } from './data-source';
import { checkPostgresSettings } from './postgres-settings';

/** `npm run db:migrate` and the migration Job: apply pending migrations once, then exit (needs DATABASE_URL only). */
async function main(): Promise<void> {
  const config = loadConfig('migrate');
  const applied = await migrate(config.databaseUrl);
  process.stdout.write(
    JSON.stringify({ level: 'info', msg: 'migrations applied', applied, count: applied.length }) + '\n',
  );
  // The settings the service's plans rely on (README "Postgres settings"): warned about, never changed.
  const db = createDataSource(config.databaseUrl, 1);
  await db.initialize();
  try {
    const report = await checkPostgresSettings(db);
    for (const warning of report.warnings) {
      process.stdout.write(JSON.stringify({ level: 'warn', msg: `postgres settings: ${warning}` }) + '\n');
    }
  } finally {
    await db.destroy();
  }
}

main().catch((err: unknown) => {
  // A bad variable is no failed migration: exit 78 (EX_CONFIG), as the apps do, naming the variable.
  exitOnConfigError('migrate', err);
  process.stderr.write(`migration failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
