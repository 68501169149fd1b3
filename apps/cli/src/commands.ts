import type { Command } from 'commander';
import type { CliContext } from './main';
import { registerAnalyticsCommands } from './analytics.commands';
import { registerCardKeyCommands } from './card-keys.commands';
import { registerExperimentCommands } from './experiments.commands';
import { registerJobCommands } from './jobs.commands';
import { registerProcessorCommands } from './processor.commands';
import { registerQueueCommands } from './queues.commands';
import { registerRefundCommands } from './refunds.commands';
import { registerWebhookCommands } from './webhooks.commands';

/** Command groups beyond `merchant`. */
export function registerExtraCommands(program: Command, ctx: CliContext): void {
  registerWebhookCommands(program, ctx);
  registerRefundCommands(program, ctx);
  registerQueueCommands(program, ctx);
  registerJobCommands(program, ctx);
  registerProcessorCommands(program, ctx);
  registerExperimentCommands(program, ctx);
  registerAnalyticsCommands(program, ctx);
  registerCardKeyCommands(program, ctx);
}
