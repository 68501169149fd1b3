import type { Provider } from '@nestjs/common';
import type { RetainConfig } from '@retain/config';
import {
  AttemptScheduleRepository,
  MerchantsRepository,
  RefundsRepository,
  SubmissionsRepository,
  WebhookMessagesRepository,
} from '@retain/db';
import { DataSource } from 'typeorm';
import { RETAIN_CONFIG } from './tokens';

const onDataSource = <T>(repo: new (db: DataSource) => T): Provider => ({
  provide: repo,
  inject: [DataSource],
  useFactory: (db: DataSource) => new repo(db),
});

/**
 * The repositories of libs/db as Nest providers (each app gets them through PlatformModule; a
 * testing module that builds its own providers lists these). Services take them by injection and
 * hold no SQL of their own.
 */
export const DbRepositoryProviders: Provider[] = [
  onDataSource(AttemptScheduleRepository),
  onDataSource(RefundsRepository),
  onDataSource(SubmissionsRepository),
  onDataSource(WebhookMessagesRepository),
  {
    provide: MerchantsRepository,
    inject: [DataSource, RETAIN_CONFIG],
    useFactory: (db: DataSource, config: RetainConfig) => new MerchantsRepository(db, config.cardKeys),
  },
];
