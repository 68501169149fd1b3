import 'reflect-metadata';
import { loadConfig } from '@retain/config';
import { runApp } from '@retain/platform';
import { RetryWorkerModule } from './app.module';

void runApp('retry-worker', (config) => RetryWorkerModule.forRoot(config), loadConfig, { listenOn: 'healthPort' });
