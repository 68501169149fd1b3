import 'reflect-metadata';
import { loadConfig } from '@retain/config';
import { runApp } from '@retain/platform';
import { SubmissionValidatorModule } from './app.module';

void runApp('submission-validator', (config) => SubmissionValidatorModule.forRoot(config), loadConfig, {
  listenOn: 'healthPort',
});
