import { execFileSync } from 'node:child_process';
import { createPrivateKey, generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES, jobLockMs, loadConfig, type AppName } from '@retain/config';
import { duePushesSql } from '@retain/db';
import { RetainMetrics } from '@retain/platform';
import { QUEUES, QUEUE_NAMES, queuesConsumedBy } from '@retain/queues';
import {
  hasKubectl,
  render,
  renderOffline,
  renderWithKubectl,
  transformImage,
  type K8sObject,
} from './kustomize-render';

const root = path.resolve(__dirname, '../..');
const WORKERS = ['submission-validator', 'retry-worker', 'refund-batcher', 'webhook-dispatcher'];
const APPS = ['intake-api', ...WORKERS];

const MODELS: Record<string, () => Promise<any>> = {
  'apps/v1/Deployment': async () => (await import('kubernetes-models/apps/v1/Deployment')).Deployment,
  'v1/Service': async () => (await import('kubernetes-models/v1/Service')).Service,
  'v1/ConfigMap': async () => (await import('kubernetes-models/v1/ConfigMap')).ConfigMap,
  'v1/ServiceAccount': async () => (await import('kubernetes-models/v1/ServiceAccount')).ServiceAccount,
  'batch/v1/Job': async () => (await import('kubernetes-models/batch/v1/Job')).Job,
  'policy/v1/PodDisruptionBudget': async () =>
    (await import('kubernetes-models/policy/v1/PodDisruptionBudget')).PodDisruptionBudget,
  'autoscaling/v2/HorizontalPodAutoscaler': async () =>
    (await import('kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler')).HorizontalPodAutoscaler,
  'networking.k8s.io/v1/NetworkPolicy': async () =>
    (await import('kubernetes-models/networking.k8s.io/v1/NetworkPolicy')).NetworkPolicy,
  'networking.k8s.io/v1/Ingress': async () => (await import('kubernetes-models/networking.k8s.io/v1/Ingress')).Ingress,
};

/** Longest graceful shutdown of an app (libs/platform bootstrap.ts SHUTDOWN_TIMEOUT_MS). */
const SHUTDOWN_TIMEOUT_S = 60;

let jwePem: string | undefined;

/** Stand-ins for the values of `retain-secrets`: shaped like real ones, so the config parses them. */
const SECRET_PLACEHOLDERS: Record<string, () => string> = {
  DATABASE_URL: () => 'postgres://retain:placeholder@postgres.example:5432/retain',
  REDIS_URL: () => 'redis://:placeholder@redis.example:6379',
  REDIS_ADDRESS: () => 'redis.example:6379',
  REDIS_PASSWORD: () => 'placeholder',
  CARD_DATA_KEY: () => `k1:${Buffer.alloc(32, 9).toString('base64')}`,
  CARD_FINGERPRINT_KEY: () => `fp1:${Buffer.alloc(32, 10).toString('base64')}`,
  CARD_JWE_PRIVATE_KEY: () =>
    (jwePem ??= generateKeyPairSync('rsa', { modulusLength: 2048 })
      .privateKey.export({ type: 'pkcs8', format: 'pem' })
      .toString()),
};

/** The environment a container gets: envFrom ConfigMaps, then env (values, ConfigMap keys, placeholder secrets). */
function containerEnv(container: any, objects: K8sObject[]): Record<string, string> {
  const configMap = (name: string): Record<string, string> => {
    const cm = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === name);
    expect(cm, `ConfigMap ${name}`).toBeDefined();
    return cm!['data'] ?? {};
  };
  const env: Record<string, string> = {};
  for (const from of container.envFrom ?? []) {
    if (from.configMapRef) Object.assign(env, configMap(from.configMapRef.name));
    if (from.secretRef) throw new Error('use secretKeyRef per variable, so the needed keys are explicit');
  }
  for (const e of container.env ?? []) {
    if (e.value !== undefined) env[e.name] = String(e.value);
    else if (e.valueFrom?.configMapKeyRef) {
      env[e.name] = configMap(e.valueFrom.configMapKeyRef.name)[e.valueFrom.configMapKeyRef.key]!;
    } else if (e.valueFrom?.secretKeyRef) {
      expect(e.valueFrom.secretKeyRef.name).toBe('retain-secrets');
      const placeholder = SECRET_PLACEHOLDERS[e.valueFrom.secretKeyRef.key];
      expect(placeholder, `placeholder for secret key ${e.valueFrom.secretKeyRef.key}`).toBeDefined();
      env[e.name] = placeholder!();
    }
  }
  return env;
}

/** KEDA is a CRD: its objects are checked by hand against the fields KEDA requires. */
function validateKeda(o: K8sObject): void {
  if (o.kind === 'ScaledObject') {
    expect(o.spec.scaleTargetRef.name).toBeTruthy();
    expect(o.spec.triggers.length).toBeGreaterThan(0);
    for (const t of o.spec.triggers) {
      expect(['redis', 'postgresql']).toContain(t.type);
      if (t.type === 'redis') {
        expect(t.metadata.listName).toMatch(/^\{retain\}:[a-z.]+:wait$/);
        expect(Number(t.metadata.listLength)).toBeGreaterThan(0);
      } else {
        expect(t.metadata.query).toMatch(/^SELECT /);
        expect(Number(t.metadata.targetQueryValue)).toBeGreaterThan(0);
      }
      expect(t.authenticationRef.name).toBeTruthy();
    }
  } else if (o.kind === 'TriggerAuthentication') {
    // redis: address (and password); postgresql: a connection string.
    const parameters = o.spec.secretTargetRef.map((r: any) => r.parameter);
    expect(parameters.includes('address') || parameters.includes('connection'), o.metadata.name).toBe(true);
  } else {
    throw new Error(`unknown keda kind ${o.kind}`);
  }
}

/** Every metric name the apps export (the alert rules may only use these). */
const exportedMetrics = (): Set<string> =>
  new Set(
    new RetainMetrics('test').registry
      .getMetricsAsArray()
      .flatMap((m) => [m.name, `${m.name}_bucket`, `${m.name}_sum`, `${m.name}_count`]),
  );

/** PodMonitor (the Prometheus Operator's CRD): scrapes /metrics on each app's named metrics port. */
function validatePodMonitor(o: K8sObject): void {
  expect(o.spec.selector.matchLabels).toEqual({ 'app.kubernetes.io/part-of': 'retain' });
  expect(o.spec.podMetricsEndpoints.map((e: any) => [e.port, e.path])).toEqual([
    ['http', '/metrics'],
    ['health', '/metrics'],
  ]);
}

/** PrometheusRule is the Prometheus Operator's CRD: checked by hand, and against our metrics. */
function validatePrometheusRule(o: K8sObject): void {
  expect(o.kind).toBe('PrometheusRule');
  const metrics = exportedMetrics();
  expect(o.spec.groups.length).toBeGreaterThan(0);
  for (const g of o.spec.groups) {
    expect(g.name).toBeTruthy();
    expect(g.rules.length).toBeGreaterThan(0);
    for (const r of g.rules) {
      expect(r.alert, 'alerting rules only').toMatch(/^[A-Z][A-Za-z0-9]+$/);
      expect(typeof r.expr).toBe('string');
      expect(r.for ?? '0s').toMatch(/^\d+[smh]$/);
      expect(['warning', 'critical']).toContain(r.labels.severity);
      expect(r.annotations.summary).toBeTruthy();
      const used = String(r.expr).match(/\bretain_[a-z_]+/g) ?? [];
      expect(used.length, `${r.alert} uses a retain metric`).toBeGreaterThan(0);
      for (const m of used) expect(metrics.has(m), `${r.alert}: metric ${m} is exported`).toBe(true);
    }
  }
}

describe.each(['base', 'overlays/dev', 'overlays/prod'])('kustomize %s', (dir) => {
  const objects = render(path.join(root, 'k8s', dir));
  const of = (kind: string) => objects.filter((o) => o.kind === kind);

  it('renders objects that validate against the Kubernetes schemas', async () => {
    expect(objects.length).toBeGreaterThan(15);
    for (const o of objects) {
      if (o.apiVersion.startsWith('keda.sh/')) {
        validateKeda(o);
        continue;
      }
      if (o.apiVersion === 'monitoring.coreos.com/v1') {
        if (o.kind === 'PodMonitor') validatePodMonitor(o);
        else validatePrometheusRule(o);
        continue;
      }
      const load = MODELS[`${o.apiVersion}/${o.kind}`];
      expect(load, `${o.apiVersion}/${o.kind} has a model`).toBeDefined();
      const Model = await load!();
      expect(() => new Model(o).validate(), `${o.kind}/${o.metadata.name}`).not.toThrow();
    }
  });

  it('gives every app a hardened Deployment with probes, resources and a long grace period', () => {
    expect(
      of('Deployment')
        .map((d) => d.metadata.name)
        .sort(),
    ).toEqual([...APPS].sort());
    for (const d of of('Deployment')) {
      const pod = d.spec.template.spec;
      expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(60);
      expect(pod.securityContext.runAsNonRoot).toBe(true);
      for (const c of pod.containers) {
        expect(c.livenessProbe.httpGet.path).toBe('/healthz');
        expect(c.startupProbe.httpGet.path).toBe('/healthz');
        expect(c.resources.requests.cpu).toBeTruthy();
        expect(c.resources.limits.memory).toBeTruthy();
        expect(c.securityContext).toMatchObject({
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          runAsNonRoot: true,
          capabilities: { drop: ['ALL'] },
          seccompProfile: { type: 'RuntimeDefault' },
        });
        if (dir === 'base') expect(c.image).toBe(`retain/${d.metadata.name}`);
        else expect(c.image).toMatch(/^registry\.example\.com\/retain\/[a-z-]+:[\w.-]+$/);
        // Secrets are references only.
        for (const e of c.env ?? []) if (/KEY|URL|SECRET/.test(e.name)) expect(e.valueFrom?.secretKeyRef).toBeDefined();
      }
      expect(d.spec.template.metadata.labels['app.kubernetes.io/part-of']).toBe('retain');
    }
  });

  it('keeps intake-api in its Service while Postgres or Redis is down, so it answers 503 RET900 itself', () => {
    // /readyz is down while a back end does not answer within 2 s: as intake-api's readiness it took every
    // pod out of the Service during an outage, and merchants got the ingress's HTML 503 (no RET900 body, no
    // Retry-After; decisions §16). Its readiness says the process serves; the workers (no Service) keep
    // /readyz: it only holds a rollout back while a new pod cannot reach its back ends.
    for (const d of of('Deployment')) {
      const c = d.spec.template.spec.containers[0];
      const expected = d.metadata.name === 'intake-api' ? '/healthz' : '/readyz';
      expect(c.readinessProbe.httpGet.path, d.metadata.name).toBe(expected);
    }
    // Workers not Ready during an outage must not block a node drain.
    for (const pdb of of('PodDisruptionBudget')) expect(pdb.spec.unhealthyPodEvictionPolicy).toBe('AlwaysAllow');
  });

  it('maps every image to the registry, with prod pinned to a release tag (never :latest)', () => {
    const images = [...of('Deployment'), ...of('Job')].flatMap((o) =>
      o.spec.template.spec.containers.map((c: any) => String(c.image)),
    );
    expect(images).toHaveLength(APPS.length + 1);
    if (dir === 'base') {
      // The base keeps the plain names the overlays' `images:` entries match on.
      for (const i of images) expect(i).toMatch(/^retain\/[a-z-]+$/);
      return;
    }
    for (const i of images) expect(i).toMatch(/^registry\.example\.com\/retain\/[a-z-]+:[\w.-]+$/);
    if (dir === 'overlays/prod') for (const i of images) expect(i).toMatch(/:\d+\.\d+\.\d+$/);
  });

  it('gives every container (Deployments and the Job) an environment its app config accepts', () => {
    const workloads = [...of('Deployment'), ...of('Job')];
    expect(workloads).toHaveLength(APPS.length + 1);
    for (const w of workloads) {
      for (const c of w.spec.template.spec.containers) {
        const env = containerEnv(c, objects);
        const app = env['APP'];
        expect(app, `${w.kind}/${w.metadata.name} sets APP`).toBeDefined();
        if (app === 'migrate') {
          expect(loadConfig('migrate', env).databaseUrl).toBe(SECRET_PLACEHOLDERS['DATABASE_URL']!());
          continue;
        }
        expect(APPS).toContain(app);
        expect(w.metadata.name).toBe(app);
        const config = loadConfig(app as AppName, env);
        expect(config.app).toBe(app);
        expect(config.nodeEnv).toBe(dir === 'overlays/dev' ? 'development' : 'production');
        // The probes and Prometheus port are the ones the app listens on.
        const listens = app === 'intake-api' ? config.port : config.healthPort;
        expect(c.ports.map((p: any) => p.containerPort)).toContain(listens);
        expect(w.spec.template.metadata.annotations['prometheus.io/port']).toBe(String(listens));
      }
    }
  });

  it('names only variables the apps read: a misspelt ConfigMap key or env name would be ignored silently', () => {
    // APP is read by docker/entrypoint.sh (which program to run); every other name by libs/config.
    const known = new Set([...CONFIG_VARIABLES, 'APP']);
    const cm = of('ConfigMap').find((c) => c.metadata.name === 'retain-config')!;
    const names = [
      ...Object.keys(cm['data'] ?? {}),
      ...[...of('Deployment'), ...of('Job')].flatMap((w) =>
        w.spec.template.spec.containers.flatMap((c: any) => (c.env ?? []).map((e: any) => String(e.name))),
      ),
    ];
    expect(names.length).toBeGreaterThan(20);
    expect(names.filter((n) => !known.has(n))).toEqual([]);
  });

  it('starts every app during the JWE key rotation README "Kubernetes" describes (the single key kept beside the list)', () => {
    const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
    // Step 2 adds the new key after the old one (every pod can decrypt it before any publishes it first),
    // then a second rollout puts it first.
    const lists = [...readme.matchAll(/`CARD_JWE_PRIVATE_KEYS: (retain-\d:\/run\/retain-jwe\/[^`]+)`/g)].map(
      (m) => m[1]!,
    );
    expect(lists, 'the rotation steps in README').toHaveLength(2);
    const dir = mkdtempSync(path.join(tmpdir(), 'retain-jwe-rotation-'));
    try {
      // retain-1.pem is the key retain-secrets holds (step 1), retain-2.pem the new one.
      writeFileSync(path.join(dir, 'retain-1.pem'), SECRET_PLACEHOLDERS['CARD_JWE_PRIVATE_KEY']!());
      writeFileSync(
        path.join(dir, 'retain-2.pem'),
        generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }),
      );
      for (const d of of('Deployment')) {
        const env = containerEnv(d.spec.template.spec.containers[0], objects);
        expect(env['CARD_JWE_KEY_ID']).toBe('retain-1');
        const kids = (list: string) =>
          loadConfig(env['APP'] as AppName, {
            ...env,
            CARD_JWE_PRIVATE_KEYS: list.replaceAll('/run/retain-jwe', dir),
          }).jweKeys.map((k) => k.kid);
        expect(lists.map(kids), d.metadata.name).toEqual([
          ['retain-1', 'retain-2'],
          ['retain-2', 'retain-1'],
        ]);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('leaves replica counts to the autoscalers, and drains intake-api before stopping it', () => {
    const autoscaled = new Set([
      ...of('HorizontalPodAutoscaler').map((h) => h.spec.scaleTargetRef.name),
      ...of('ScaledObject').map((s) => s.spec.scaleTargetRef.name),
    ]);
    expect([...autoscaled].sort()).toEqual([...APPS].sort());
    for (const d of of('Deployment')) expect(d.spec.replicas, d.metadata.name).toBeUndefined();

    const lockS = jobLockMs(of('ConfigMap').find((c) => c.metadata.name === 'retain-config')!['data']) / 1000;
    for (const d of of('Deployment')) {
      const pod = d.spec.template.spec;
      const preStop = pod.containers[0].lifecycle?.preStop;
      if (d.metadata.name === 'intake-api') expect(preStop.exec.command).toEqual(['sleep', '5']);
      const preStopS = preStop ? Number(preStop.exec.command[1]) : 0;
      // SIGTERM comes after preStop; the pod must then have time to release its longest job lock
      // and to finish the whole graceful shutdown before the kubelet kills it.
      expect(pod.terminationGracePeriodSeconds, d.metadata.name).toBeGreaterThan(preStopS + lockS);
      expect(pod.terminationGracePeriodSeconds, d.metadata.name).toBeGreaterThan(preStopS + SHUTDOWN_TIMEOUT_S);
    }
  });

  it('commits no secret values, and runs migrations as a one-shot Job', () => {
    expect(of('Secret')).toEqual([]);
    expect(of('Job').map((j) => j.metadata.name)).toEqual(['retain-migrate']);
  });

  it('has PDBs for every app, an HPA for intake-api and a queue-depth ScaledObject per worker', () => {
    expect(of('PodDisruptionBudget')).toHaveLength(APPS.length);
    expect(of('HorizontalPodAutoscaler').map((h) => h.spec.scaleTargetRef.name)).toEqual(['intake-api']);
    const scaled = of('ScaledObject');
    expect(scaled.map((s) => s.spec.scaleTargetRef.name).sort()).toEqual([...WORKERS].sort());
  });

  it('scales each worker on exactly the wait lists the queue record marks for KEDA', () => {
    const prefix = of('ConfigMap').find((c) => c.metadata.name === 'retain-config')!['data']['QUEUE_PREFIX'];
    expect(prefix).toBe('{retain}');
    const consumers = [...new Set(QUEUE_NAMES.map((q) => QUEUES[q].consumer))];
    expect(consumers.sort()).toEqual([...WORKERS].sort());
    for (const app of consumers) {
      const expected = queuesConsumedBy(app).flatMap((q) => {
        const keda = QUEUES[q].keda;
        return keda ? [{ listName: `${prefix}:${q}:wait`, listLength: String(keda.listLength) }] : [];
      });
      const scaled = of('ScaledObject').filter((s) => s.spec.scaleTargetRef.name === app);
      expect(scaled.length, app).toBe(1);
      const triggers = scaled[0]!.spec.triggers
        .filter((t: any) => t.type === 'redis')
        .map((t: any) => ({
          listName: t.metadata.listName,
          listLength: String(t.metadata.listLength),
        }));
      expect(triggers, `${app}'s KEDA triggers`).toEqual(expected);
    }
  });

  it('scales the webhook dispatcher on the pushes waiting in Postgres, not on its wake-up jobs', () => {
    // A webhook.deliver job only wakes the pump and completes at once, and a whole announce enqueues one:
    // its wait list stays near empty however long the backlog. The work is the webhook_messages rows.
    expect(QUEUES['webhook.deliver'].keda).toBeNull();
    const [so, ...more] = of('ScaledObject').filter((s) => s.spec.scaleTargetRef.name === 'webhook-dispatcher');
    expect(more).toEqual([]);
    // A replica per dispatcher's worth of slots waiting: two pipes of the queue's concurrency (DeliveryPump IN_FLIGHT).
    const perReplica = 2 * QUEUES['webhook.deliver'].concurrency;
    expect(perReplica).toBe(128);
    const oneLine = (sql: string) => sql.replace(/\s+/g, ' ').trim();
    expect(so!.spec.triggers).toHaveLength(1);
    const [trigger] = so!.spec.triggers;
    expect(trigger.type).toBe('postgresql');
    expect(String(trigger.metadata.targetQueryValue)).toBe(String(perReplica));
    // Capped where it would ask for more than maxReplicaCount anyway (the count stays cheap in a long backlog).
    expect(oneLine(trigger.metadata.query)).toBe(oneLine(duePushesSql(so!.spec.maxReplicaCount * perReplica)));
    const auth = of('TriggerAuthentication').find((a) => a.metadata.name === trigger.authenticationRef.name);
    expect(auth?.spec.secretTargetRef).toEqual([
      { parameter: 'connection', name: 'retain-secrets', key: 'DATABASE_URL' },
    ]);
  });

  it('alerts on jobs that failed for good in prod (the Prometheus Operator rule)', () => {
    const rules = of('PrometheusRule');
    if (dir !== 'overlays/prod') return void expect(rules).toEqual([]);
    const alerts = rules.flatMap((r) => r.spec.groups.flatMap((g: any) => g.rules));
    const failed = alerts.find((a: any) => a.alert === 'RetainJobsFailedForGood');
    expect(failed.expr).toContain('retain_failed_jobs');
    expect(failed.annotations.description).toContain('jobs redrive');
  });

  it('scrapes every app where its alert rules are evaluated: a PodMonitor beside the PrometheusRule (prod)', () => {
    // The operator does not read prometheus.io/* annotations: without a PodMonitor no series exists and
    // no alert can fire. Every app's pods carry a port named http (intake-api) or health (the workers).
    expect(of('PodMonitor').length).toBe(of('PrometheusRule').length > 0 ? 1 : 0);
    for (const d of of('Deployment')) {
      const names = d.spec.template.spec.containers.flatMap((c: any) => (c.ports ?? []).map((p: any) => p.name));
      expect(
        names.some((n: string) => n === 'http' || n === 'health'),
        d.metadata.name,
      ).toBe(true);
    }
  });

  it('lets the webhook dispatcher (any port) and the processor callers (HTTPS) reach the internet, never private ranges', () => {
    const internet = of('NetworkPolicy').filter((p) =>
      (p.spec.egress ?? []).some((e: any) => (e.to ?? []).some((t: any) => t.ipBlock?.cidr === '0.0.0.0/0')),
    );
    const selected = (p: any): string[] =>
      p.spec.podSelector.matchLabels?.['app.kubernetes.io/name']
        ? [p.spec.podSelector.matchLabels['app.kubernetes.io/name']]
        : p.spec.podSelector.matchExpressions.find((e: any) => e.key === 'app.kubernetes.io/name').values;
    // Stripe and Adyen are called by the apps that load ProcessorProviders (charges, lookups,
    // settlement: retry-worker; refunds: refund-batcher); pushes go to any port a webhook URL names.
    expect(internet.flatMap(selected).sort()).toEqual(['refund-batcher', 'retry-worker', 'webhook-dispatcher']);
    for (const p of internet) {
      expect(p.spec.egress[0].to[0].ipBlock.except).toEqual(expect.arrayContaining(['10.0.0.0/8', '169.254.0.0/16']));
      const ports = p.spec.egress[0].ports;
      if (selected(p).includes('webhook-dispatcher')) expect(ports).toBeUndefined();
      else expect(ports).toEqual([{ protocol: 'TCP', port: 443 }]);
    }
  });

  it('exposes intake-api through an Ingress in prod only, for the API, its docs and the portal only', () => {
    expect(of('Ingress').length).toBe(dir === 'overlays/prod' ? 1 : 0);
    if (dir !== 'base') expect(objects.every((o) => o.metadata.namespace)).toBe(true);
    for (const ing of of('Ingress')) {
      const paths = ing.spec.rules.flatMap((r: any) => r.http.paths);
      expect(paths.map((p: any) => `${p.pathType} ${p.path}`).sort()).toEqual(
        ['Exact /openapi.json', 'Prefix /docs', 'Prefix /portal', 'Prefix /retain', 'Prefix /v1', 'Prefix /v2'].sort(),
      );
      for (const p of paths) expect(p.backend.service.name).toBe('intake-api');
      // What an Ingress path covers (Prefix matches whole path segments): operations endpoints stay private.
      const routed = (url: string): boolean =>
        paths.some((p: any) =>
          p.pathType === 'Exact' ? url === p.path : url === p.path || url.startsWith(`${p.path}/`),
        );
      for (const url of ['/metrics', '/readyz', '/healthz', '/', '/v1metrics']) expect(routed(url), url).toBe(false);
      for (const url of [
        '/v1/retain/transactions',
        '/v2/retain/refunds',
        '/retain/keys',
        '/openapi.json',
        '/docs',
        '/portal/',
        '/portal/app.js',
      ])
        expect(routed(url), url).toBe(true);
      // Behind the ingress, intake-api trusts its X-Forwarded-For (the login brake keys on the client).
      const config = of('ConfigMap').find((c) => c.metadata.name === 'retain-config');
      expect(config?.data?.TRUST_PROXY).toMatch(/^[0-9./,]+$/);
    }
  });

  it('runs the migration Job in the first apply phase, with what it needs', () => {
    const phase = objects.filter((o) => o.metadata.labels?.['retain/phase'] === 'pre-deploy');
    expect(phase.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
      'ConfigMap/retain-config',
      'Job/retain-migrate',
      'ServiceAccount/retain',
    ]);
  });
});

describe('kustomize renderer', () => {
  it('applies images like kustomize: match on the name only, keep what is not replaced', () => {
    const entry = { name: 'retain/api', newName: 'reg.example/retain/api', newTag: '1.2.3' };
    expect(transformImage('retain/api', entry)).toBe('reg.example/retain/api:1.2.3');
    expect(transformImage('retain/api:old', entry)).toBe('reg.example/retain/api:1.2.3');
    // An entry never matches on its newName (real kustomize does not).
    expect(transformImage('reg.example/retain/api:latest', entry)).toBe('reg.example/retain/api:latest');
    expect(transformImage('retain/api:old', { name: 'retain/api', newName: 'x/api' })).toBe('x/api:old');
    expect(transformImage('retain/api', { name: 'retain/api', newName: 'x/api' })).toBe('x/api');
    expect(transformImage('host:5000/retain/api', { name: 'host:5000/retain/api', newTag: '2' })).toBe(
      'host:5000/retain/api:2',
    );
    expect(transformImage('retain/api:1', { name: 'retain/api', digest: 'sha256:abc' })).toBe('retain/api@sha256:abc');
  });

  it.skipIf(!hasKubectl()).each(['base', 'overlays/dev', 'overlays/prod'])(
    'renders %s offline exactly as kubectl kustomize does',
    (dir) => {
      const key = (o: K8sObject) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
      const byKey = (list: K8sObject[]) => Object.fromEntries(list.map((o) => [key(o), o]));
      const real = byKey(renderWithKubectl(path.join(root, 'k8s', dir)));
      const offline = byKey(renderOffline(path.join(root, 'k8s', dir)));
      expect(Object.keys(offline).sort()).toEqual(Object.keys(real).sort());
      for (const k of Object.keys(real)) expect(offline[k], k).toEqual(real[k]);
    },
  );
});

describe('docker', () => {
  const dockerfile = readFileSync(path.join(root, 'docker/Dockerfile'), 'utf8');

  it('builds any app from one multi-stage Dockerfile, as a non-root user, with a health check', () => {
    expect(dockerfile.match(/^FROM /gm)!.length).toBeGreaterThanOrEqual(3);
    expect(dockerfile).toMatch(/^ARG APP=/m);
    // Numeric: runAsNonRoot (the README's one-off CLI pod sets no runAsUser) can only verify a numeric user.
    expect(dockerfile).toMatch(/^USER 1000:1000$/m);
    expect(dockerfile).toMatch(/^HEALTHCHECK /m);
    expect(dockerfile).toMatch(/npm prune --omit=dev/);
    expect(dockerfile).not.toMatch(/^RUN .*npm ci/m);
    expect(dockerfile).toMatch(/^ENTRYPOINT /m);
  });

  it('composes Postgres, Redis with AOF and noeviction, a one-shot migration and the five apps', () => {
    const compose = parse(readFileSync(path.join(root, 'docker/compose.yaml'), 'utf8'), { merge: true });
    const cmd = compose.services.redis.command.join(' ');
    expect(cmd).toContain('--appendonly yes');
    expect(cmd).toContain('--maxmemory-policy noeviction');
    expect(compose.services.migrate.restart).toBe('no');
    for (const app of APPS) {
      expect(compose.services[app], app).toBeDefined();
      expect(compose.services[app].depends_on.migrate.condition).toBe('service_completed_successfully');
    }
  });

  it('gives the compose apps a development JWE key, so GET /v1/retain/keys and JWE cards work', () => {
    const compose = parse(readFileSync(path.join(root, 'docker/compose.yaml'), 'utf8'), { merge: true });
    const envFile = Object.fromEntries(
      readFileSync(path.join(root, 'docker/.env.example'), 'utf8')
        .split('\n')
        .filter((l) => /^[A-Z_]+=/.test(l))
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    const keyFile = envFile['CARD_JWE_PRIVATE_KEY_FILE']!;
    expect(keyFile).toBe('/run/retain-keys/jwe.pem');
    const keygen = compose.services['dev-keys'];
    expect(keygen.restart).toBe('no');
    expect(keygen.volumes).toEqual(['devkeys:/keys']);
    expect(keygen.environment.KEY_FILE).toBe('/keys/jwe.pem');
    for (const app of APPS) {
      expect(compose.services[app].volumes, app).toContain(`devkeys:${path.posix.dirname(keyFile)}:ro`);
      expect(compose.services[app].depends_on['dev-keys'].condition).toBe('service_completed_successfully');
    }
    // The migration needs no key: it loads the database-only config from the same env file.
    expect(loadConfig('migrate', envFile).databaseUrl).toBe(envFile['DATABASE_URL']);

    // Run the key generator here: it writes a key the apps' config accepts, once.
    const dir = mkdtempSync(path.join(tmpdir(), 'retain-devkeys-'));
    try {
      const file = path.join(dir, 'jwe.pem');
      const [node, flag, script] = keygen.command as string[];
      expect([node, flag]).toEqual(['node', '-e']);
      const run = () => execFileSync(process.execPath, ['-e', script!], { env: { KEY_FILE: file }, encoding: 'utf8' });
      expect(run()).toContain('written');
      const pem = readFileSync(file, 'utf8');
      const config = loadConfig('intake-api', { ...envFile, CARD_JWE_PRIVATE_KEY_FILE: file });
      expect(config.jweKeys.map((k) => k.privateKeyPem)).toEqual([pem]);
      expect(createPrivateKey(pem).asymmetricKeyType).toBe('rsa');
      expect(run()).toContain('kept');
      expect(readFileSync(file, 'utf8')).toBe(pem);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
