import { spawnSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';

/**
 * Renders a kustomization. `render` uses the real kustomize (`kubectl kustomize`) when kubectl is
 * on the PATH, and falls back to `renderOffline`: a renderer for the subset of kustomize our
 * manifests use: resources (files and directories), namespace, labels (pairs, templates), images
 * (kustomize semantics: match on the image name, then newName/newTag/digest) and strategic-merge
 * patches matched by kind and name (maps merge, lists are replaced). Anything else in a
 * kustomization fails loudly, so the subset cannot drift; a test compares both when kubectl exists.
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

/** Splits an image reference into name, tag and digest the way kustomize does. */
export function parseImage(image: string): { name: string; tag?: string; digest?: string } {
  const [rest, digest] = image.split('@') as [string, string | undefined];
  const colon = rest.lastIndexOf(':');
  const hasTag = colon > rest.lastIndexOf('/');
  return {
    name: hasTag ? rest.slice(0, colon) : rest,
    ...(hasTag && { tag: rest.slice(colon + 1) }),
    ...(digest !== undefined && { digest }),
  };
}

/**
 * kustomize's image transformer: an entry applies when its `name` equals the image's name
 * (registry and path, without tag or digest); `newName` replaces the name, `newTag` the tag,
 * `digest` replaces tag and digest; what is not given is kept. Names are never matched on newName.
 */
export function transformImage(
  image: string,
  entry: { name: string; newName?: string; newTag?: string; digest?: string },
): string {
  const ref = parseImage(image);
  if (ref.name !== entry.name) return image;
  const name = entry.newName ?? ref.name;
  if (entry.digest) return `${name}@${entry.digest}`;
  const tag = entry.newTag ?? ref.tag;
  return `${name}${tag !== undefined ? `:${tag}` : ''}${entry.newTag === undefined && ref.digest ? `@${ref.digest}` : ''}`;
}

let kubectl: boolean | undefined;

/** True when `kubectl kustomize` can run here (cached). */
export function hasKubectl(): boolean {
  kubectl ??= spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' }).status === 0;
  return kubectl;
}

/** The real kustomize through kubectl. */
export function renderWithKubectl(dir: string): K8sObject[] {
  const r = spawnSync('kubectl', ['kustomize', dir], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) throw new Error(`kubectl kustomize ${dir} failed: ${r.stderr}`);
  return parseAllDocuments(r.stdout)
    .map((d) => d.toJS() as K8sObject)
    .filter((d) => d !== null && d !== undefined);
}

export function render(dir: string): K8sObject[] {
  return hasKubectl() ? renderWithKubectl(dir) : renderOffline(dir);
}

export function renderOffline(dir: string): K8sObject[] {
  const k = readYaml(path.join(dir, 'kustomization.yaml'))[0];
  for (const key of Object.keys(k))
    if (!SUPPORTED.has(key)) throw new Error(`unsupported kustomize field ${key} in ${dir}`);
  let objects: K8sObject[] = [];
  for (const r of k.resources ?? []) {
    const p = path.join(dir, r);
    objects.push(...(statSync(p).isDirectory() ? renderOffline(p) : (readYaml(p) as K8sObject[])));
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
        for (const c of [...(t?.spec?.initContainers ?? []), ...(t?.spec?.containers ?? [])])
          c.image = transformImage(String(c.image), img);
      }
    }
  }
  if (k.namespace) {
    objects = objects.map((o) => (CLUSTER_SCOPED.has(o.kind) ? o : merge(o, { metadata: { namespace: k.namespace } })));
  }
  return JSON.parse(JSON.stringify(objects));
}
