// `npm run db:migrate`: apply pending migrations to DATABASE_URL, once.
import { ensureBuilt, runMigrations } from './infra.mjs';

ensureBuilt();
runMigrations(process.env);
