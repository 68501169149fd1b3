import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  closeTestDb,
  insertMerchantRow,
  insertRefundRow,
  insertTransactionRow,
  startApp,
  testDb,
  usePrivateDatabase,
  type AppName,
  type RunningApp,
} from '@retain/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const root = path.resolve(__dirname, '../..');
const APPS: AppName[] = ['intake-api', 'submission-validator', 'retry-worker', 'refund-batcher', 'webhook-dispatcher'];

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

/** Every series of a Prometheus text exposition: metric name -> the label sets it was seen with. */
function seriesOf(text: string, into: Map<string, Record<string, string>[]>): void {
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+$/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    into.set(m[1]!, [...(into.get(m[1]!) ?? []), labels]);
  }
}

/** The retain_* selectors of a PromQL expression, with their label matchers. */
function selectors(expr: string): { metric: string; matchers: { label: string; op: string; value: string }[] }[] {
  return [...expr.matchAll(/\b(retain_[a-z0-9_]+)\s*(?:\{([^}]*)\})?/g)].map((m) => ({
    metric: m[1]!,
    matchers: [...(m[2] ?? '').matchAll(/(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"/g)].map((x) => ({
      label: x[1]!,
      op: x[2]!,
      value: x[3]!,
    })),
  }));
}

const grouping = (expr: string): string[] =>
  [...expr.matchAll(/\b(?:by|without)\s*\(([^)]*)\)/g)].flatMap((m) =>
    m[1]!
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );

const rules: Rule[] = (
  parse(readFileSync(path.join(root, 'k8s/monitoring/prometheus-rules.yaml'), 'utf8')) as {
    spec: { groups: { rules: Rule[] }[] };
  }
).spec.groups.flatMap((g) => g.rules);

// The alert rules are only worth something if each expression names series the running apps really
// export, with the labels it filters and groups on (a name the registry knows but no app emits, a
// suffix prom-client does not add, a label the metric lacks: the alert can never fire). Every app runs
// here as it does in a pod, and its /metrics is read.
describe('alert rules against the metrics the running apps export', () => {
  usePrivateDatabase('alerts');
  const running: RunningApp[] = [];
  const series = new Map<string, Record<string, string>[]>();

  beforeAll(async () => {
    running.push(...(await Promise.all(APPS.map((a) => startApp(a)))));
    for (const app of running) seriesOf(await (await fetch(`${app.url}/metrics`)).text(), series);
  });
  afterAll(async () => {
    await Promise.all(running.map((a) => a.stop()));
    await closeTestDb();
  });

  it('reads series from every app', () => {
    const apps = new Set([...series.values()].flat().map((l) => l['app']));
    expect([...apps].sort()).toEqual([...APPS].sort());
  });

  it("reports each pod's Postgres pool and the refund batcher's oldest refunds not sent and held", async () => {
    const pools = new Set(
      (series.get('retain_db_pool_connections') ?? []).filter((l) => l['state'] === 'waiting').map((l) => l['app']),
    );
    expect([...pools].sort()).toEqual([...APPS].sort());
    const db = await testDb();
    const t = await insertTransactionRow(db, await insertMerchantRow(db), {
      status: 'Refund Requested',
      capturedMinor: '1999',
    });
    const refund = await insertRefundRow(db, t, 'refund', '1999');
    await db.query(`UPDATE refunds SET created_at = now() - interval '2 days' WHERE id = $1`, [refund]);
    const batcher = running[APPS.indexOf('refund-batcher')]!;
    const text = await (await fetch(`${batcher.url}/metrics`)).text();
    const age = Number(/^retain_refunds_oldest_unsent_seconds\{[^}]*\} (\S+)$/m.exec(text)?.[1]);
    expect(age).toBeGreaterThan(2 * 86400 - 60);
    // Sent, and accepted without a final answer (a Stripe refund `pending` for 4 days): held, not unsent.
    await db.query(
      `UPDATE refunds SET processor_refund_id = 're_pending1', created_at = now() - interval '4 days' WHERE id = $1`,
      [refund],
    );
    const after = await (await fetch(`${batcher.url}/metrics`)).text();
    const held = Number(/^retain_refunds_oldest_held_seconds\{[^}]*\} (\S+)$/m.exec(after)?.[1]);
    expect(held).toBeGreaterThan(4 * 86400 - 60);
    expect(Number(/^retain_refunds_oldest_unsent_seconds\{[^}]*\} (\S+)$/m.exec(after)?.[1])).toBeLessThan(2 * 86400);
    await db.query(`UPDATE refunds SET status = 'Completed' WHERE id = $1`, [refund]);
  });

  it.each(rules.map((r) => [r.alert, r] as const))('%s names series and labels the apps export', (_name, rule) => {
    const used = selectors(rule.expr);
    expect(used.length, 'uses a retain metric').toBeGreaterThan(0);
    for (const { metric, matchers } of used) {
      const seen = series.get(metric) ?? [];
      expect(
        seen.length,
        `${metric} is exported by a running app (from start: an alert needs the series)`,
      ).toBeGreaterThan(0);
      for (const { label, op, value } of matchers) {
        expect(
          seen.some((s) => label in s),
          `${metric} has label ${label}`,
        ).toBe(true);
        if (op === '=')
          expect(
            seen.some((s) => s[label] === value),
            `${metric}{${label}="${value}"} exists`,
          ).toBe(true);
      }
      for (const label of grouping(rule.expr))
        expect(
          seen.some((s) => label in s),
          `${metric} has label ${label} (grouped on)`,
        ).toBe(true);
    }
    // A $labels.x in the text is empty unless the expression keeps x.
    const text = `${rule.annotations['summary'] ?? ''} ${rule.annotations['description'] ?? ''}`;
    for (const m of text.matchAll(/\$labels\.(\w+)/g)) expect(grouping(rule.expr), `keeps ${m[1]}`).toContain(m[1]);
    expect(['warning', 'critical']).toContain(rule.labels.severity);
    expect(rule.annotations['summary']).toBeTruthy();
    // The runbook: what to look at and what to do.
    expect((rule.annotations['description'] ?? '').length, 'a runbook sentence').toBeGreaterThan(80);
  });

  it('has an alert for every failure mode an SRE must hear about', () => {
    const alerting = (metric: string, matcher?: string) =>
      rules.filter((r) => selectors(r.expr).some((s) => s.metric === metric) && (!matcher || r.expr.includes(matcher)));
    const modes: Record<string, Rule[]> = {
      'jobs failed for good': alerting('retain_failed_jobs'),
      'attempts whose outcome is unknown': alerting('retain_unreconciled_attempts'),
      'refunds awaiting the processor': alerting('retain_refunds_awaiting_notification'),
      'refunds not sent (stuck Processing)': alerting('retain_refunds_oldest_unsent_seconds'),
      'refunds the processor holds without a final answer (Stripe pending)': alerting(
        'retain_refunds_oldest_held_seconds',
      ),
      'webhooks dead-lettered': alerting('retain_webhook_messages_dead_total'),
      'outbox rows not enqueued': alerting('retain_outbox_oldest_unpublished_seconds'),
      'queue backlog': alerting('retain_queue_depth', 'state="waiting"'),
      'review backlog': alerting('retain_queue_depth', 'queue="submission.review"'),
      'queue depths unreadable (Redis)': alerting('retain_queue_depth_errors_total'),
      'Postgres pool exhausted': alerting('retain_db_pool_connections', 'state="waiting"'),
      "no pod of a money gauge's owner scraped": alerting('retain_refunds_awaiting_notification', 'absent('),
    };
    const missing = Object.entries(modes)
      .filter(([, found]) => found.length === 0)
      .map(([mode]) => mode);
    expect(missing).toEqual([]);
  });
});
