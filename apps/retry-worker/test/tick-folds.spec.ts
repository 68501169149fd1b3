import { type TestingModule } from '@nestjs/testing';
import { loadConfig } from '@retain/config';
import { PgSandboxLedger, SandboxProcessor } from '@retain/processor';
import { QueueRegistry, createRedis } from '@retain/queues';
import { closeTestDb, testDb, usePrivateDatabase } from '@retain/testing';
import type { Redis } from 'ioredis';
import { DataSource } from 'typeorm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TickProcessor } from '../src/scheduler/tick.processor';
import { attemptTestingModule } from './attempt-testing-module';

// The retry tick folds two pending-counter tables: the analytics rollup's and the adaptive policy's
// slot counts. One failing (the sixteenth session's audit: a rollup sum past bigint failed on every
// tick) must not stop the other: the policy reads its slot counts on every attempt.
describe('the retry tick folds the policy slot counts whatever the analytics fold does', () => {
  // Its own database: the analytics fold is made to fail here, for every merchant of the database.
  usePrivateDatabase('tickfolds');
  let mod: TestingModule;
  let db: DataSource;
  let redis: Redis;
  let queues: QueueRegistry;

  beforeAll(async () => {
    const config = loadConfig('retry-worker');
    db = await testDb();
    redis = createRedis(config.redisUrl);
    queues = new QueueRegistry(redis, config.queuePrefix);
    mod = await attemptTestingModule(db, queues, config, new SandboxProcessor(new PgSandboxLedger(db)));
  });
  afterAll(async () => {
    await mod?.close();
    await queues?.close();
    redis?.disconnect();
    await closeTestDb();
  });

  it('a failing analytics fold: the slot counts are folded all the same', async () => {
    await db.query(
      `INSERT INTO analytics_rollup_pending (merchant_id, day, currency, dim, key, failed_count)
       VALUES (gen_random_uuid(), current_date, 'USD', 'all', '', 1)`,
    );
    await db.query(
      `CREATE FUNCTION test_rollup_fails() RETURNS trigger LANGUAGE plpgsql AS
         $$ BEGIN RAISE EXCEPTION 'bigint out of range (test)'; END $$`,
    );
    await db.query(
      `CREATE TRIGGER test_rollup_fails BEFORE INSERT ON analytics_rollup FOR EACH ROW EXECUTE FUNCTION test_rollup_fails()`,
    );
    await db.query(
      `INSERT INTO policy_slot_pending (scope, decline_class, day_after_failure, local_hour, attempts, approvals)
       VALUES ('tickfolds', 'soft', 3, 10, 2, 1)`,
    );
    await mod.get(TickProcessor).process();
    expect(await db.query(`SELECT count(*)::int AS n FROM analytics_rollup_pending`)).toEqual([{ n: 1 }]);
    expect(await db.query(`SELECT count(*)::int AS n FROM policy_slot_pending`)).toEqual([{ n: 0 }]);
    expect(await db.query(`SELECT attempts, approvals FROM policy_slot_stats WHERE scope = 'tickfolds'`)).toEqual([
      { attempts: 2, approvals: 1 },
    ]);
  });
});
