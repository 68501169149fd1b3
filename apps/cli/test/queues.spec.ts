import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { QueueName, QueueRegistry, createRedis } from '@retain/queues';
import { afterAll, describe, expect, it } from 'vitest';
import { closeTestDb, testDb } from '@retain/testing';

const cli = (...args: string[]): any => {
  const r = spawnSync(process.execPath, [path.resolve(__dirname, '../../../dist/apps/cli/src/main.js'), ...args], {
    env: process.env,
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout);
};

describe('retain queues', () => {
  const redis = createRedis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379');
  const queues = new QueueRegistry(redis, process.env['QUEUE_PREFIX']!);

  afterAll(async () => {
    await queues.close();
    redis.disconnect();
    await closeTestDb();
  });

  it('prints job counts per queue and the dead webhook messages', async () => {
    const before = cli('queues');
    expect(before.prefix).toBe(process.env['QUEUE_PREFIX']);
    expect(Object.keys(before.queues).sort()).toEqual(Object.values(QueueName).sort());
    for (const counts of Object.values(before.queues))
      expect(Object.keys(counts as object).sort()).toEqual(['active', 'completed', 'delayed', 'failed', 'waiting']);
    const [dead] = await (
      await testDb()
    ).query(`SELECT count(*)::int AS n FROM webhook_messages WHERE status = 'dead'`);
    expect(before.dead_webhook_messages).toBe(dead.n);

    // Nothing consumes refund.batch in this test: the job stays waiting / delayed.
    const job = { queue: QueueName.RefundBatch, data: { v: 1, trigger: 'operator' } } as const;
    await queues.enqueue(job, `cli-test-${Date.now()}`);
    await queues.enqueue(job, `cli-test-d-${Date.now()}`, 3_600_000);
    const after = cli('queues');
    expect(after.queues[QueueName.RefundBatch].waiting).toBe(before.queues[QueueName.RefundBatch].waiting + 1);
    expect(after.queues[QueueName.RefundBatch].delayed).toBe(before.queues[QueueName.RefundBatch].delayed + 1);
  });

  it('fails with an error instead of hanging when Redis is unreachable', () => {
    const r = spawnSync(
      process.execPath,
      [path.resolve(__dirname, '../../../dist/apps/cli/src/main.js'), 'queues', '--timeout', '2'],
      { env: { ...process.env, REDIS_URL: 'redis://127.0.0.1:1' }, encoding: 'utf8', timeout: 30_000 },
    );
    expect(r.status).toBe(1);
    expect(JSON.parse(r.stderr.trim().split('\n').pop()!).error).toBeTruthy();
  });
});
