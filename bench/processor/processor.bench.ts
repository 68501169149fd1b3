// Charges/s through the real SDK-based adapters against their local wire fakes (Stripe over HTTP,
// Adyen over HTTPS), at 16 concurrent charges, beside the sandbox processor with an in-memory ledger.
// This measures the adapter layer alone (bench/attempts --processor stripe measures the whole attempt).
// Run: node bench/run-ts.mjs bench/processor/processor.bench.ts [count]
import { performance } from 'node:perf_hooks';
import {
  AdyenProcessor,
  MemorySandboxLedger,
  SandboxProcessor,
  StripeProcessor,
  type ChargeRequest,
  type PaymentInstrument,
  type PaymentProcessor,
} from '@retain/processor';
import { AdyenFake } from '../../libs/processor/test/adyen-fake';
import { StripeFake } from '../../libs/processor/test/stripe-fake';

const N = Number(process.argv[2] ?? 2000);
const CONCURRENCY = 16;

async function run(name: string, p: PaymentProcessor, instrument: PaymentInstrument): Promise<Record<string, unknown>> {
  let next = 0;
  let approved = 0;
  const charge = (i: number): ChargeRequest => ({
    idempotencyKey: `bench_${name}_${i}_${Date.now()}`,
    attemptNumber: 1,
    amountMinor: 1000n,
    currency: 'USD',
    instrument,
    originalResponseCode: '05',
    divisionNumber: 'd',
    networkTransactionId: '123456789012345',
    at: new Date(),
  });
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < N) {
        const r = await p.charge(charge(next++));
        if (r.outcome === 'approved') approved++;
      }
    }),
  );
  const s = (performance.now() - t0) / 1000;
  return { processor: name, charges: N, approved, 'charges/s': Math.round(N / s) };
}

async function main(): Promise<void> {
  const stripeFake = new StripeFake();
  const adyenFake = new AdyenFake();
  const stripeBase = await stripeFake.start();
  const adyenBase = await adyenFake.start();
  const rows = [
    await run('sandbox (memory ledger)', new SandboxProcessor(new MemorySandboxLedger()), {
      kind: 'token',
      token: 'tok_sandbox_1111',
      isNetworkToken: false,
    }),
    await run('stripe SDK + fake', new StripeProcessor({ secret_key: stripeFake.secretKey, api_base: stripeBase }), {
      kind: 'token',
      token: 'cus_B|pm_card_visa',
      isNetworkToken: false,
    }),
    await run(
      'adyen SDK + fake (TLS)',
      new AdyenProcessor(
        { api_key: adyenFake.apiKey, merchant_account: adyenFake.merchantAccount, checkout_url: `${adyenBase}/v71` },
        { trustedCa: adyenFake.ca! },
      ),
      { kind: 'token', token: 'shopper|8415718415172200', isNetworkToken: false },
    ),
  ];
  await stripeFake.close();
  await adyenFake.close();
  const widths = Object.keys(rows[0]!).map((k) => Math.max(k.length, ...rows.map((r) => String(r[k]).length)));
  const line = (cells: unknown[]): string => cells.map((c, i) => String(c).padEnd(widths[i]!)).join('  ');
  console.log(line(Object.keys(rows[0]!)));
  for (const r of rows) console.log(line(Object.values(r)));
}

void main();
