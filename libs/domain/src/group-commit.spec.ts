import { describe, expect, it } from 'vitest';
import { groupCommit } from './group-commit';

describe('groupCommit', () => {
  it('runs concurrent calls as one batch and answers each caller with its own result, in order', async () => {
    const batches: number[][] = [];
    const double = groupCommit<number, number>(async (keys) => {
      batches.push([...keys]);
      return keys.map((k) => k * 2);
    });
    expect(await Promise.all([1, 2, 3, 4].map(double))).toEqual([2, 4, 6, 8]);
    expect(batches).toEqual([[1, 2, 3, 4]]);
  });

  it('gathers calls made while a batch is in flight into the next one, never two at once', async () => {
    let running = 0;
    let maxRunning = 0;
    const batches: string[][] = [];
    let release!: () => void;
    const firstDone = new Promise<void>((r) => (release = r));
    const run = groupCommit<string, string>(async (keys) => {
      running++;
      maxRunning = Math.max(maxRunning, running);
      batches.push([...keys]);
      if (batches.length === 1) await firstDone;
      running--;
      return keys.map((k) => k.toUpperCase());
    });
    const first = run('a');
    while (batches.length === 0) await new Promise((r) => setImmediate(r));
    const later = ['b', 'c', 'd'].map(run);
    await new Promise((r) => setTimeout(r, 20));
    expect(batches).toEqual([['a']]);
    release();
    expect(await first).toBe('A');
    expect(await Promise.all(later)).toEqual(['B', 'C', 'D']);
    expect(batches).toEqual([['a'], ['b', 'c', 'd']]);
    expect(maxRunning).toBe(1);
  });

  it('rejects every call of a failed batch and keeps serving later ones', async () => {
    let fail = true;
    const run = groupCommit<number, number>(async (keys) => {
      if (fail) throw new Error('db down');
      return [...keys];
    });
    const results = await Promise.allSettled([1, 2].map(run));
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    fail = false;
    expect(await run(3)).toBe(3);
  });
});
