import 'reflect-metadata';
import { loadConfig } from '@retain/config';
import { runApp } from '@retain/platform';
import { WebhookDispatcherModule } from './app.module';

void runApp('webhook-dispatcher', (config) => WebhookDispatcherModule.forRoot(config), loadConfig, {
  listenOn: 'healthPort',
});
