import 'reflect-metadata';
import { loadConfig } from '@retain/config';
import { runApp } from '@retain/platform';
import { IntakeApiModule } from './app.module';
import { configureIntake, intakeAdapterOptions } from './http/server-options';

void runApp('intake-api', (config) => IntakeApiModule.forRoot(config), loadConfig, {
  listenOn: 'port',
  adapterOptions: intakeAdapterOptions,
  configure: (app, config) => configureIntake(app, config),
});
