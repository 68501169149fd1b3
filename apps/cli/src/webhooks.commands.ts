import type { Command } from 'commander';
import type { CliContext } from './main';

/**
 * Webhook operations. A replay puts a message back to `pending` and due now: the dispatcher's tick
 * sends it with the SAME message_id (no Redis needed here, so replay works even with Redis down).
 * Each replay starts a new generation (replay_count), so its delivery jobs get fresh job ids and a
 * message can be replayed any number of times.
 */
export function registerWebhookCommands(program: Command, ctx: CliContext): void {
  const webhooks = program.command('webhooks').description('push notification delivery');
  webhooks
    .command('replay')
    .argument('[message_id]', 'message to deliver again')
    .option('--dead', 'replay every dead message')
    .option('--since <date-time>', 'with --dead: only messages that died at or after this time')
    .action(async (messageId: string | undefined, o: { dead?: boolean; since?: string }) => {
      const db = await ctx.db();
      if (o.dead) {
        const since = o.since ? new Date(o.since) : new Date(0);
        if (Number.isNaN(since.getTime())) throw new Error('--since must be an ISO 8601 date-time');
        const [rows]: [{ message_id: string }[], number] = await db.query(
          `UPDATE webhook_messages SET status = 'pending', next_attempt_at = now(), attempt_count = 0,
                  replay_count = replay_count + 1, dead_at = NULL, updated_at = now()
            WHERE status = 'dead' AND dead_at >= $1 RETURNING message_id`,
          [since],
        );
        ctx.print({ replayed: rows.length, message_ids: rows.map((r) => r.message_id) });
        return;
      }
      if (!messageId) throw new Error('give a message_id, or --dead [--since <date-time>]');
      const [rows]: [{ message_id: string; status: string }[], number] = await db.query(
        `UPDATE webhook_messages SET status = 'pending', next_attempt_at = now(), attempt_count = 0,
                replay_count = replay_count + 1, dead_at = NULL, updated_at = now()
          WHERE message_id = $1 RETURNING message_id, status`,
        [messageId],
      );
      if (rows.length === 0) throw new Error(`no message ${messageId}`);
      ctx.print({ replayed: 1, message_ids: [messageId] });
    });
  webhooks
    .command('log')
    .argument('<message_id>')
    .description('a message and every delivery attempt (time, status code, latency, error)')
    .action(async (messageId: string) => {
      const db = await ctx.db();
      const [message] = await db.query(
        `SELECT message_id, event_name, payload_id, status, attempt_count, next_attempt_at, last_status_code,
                last_error, delivered_at, dead_at, created_at FROM webhook_messages WHERE message_id = $1`,
        [messageId],
      );
      if (!message) throw new Error(`no message ${messageId}`);
      const attempts = await db.query(
        `SELECT attempt, attempted_at, url, status_code, latency_ms, error FROM webhook_deliveries
          WHERE message_id = $1 ORDER BY id`,
        [messageId],
      );
      ctx.print({ ...message, attempts });
    });
  webhooks
    .command('list')
    .option('--status <status>', 'pending, delivered, dead, gone or no_endpoint')
    .option('--limit <n>', 'at most n messages', '50')
    .action(async (o: { status?: string; limit: string }) => {
      const db = await ctx.db();
      const rows = await db.query(
        `SELECT message_id, event_name, status, attempt_count, last_status_code, created_at FROM webhook_messages
          WHERE ($1::text IS NULL OR status = $1) ORDER BY created_at DESC LIMIT $2`,
        [o.status ?? null, Math.min(1000, Math.max(1, Number(o.limit) || 50))],
      );
      ctx.print({ messages: rows });
    });
}
