import { randomBytes } from 'node:crypto';
import { loadConfig } from '@retain/config';
import { MerchantsRepository, createDataSource } from '@retain/db';
import { SANDBOX_APPROVED_CARD } from '@retain/processor';
import type { DataSource } from 'typeorm';

export interface TestMerchant {
  merchant_vid: string;
  login: string;
  api_key: string;
  webhook_secret: string;
}

let shared: DataSource | undefined;

/** A DataSource on the test run's database, shared by a test file. */
export async function testDb(): Promise<DataSource> {
  if (!shared) {
    shared = createDataSource(process.env['DATABASE_URL']!, 4);
    await shared.initialize();
  }
  return shared;
}

export async function closeTestDb(): Promise<void> {
  if (shared?.isInitialized) await shared.destroy();
  shared = undefined;
}

export async function createMerchant(webhookUrl: string | null = null, login?: string): Promise<TestMerchant> {
  const db = await testDb();
  const repo = new MerchantsRepository(db, loadConfig('cli').cardKeys);
  return (await repo.create(login ?? `m_${randomBytes(5).toString('hex')}`, webhookUrl)) as TestMerchant;
}

export const uniqueId = (prefix = 'tx'): string => `${prefix}_${randomBytes(6).toString('hex')}`;

/**
 * When the fixture's charge failed: an hour before the call, to the second. A fixed date would put
 * every recovery outside its 30-day window from that date on (they end Cancelled at once), and the
 * scaled window of the time-scaled tests shrinks day by day before it.
 */
const failedAnHourAgo = (): string => new Date(Date.now() - 3_600_000).toISOString().replace(/\.\d{3}Z$/, 'Z');

/** A valid failed transaction as a merchant sends it; override any field. */
export function txn(overrides: Record<string, unknown> = {}, card = SANDBOX_APPROVED_CARD): Record<string, unknown> {
  const id = uniqueId();
  return {
    id,
    timestamp: failedAnHourAgo(),
    amount: 19.99,
    currency: 'USD',
    status: 'Failed',
    division_number: 'div-1',
    auth_code: '51',
    avs_code: 'Y',
    cvn_code: 'M',
    account: { id: `acct_${id}`, email: 'jane@example.com' },
    subscription: { id: `sub_${id}` },
    payment_method: {
      id: `pm_${id}`,
      is_tokenized: false,
      account_holder: 'Jane Doe',
      billing_address: { line1: '1 Main St', city: 'Springfield', country: 'US', postal_code: '12345' },
      credit_card: { account: card, expiration_date: '202912' },
    },
    metadata: { plan: 'gold' },
    ...overrides,
  };
}

/** Minimal HTTP client of the merchant API. */
export class ApiClient {
  constructor(
    readonly baseUrl: string,
    readonly apiKey: string,
    readonly login?: string,
  ) {}

  async request(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
    const res = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${this.apiKey}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    let json: any = undefined;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: res.headers, text, json };
  }

  submit(transactions: unknown[], query = '') {
    return this.request('POST', `/v1/retain/transactions${query}`, { transactions });
  }
}
