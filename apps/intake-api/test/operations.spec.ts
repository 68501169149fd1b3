import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiClient, closeTestDb, createMerchant, startApp, txn, waitFor, type RunningApp } from '@retain/testing';

// decisions §1: health, readiness, metrics and the OpenAPI document live outside the API prefix.
describe('operations endpoints of intake-api', () => {
  let api: RunningApp;

  beforeAll(async () => {
    api = await startApp('intake-api');
  });
  afterAll(async () => {
    await api.stop();
    await closeTestDb();
  });

  it('answers /healthz and /readyz (Postgres and Redis reachable)', async () => {
    expect((await fetch(`${api.url}/healthz`)).status).toBe(200);
    const ready = await fetch(`${api.url}/readyz`);
    expect(ready.status).toBe(200);
    const body = (await ready.json()) as any;
    expect(body.details.postgres.status).toBe('up');
    expect(body.details.redis.status).toBe('up');
  });

  it('exposes Prometheus metrics with HTTP histograms and submission counters, free of card data', async () => {
    const m = await createMerchant();
    const client = new ApiClient(api.url, m.api_key);
    expect((await client.submit([txn({}, '4000000000000077')])).status).toBe(200);
    const res = await fetch(`${api.url}/metrics`);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const text = await res.text();
    expect(text).toContain('retain_http_request_duration_seconds_bucket');
    expect(text).toMatch(/retain_submitted_transactions_total\{[^}]*result="accepted"[^}]*\} [1-9]/);
    expect(text).toContain('process_cpu_user_seconds_total');
    expect(text).not.toContain('4000000000000077');
    expect(text).not.toContain(m.api_key);
  });

  it('reports the depth of the submission review queue it feeds, read from BullMQ on each scrape', async () => {
    const m = await createMerchant();
    const client = new ApiClient(api.url, m.api_key);
    const depth = async (state: string): Promise<number> => {
      const text = await (await fetch(`${api.url}/metrics`)).text();
      const line = new RegExp(
        `^retain_queue_depth\\{[^}]*queue="submission\\.review"[^}]*state="${state}"[^}]*\\} (\\d+)$`,
        'm',
      );
      const found = line.exec(text);
      expect(found, `retain_queue_depth state=${state}`).not.toBeNull();
      return Number(found![1]);
    };
    for (const state of ['active', 'delayed', 'failed']) expect(await depth(state)).toBeGreaterThanOrEqual(0);
    const before = await depth('waiting');
    // No submission-validator runs here, so the review job of this submission stays waiting.
    expect((await client.submit([txn()])).status).toBe(200);
    // The API publishes to Redis right after its commit, without holding the response for it.
    await waitFor(async () => (await depth('waiting')) >= before + 1, { what: 'the review job to be counted' });
  });

  it('serves an OpenAPI 3 document covering every endpoint and schema, and the docs page', async () => {
    const doc = (await (await fetch(`${api.url}/openapi.json`)).json()) as any;
    expect(doc.openapi).toMatch(/^3\./);
    const paths = Object.keys(doc.paths);
    expect(paths).toEqual(expect.arrayContaining(['/retain/transactions', '/retain/transactions/{id}']));
    expect(doc.paths['/retain/transactions'].post).toBeDefined();
    expect(doc.paths['/retain/transactions'].get).toBeDefined();
    const schemas = Object.keys(doc.components.schemas);
    expect(schemas).toEqual(
      expect.arrayContaining(['TransactionDto', 'PaymentMethodDto', 'CreditCardDto', 'AddressDto', 'ErrorDto']),
    );
    expect(doc.components.securitySchemes).toBeDefined();
    expect(paths).toEqual(expect.arrayContaining(['/retain/refunds', '/retain/refunds/{id}', '/retain/keys']));
    expect(doc.paths['/retain/refunds'].post).toBeDefined();
    expect(doc.paths['/retain/keys'].get).toBeDefined();

    // Every query parameter the handlers read is documented (they parse the raw query themselves).
    const queryParams = (p: string, method: string): string[] =>
      (doc.paths[p][method].parameters ?? []).filter((x: any) => x.in === 'query').map((x: any) => x.name);
    const paging = ['limit', 'starting_after', 'ending_before'];
    expect(queryParams('/retain/transactions', 'get').sort()).toEqual(
      [
        ...paging,
        'status',
        'subscription_id',
        'account_id',
        'submitted_since',
        'submitted_until',
        'updated_since',
      ].sort(),
    );
    expect(queryParams('/retain/refunds', 'get').sort()).toEqual([...paging, 'since', 'until'].sort());
    expect(queryParams('/retain/transactions', 'post')).toEqual(['dryrun']);
    expect(queryParams('/retain/refunds', 'post')).toEqual(['dryrun']);
    expect(queryParams('/retain/transactions/{id}', 'get')).toEqual(['related']);
    const limit = doc.paths['/retain/transactions'].get.parameters.find((x: any) => x.name === 'limit');
    expect(limit).toMatchObject({ required: false, schema: { type: 'integer', maximum: 1000 } });
    const docs = await fetch(`${api.url}/docs`);
    expect(docs.status).toBe(200);
    expect(await docs.text()).toContain('swagger');
  });

  it('stops cleanly on SIGTERM, finishing the request in flight', async () => {
    const local = await startApp('intake-api');
    const m = await createMerchant();
    const body = JSON.stringify({ transactions: Array.from({ length: 1000 }, () => txn()) });
    // `Expect: 100-continue`: the server answers `100 Continue` once it has taken the request, so the
    // SIGTERM below lands while this request is certainly in flight (no guess of a delay).
    let inFlight!: () => void;
    const taken = new Promise<void>((r) => (inFlight = r));
    const pending = new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = http.request(`${local.url}/v1/retain/transactions`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${m.api_key}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          expect: '100-continue',
        },
      });
      req.on('continue', () => req.end(body, inFlight));
      req.on('response', (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      });
      req.on('error', reject);
      req.flushHeaders();
    });
    await taken;
    const exit = local.stop('SIGTERM');
    const res = await pending;
    expect(res.status, res.text).toBe(200);
    expect(await exit).toBe(0);
  });
});
