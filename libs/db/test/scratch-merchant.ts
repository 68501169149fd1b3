import { afterAll, beforeAll } from 'vitest';
import type { DataSource } from 'typeorm';
import { createDataSource } from '../src/data-source';

/**
 * A merchant of its own and one submission of it, inserted raw, for the specs of libs/db that seed
 * transactions in SQL (the plan and rollup checks). Test support: never built into dist/.
 */
export async function scratchMerchant(
  db: DataSource,
  loginPrefix: string,
): Promise<{ merchantId: string; submissionId: string }> {
  const [m]: { id: string }[] = await db.query(
    `INSERT INTO merchants (merchant_vid, login) VALUES (md5(random()::text), $1 || md5(random()::text)) RETURNING id`,
    [loginPrefix],
  );
  const [sub]: { id: string }[] = await db.query(
    `INSERT INTO submissions (merchant_id, request_id, received_count, accepted_count, rejected_count)
     VALUES ($1, md5(random()::text), 0, 0, 0) RETURNING id`,
    [m!.id],
  );
  return { merchantId: m!.id, submissionId: sub!.id };
}

export interface Scratch {
  db: DataSource;
  merchantId: string;
  submissionId: string;
}

/**
 * A pool on the run's database and a scratch merchant for the describe block that calls it: ready
 * in the block's first beforeAll; after its last afterAll, the merchant's rows of `alsoDelete` and
 * its transactions (their attempts with them) are deleted and the pool closed.
 */
export function useScratchMerchant(loginPrefix: string, alsoDelete: readonly string[] = []): Scratch {
  const scratch = {} as Scratch;
  beforeAll(async () => {
    scratch.db = createDataSource(process.env['DATABASE_URL']!, 2);
    await scratch.db.initialize();
    Object.assign(scratch, await scratchMerchant(scratch.db, loginPrefix));
  });
  afterAll(async () => {
    for (const table of [...alsoDelete, 'transactions']) {
      await scratch.db.query(`DELETE FROM ${table} WHERE merchant_id = $1`, [scratch.merchantId]);
    }
    await scratch.db.destroy();
  });
  return scratch;
}
