import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES, configSchema } from './config';

const readme = readFileSync(path.resolve(__dirname, '..', '..', '..', 'README.md'), 'utf8');

/** The rows of the README's configuration table: variable names of the first cell, and the default cell. */
function tableRows(): { names: string[]; defaults: string }[] {
  const section = readme.slice(readme.indexOf('## Configuration'));
  const table = section.slice(section.indexOf('| Variable'), section.indexOf('\n\n', section.indexOf('| Variable')));
  return table
    .split('\n')
    .slice(2)
    .map((row) => row.split('|').map((c) => c.trim()))
    .map(([, first = '', defaults = '']) => ({
      names: [...first.matchAll(/`([A-Z0-9_]+)`/g)].map((m) => m[1]!),
      defaults,
    }));
}

// The README's configuration table and the schema list the same variables, with the same defaults.
describe('configuration docs', () => {
  it('every schema variable is in the README table, and every table variable is in the schema', () => {
    const documented = tableRows().flatMap((r) => r.names);
    expect([...documented].sort()).toEqual([...CONFIG_VARIABLES].sort());
  });

  it('the README shows each fixed default as the schema has it', () => {
    const schema = configSchema('intake-api');
    for (const row of tableRows()) {
      for (const name of row.names) {
        const d = schema[name as keyof typeof schema].default;
        // HEALTH_PORT's default depends on the app (3001-3004).
        if (d === undefined || name === 'HEALTH_PORT') continue;
        expect(row.defaults, name).toContain(`\`${d}\``);
      }
    }
  });
});
