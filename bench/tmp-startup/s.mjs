import { benchEnv } from '../lib.mjs';
const env = await benchEnv('startup');
for (const app of ['retry-worker', 'retry-worker', 'retry-worker', 'intake-api', 'intake-api']) {
  const t0 = performance.now();
  const { child } = await env.startApp(app);
  console.log(app, (performance.now() - t0).toFixed(0), 'ms');
  child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 1500));
}
await env.close();
process.exit(0);
