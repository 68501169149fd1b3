import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';

/**
 * An offline renderer for the subset of kustomize our manifests use (no kustomize binary is
 * available in CI): resources (files and directories), namespace, labels (pairs, templates),
 * images (newName/newTag) and strategic-merge patches matched by kind and name (maps merge,
 * lists are replaced). Anything else in a kustomization fails loudly, so the subset cannot drift.
 */
export type K8sObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [k: string]: any;
};

const SUPPORTED = new Set(['apiVersion', 'kind', 'resources', 'namespace', 'labels', 'images', 'patches']);
const CLUSTER_SCOPED = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding']);

function readYaml(file: string): any[] {
  return parseAllDocuments(readFileSync(file, 'utf8'))
    .map((d) => d.toJS())
    .filter((d) => d !== null && d !== undefined);
}

function merge(base: any, patch: any): any {
  if (Array.isArray(patch) || typeof patch !== 'object' || patch === null) return patch;
  const out = { ...(base ?? {}) };
  for (const [k, v] of Object.entries(patch)) out[k] = merge(base?.[k], v);
  return out;
}

function podTemplates(o: K8sObject): any[] {
  if (o.kind === 'Job') return [o.spec?.template];
  if (['Deployment', 'StatefulSet', 'DaemonSet'].includes(o.kind)) return [o.spec?.template];
  return [];
}

export function render(dir: string): K8sObject[] {
  const k = readYaml(path.join(dir, 'kustomization.yaml'))[0];
  for (const key of Object.keys(k))
    if (!SUPPORTED.has(key)) throw new Error(`unsupported kustomize field ${key} in ${dir}`);
  let objects: K8sObject[] = [];
  for (const r of k.resources ?? []) {
    const p = path.join(dir, r);
    objects.push(...(statSync(p).isDirectory() ? render(p) : (readYaml(p) as K8sObject[])));
  }
  for (const patch of k.patches ?? []) {
    for (const doc of readYaml(path.join(dir, patch.path))) {
      const i = objects.findIndex((o) => o.kind === doc.kind && o.metadata.name === doc.metadata.name);
      if (i < 0) throw new Error(`patch target ${doc.kind}/${doc.metadata.name} not found`);
      objects[i] = merge(objects[i], doc);
    }
  }
  for (const l of k.labels ?? []) {
    objects = objects.map((o) => {
      const next = merge(o, { metadata: { labels: l.pairs } });
      if (l.includeTemplates)
        for (const t of podTemplates(next)) if (t) t.metadata = merge(t.metadata, { labels: l.pairs });
      return next;
    });
  }
  for (const img of k.images ?? []) {
    for (const o of objects) {
      for (const t of podTemplates(o)) {
        for (const c of t?.spec?.containers ?? []) {
          const [name] = String(c.image).split(':');
          if (name === img.name || name === img.newName)
            c.image = `${img.newName ?? img.name}:${img.newTag ?? 'latest'}`;
        }
      }
    }
  }
  if (k.namespace) {
    objects = objects.map((o) => (CLUSTER_SCOPED.has(o.kind) ? o : merge(o, { metadata: { namespace: k.namespace } })));
  }
  return JSON.parse(JSON.stringify(objects));
}
