// Micro benchmark of the synchronous primary validation of POST /retain/transactions:
// ms per 1000-transaction batch (~1 MB JSON), beside JSON.parse of the same body and the
// class-validator path it replaces. Run: node bench/run-ts.mjs bench/validation/validate.bench.ts
import 'reflect-metadata';
import { SubmitTransactionsBodyDto, validateSubmission } from '@retain/api-contract';
import { plainToInstance } from 'class-transformer';
import { validate } from 'class-validator';
import { performance } from 'node:perf_hooks';
import { tokenizedTransaction, validTransaction } from '../../libs/api-contract/test/transaction.fixture';

const BATCH = 1000;
const JWE =
  'eyJhbGciOiJSU0EtT0FFUC0yNTYiLCJlbmMiOiJBMjU2R0NNIn0.' +
  'k'.repeat(342) +
  '.aXZpdml2aXZpdml2.Y2lwaGVydGV4dA.dGFndGFndGFndGFn';

/** A realistic mix: clear numbers, JWEs, tokens, masked numbers and a few invalid transactions. */
function batch(): unknown[] {
  return Array.from({ length: BATCH }, (_, i) => {
    const tx = i % 10 === 9 ? tokenizedTransaction(i) : validTransaction(i);
    if (i % 10 === 3) tx['payment_method'].credit_card.account = JWE;
    if (i % 10 === 5) {
      tx['payment_method'].credit_card.account = '411111******1111';
      tx['payment_method'].credit_card.account_hash = 'a'.repeat(40);
    }
    if (i % 50 === 7) tx['amount'] = 10.001; // ~2% rejected
    tx['metadata'] = { ...tx['metadata'], note: 'n'.repeat(300) }; // ~1 KB per transaction
    return tx;
  });
}

function measure(label: string, runs: number, fn: () => unknown): number {
  for (let i = 0; i < Math.min(20, runs); i++) fn(); // warm-up (JIT)
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    fn();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)]!;
  const p95 = times[Math.floor(times.length * 0.95)]!;
  console.log(`${label.padEnd(44)} median ${median.toFixed(2).padStart(7)} ms   p95 ${p95.toFixed(2).padStart(7)} ms`);
  return median;
}

async function measureAsync(label: string, runs: number, fn: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < 3; i++) await fn();
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await fn();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)]!;
  console.log(`${label.padEnd(44)} median ${median.toFixed(2).padStart(7)} ms`);
  return median;
}

async function main(): Promise<void> {
  const json = JSON.stringify({ transactions: batch() });
  const body = JSON.parse(json) as unknown;
  const check = validateSubmission(body);
  if (!check.ok) throw new Error('benchmark body refused');
  const rejected = check.items.filter((i) => 'errors' in i).length;
  console.log(`batch: ${BATCH} transactions, ${(json.length / 1024 / 1024).toFixed(2)} MB JSON, ${rejected} rejected`);

  const runs = Number(process.env['RUNS'] ?? 200);
  measure('JSON.parse', runs, () => JSON.parse(json));
  const ms = measure('validateSubmission (hand-written, table-driven)', runs, () => validateSubmission(body));
  await measureAsync('class-validator plainToInstance + validate', Math.max(5, Math.floor(runs / 20)), async () =>
    validate(plainToInstance(SubmitTransactionsBodyDto, body as object)),
  );
  console.log(`RESULT validateSubmission: ${ms.toFixed(2)} ms per ${BATCH}-transaction batch`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
