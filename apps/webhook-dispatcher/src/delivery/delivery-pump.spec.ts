import type { ClaimedWebhookMessage, WebhookMessagesRepository } from '@retain/db';
import { describe, expect, it } from 'vitest';
import { DeliveryPump } from './delivery-pump.service';
import type { DeliveryService } from './delivery.service';

// The pump's scheduling alone (its Postgres and HTTP are the delivery specs'): claims stand in for the
// repository, deliveries for the service. A delivery's exchange ends at once (its slot frees); its
// record commits only when the test says so.
describe('the delivery pump', () => {
  const row = (i: number): ClaimedWebhookMessage => ({
    message_id: `m${i}`,
    merchant_id: `merchant${i}`,
    body: { header: {}, content: null },
    attempt_count: 1,
    replay_count: 0,
    claimed_at: Date.now(),
  });

  it('starts again by itself once held-up records commit: nothing waits for the next job or tick', async () => {
    // 300 pushes due, of as many merchants (one each: a claim shares one to each); records stall
    // (Postgres slow) until released.
    const due = Array.from({ length: 300 }, (_, i) => row(i));
    const messages = {
      claimNextDue: async (limit: number) => ({ rows: due.splice(0, limit), share: 1 }),
      releaseClaimed: async () => undefined,
    } as unknown as WebhookMessagesRepository;
    const sent: string[] = [];
    const commits: (() => void)[] = [];
    const delivery = {
      deliverClaimed: (r: ClaimedWebhookMessage, _at: unknown, onSent: () => void) => {
        sent.push(r.message_id);
        onSent();
        return new Promise<void>((resolve) => commits.push(resolve));
      },
    } as unknown as DeliveryService;
    const pump = new DeliveryPump(messages, delivery);
    const settle = () => new Promise((resolve) => setTimeout(resolve, 50));

    pump.wake();
    await settle();
    // At most 256 deliveries wait for their records: starting stops there.
    expect(sent.length).toBe(256);
    // The records commit; no job and no tick wakes the pump meanwhile.
    for (let i = 0; i < 10 && (commits.length > 0 || sent.length < 300); i++) {
      commits.splice(0).forEach((commit) => commit());
      await settle();
    }
    expect(sent.length).toBe(300);
    commits.splice(0).forEach((commit) => commit());
    await pump.onApplicationShutdown();
  });
});
