import { Redis, type RedisOptions } from 'ioredis';

/** BullMQ needs maxRetriesPerRequest null on worker connections. */
export function createRedis(url: string, extra: RedisOptions = {}): Redis {
  return new Redis(url, { maxRetriesPerRequest: null, enableReadyCheck: true, lazyConnect: false, ...extra });
}
