import 'reflect-metadata';
import { loadConfig } from '@retain/config';
import { runApp } from '@retain/platform';
import { RefundBatcherModule } from './app.module';

void runApp('refund-batcher', (config) => RefundBatcherModule.forRoot(config), loadConfig, { listenOn: 'healthPort' });
