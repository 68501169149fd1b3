import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

// Repositories own the SQL (architecture.md): apps reach Postgres through libs/db's
// `*.repository.ts` classes and hold no SQL strings or query builders of their own.
const root = path.resolve(__dirname, '../..');

/** Files not moved yet (owned by other work in progress); each entry should shrink to nothing. */
const NOT_YET_MOVED = new Set([
  'apps/retry-worker/src/attempts/attempt.service.ts',
  'apps/refund-batcher/src/batch/refund-batch.service.ts',
]);
const NOT_YET_MOVED_DIRS = ['apps/retry-worker/src/reconcile/'];

/** A call that runs SQL, or a SQL statement in a string. */
const SQL = [
  /\.(query|getRepository|createQueryBuilder)\s*[<(]/,
  /\b(SELECT\s[^`'"]*\sFROM|UPDATE\s+[a-z_]+\s+SET|INSERT\s+INTO|DELETE\s+FROM)\b/,
];

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' ? [] : sources(p);
    return e.name.endsWith('.ts') && !e.name.endsWith('.spec.ts') ? [p] : [];
  });
}

const appSources = readdirSync(path.join(root, 'apps')).flatMap((app) => {
  try {
    return sources(path.join(root, 'apps', app, 'src'));
  } catch {
    return [];
  }
});

describe('SQL lives in libs/db repositories', () => {
  it('finds the apps sources (the scan itself works)', () => {
    expect(appSources.length).toBeGreaterThan(20);
  });

  it('no app source outside the allow-list runs SQL itself', () => {
    const offenders: string[] = [];
    for (const file of appSources) {
      const rel = path.relative(root, file).split(path.sep).join('/');
      if (NOT_YET_MOVED.has(rel) || NOT_YET_MOVED_DIRS.some((d) => rel.startsWith(d))) continue;
      readFileSync(file, 'utf8')
        .split('\n')
        .forEach((line, i) => {
          if (SQL.some((re) => re.test(line))) offenders.push(`${rel}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(offenders, 'move these statements into a repository in libs/db').toEqual([]);
  });

  it('the allow-list names files that still exist (drop an entry once its file is moved)', () => {
    const rels = new Set(appSources.map((f) => path.relative(root, f).split(path.sep).join('/')));
    for (const f of NOT_YET_MOVED) expect(rels.has(f), f).toBe(true);
  });
});
