import type { DataSource } from 'typeorm';

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
