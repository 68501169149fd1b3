import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { render, type K8sObject } from './kustomize-render';

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

/** KEDA is a CRD: its objects are checked by hand against the fields KEDA requires. */
function validateKeda(o: K8sObject): void {
  if (o.kind === 'ScaledObject') {
    expect(o.spec.scaleTargetRef.name).toBeTruthy();
    expect(o.spec.triggers.length).toBeGreaterThan(0);
    for (const t of o.spec.triggers) {
      expect(t.type).toBe('redis');
      expect(t.metadata.listName).toMatch(/^\{retain\}:[a-z.]+:wait$/);
      expect(Number(t.metadata.listLength)).toBeGreaterThan(0);
      expect(t.authenticationRef.name).toBeTruthy();
    }
  } else if (o.kind === 'TriggerAuthentication') {
    expect(o.spec.secretTargetRef.map((r: any) => r.parameter)).toEqual(expect.arrayContaining(['address']));
  } else {
    throw new Error(`unknown keda kind ${o.kind}`);
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
        expect(c.readinessProbe.httpGet.path).toBe('/readyz');
        expect(c.resources.requests.cpu).toBeTruthy();
        expect(c.resources.limits.memory).toBeTruthy();
        expect(c.securityContext).toMatchObject({
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          runAsNonRoot: true,
          capabilities: { drop: ['ALL'] },
          seccompProfile: { type: 'RuntimeDefault' },
        });
        expect(c.image).toMatch(/:[\w.-]+$/);
        // Secrets are references only.
        for (const e of c.env ?? []) if (/KEY|URL|SECRET/.test(e.name)) expect(e.valueFrom?.secretKeyRef).toBeDefined();
      }
      expect(d.spec.template.metadata.labels['app.kubernetes.io/part-of']).toBe('retain');
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

  it('lets only the webhook dispatcher reach the internet', () => {
    const internet = of('NetworkPolicy').filter((p) =>
      (p.spec.egress ?? []).some((e: any) => (e.to ?? []).some((t: any) => t.ipBlock?.cidr === '0.0.0.0/0')),
    );
    expect(internet).toHaveLength(1);
    expect(internet[0]!.spec.podSelector.matchLabels).toEqual({ 'app.kubernetes.io/name': 'webhook-dispatcher' });
    expect(internet[0]!.spec.egress[0].to[0].ipBlock.except).toEqual(
      expect.arrayContaining(['10.0.0.0/8', '169.254.0.0/16']),
    );
  });

  it('exposes intake-api through an Ingress in prod only', () => {
    expect(of('Ingress').length).toBe(dir === 'overlays/prod' ? 1 : 0);
    if (dir !== 'base') expect(objects.every((o) => o.metadata.namespace)).toBe(true);
  });
});

describe('docker', () => {
  const dockerfile = readFileSync(path.join(root, 'docker/Dockerfile'), 'utf8');

  it('builds any app from one multi-stage Dockerfile, as a non-root user, with a health check', () => {
    expect(dockerfile.match(/^FROM /gm)!.length).toBeGreaterThanOrEqual(3);
    expect(dockerfile).toMatch(/^ARG APP=/m);
    expect(dockerfile).toMatch(/^USER node$/m);
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
});
