import { WebhookMessagesRepository } from '@retain/db';
import type { Command } from 'commander';
import type { CliContext } from './main';

/**
 * Webhook operations. A replay puts a message back to `pending` and due now: the dispatcher's pump
 * (woken by its tick) sends it with the SAME message_id (no Redis needed here, so replay works even
 * with Redis down). Each replay bumps replay_count; a message can be replayed any number of times.
 */
export function registerWebhookCommands(program: Command, ctx: CliContext): void {
  const repo = async (): Promise<WebhookMessagesRepository> => new WebhookMessagesRepository(await ctx.db());
  const webhooks = program.command('webhooks').description('push notification delivery');
  webhooks
    .command('replay')
    .argument('[message_id]', 'message to deliver again')
    .option('--dead', 'replay every dead message')
    .option('--since <date-time>', 'with --dead: only messages that died at or after this time')
    .action(async (messageId: string | undefined, o: { dead?: boolean; since?: string }) => {
      const messages = await repo();
      if (o.dead) {
        const since = o.since ? new Date(o.since) : new Date(0);
        if (Number.isNaN(since.getTime())) throw new Error('--since must be an ISO 8601 date-time');
        const ids = await messages.replayDead(since);
        ctx.print({ replayed: ids.length, message_ids: ids });
        return;
      }
      if (!messageId) throw new Error('give a message_id, or --dead [--since <date-time>]');
      if (!(await messages.replay(messageId))) throw new Error(`no message ${messageId}`);
      ctx.print({ replayed: 1, message_ids: [messageId] });
    });
  webhooks
    .command('log')
    .argument('<message_id>')
    .description('a message and every delivery attempt (time, status code, latency, error)')
    .action(async (messageId: string) => {
      const message = await (await repo()).withDeliveries(messageId);
      if (!message) throw new Error(`no message ${messageId}`);
      ctx.print(message);
    });
  webhooks
    .command('list')
    .option('--status <status>', 'pending, delivered, dead, gone or no_endpoint')
    .option('--limit <n>', 'at most n messages', '50')
    .action(async (o: { status?: string; limit: string }) => {
      const rows = await (await repo()).list(o.status ?? null, Math.min(1000, Math.max(1, Number(o.limit) || 50)));
      ctx.print({ messages: rows });
    });
}
