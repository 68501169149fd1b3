import { afterAll } from 'vitest';
import { killLeftoverApps } from './apps';

// Runs in every test file (vitest.config.ts setupFiles). After hooks run in reverse order, so this
// comes after the file's own afterAll: it only kills app processes a failed test left running.
afterAll(killLeftoverApps);
