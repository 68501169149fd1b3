import { describe, expect, it } from 'vitest';
import { QueueName } from '@retain/queues';
import { QUEUES_BY_APP, RetainMetrics } from './metrics';

describe('retain_queue_depth', () => {
  it('is set on each scrape from the job counts of the app queues', async () => {
    const m = new RetainMetrics('test');
    let reads = 0;
    m.trackQueueDepth(
      [QueueName.RetryAttempt, QueueName.RetryTick],
      async (queue, states): Promise<Record<string, number>> => {
        reads++;
        expect(states).toEqual(['waiting', 'active', 'delayed', 'failed']);
        return queue === QueueName.RetryAttempt ? { waiting: 7, active: 2, delayed: 1, failed: 3 } : { waiting: reads };
      },
    );
    const text = await m.registry.metrics();
    expect(text).toContain('retain_queue_depth{queue="retry.attempt",state="waiting",app="test"} 7');
    expect(text).toContain('retain_queue_depth{queue="retry.attempt",state="failed",app="test"} 3');
    expect(text).toContain('retain_queue_depth{queue="retry.tick",state="active",app="test"} 0');
    expect(text).toContain('retain_queue_depth{queue="retry.tick",state="waiting",app="test"} 2');
    // A second scrape reads Redis again.
    expect(await m.registry.metrics()).toContain('retain_queue_depth{queue="retry.tick",state="waiting",app="test"} 4');
  });

  it('answers the scrape without queue depths when Redis is slow or failing', async () => {
    const m = new RetainMetrics('test');
    m.trackQueueDepth([QueueName.WebhookDeliver], () => new Promise(() => {}), 50);
    const started = Date.now();
    const text = await m.registry.metrics();
    expect(Date.now() - started).toBeLessThan(5000);
    expect(text).not.toMatch(/^retain_queue_depth\{/m);
    expect(text).toMatch(/^retain_queue_depth_errors_total\{app="test"\} 1$/m);
    expect(text).toContain('process_cpu_user_seconds_total');

    const failing = new RetainMetrics('test');
    failing.trackQueueDepth([QueueName.WebhookDeliver], () => Promise.reject(new Error('ECONNREFUSED')));
    expect(await failing.registry.metrics()).toMatch(/^retain_queue_depth_errors_total\{app="test"\} 1$/m);
  });

  it('covers every consumed queue', () => {
    const owned = new Set(Object.values(QUEUES_BY_APP).flat());
    expect([...owned].sort()).toEqual(Object.values(QueueName).sort());
  });
});
