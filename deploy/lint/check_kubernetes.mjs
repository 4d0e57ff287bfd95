// Offline validation of deploy/kubernetes/ (nothing is applied): kustomize base and overlays are
// rendered here (resources, namespace, images, strategic-merge patches: maps merge, lists of
// named items merge by name) and every object, and every stand-alone manifest beside them, is
// validated against the Kubernetes OpenAPI schemas of kubernetes-models. Then the properties
// docs/deploy.md promises are checked: gRPC probes, a headless Service, a PodDisruptionBudget and
// an HPA on the waiting-requests metric that select / target the Deployment, resource requests,
// Prometheus annotations, and an Indexed sweep Job that maps JOB_COMPLETION_INDEX to --shard.
// Usage: node check_kubernetes.mjs [deploy/kubernetes]; exit 0 if everything checks out.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import { Deployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { Job } from 'kubernetes-models/batch/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Service, PersistentVolumeClaim } from 'kubernetes-models/v1';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = process.argv[2] ?? path.join(here, '..', 'kubernetes');
const models = {
  'apps/v1/Deployment': Deployment, 'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'batch/v1/Job': Job, 'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'v1/ConfigMap': ConfigMap, 'v1/Service': Service, 'v1/PersistentVolumeClaim': PersistentVolumeClaim,
};
const errors = [];
const check = (ok, message) => { if (!ok) errors.push(message); };
const loadAll = (p) => YAML.parseAllDocuments(fs.readFileSync(p, 'utf8')).map((d) => d.toJS()).filter(Boolean);

function merge(target, patch) {
  if (Array.isArray(target) && Array.isArray(patch)) {
    if (!patch.every((x) => x && typeof x === 'object' && 'name' in x)) return patch;
    const out = target.map((x) => ({ ...x }));
    for (const p of patch) {
      const i = out.findIndex((x) => x.name === p.name);
      if (i >= 0) out[i] = merge(out[i], p); else out.push(p);
    }
    return out;
  }
  if (target && patch && typeof target === 'object' && typeof patch === 'object' && !Array.isArray(patch)) {
    const out = { ...target };
    for (const [k, v] of Object.entries(patch)) out[k] = k in out ? merge(out[k], v) : v;
    return out;
  }
  return patch;
}

// kustomize build, for the features the project uses.
function build(dir) {
  const k = loadAll(path.join(dir, 'kustomization.yaml'))[0];
  check(k.kind === 'Kustomization', `${dir}: not a Kustomization`);
  let objects = [];
  for (const r of k.resources ?? []) {
    const p = path.join(dir, r);
    if (!fs.existsSync(p)) { check(false, `${dir}: resource ${r} does not exist`); continue; }
    objects.push(...(fs.statSync(p).isDirectory() ? build(p) : loadAll(p)));
  }
  for (const patch of k.patches ?? []) {
    const p = path.join(dir, patch.path);
    if (!fs.existsSync(p)) { check(false, `${dir}: patch ${patch.path} does not exist`); continue; }
    for (const doc of loadAll(p)) {
      const i = objects.findIndex((o) => o.kind === doc.kind && o.metadata.name === doc.metadata.name);
      check(i >= 0, `${dir}: patch ${patch.path} targets no ${doc.kind}/${doc.metadata.name}`);
      if (i >= 0) objects[i] = merge(objects[i], doc);
    }
  }
  if (k.namespace) objects = objects.map((o) => merge(o, { metadata: { namespace: k.namespace } }));
  for (const img of k.images ?? []) {
    let used = false;
    for (const o of objects) {
      for (const c of o.spec?.template?.spec?.containers ?? []) {
        const [name] = c.image.split(':');
        if (name === img.name) {
          c.image = `${img.newName ?? name}:${img.newTag ?? 'latest'}`;
          used = true;
        }
      }
    }
    check(used, `${dir}: image override ${img.name} matches no container`);
  }
  return objects;
}

function validate(where, o) {
  const Model = models[`${o.apiVersion}/${o.kind}`];
  if (!Model) { check(false, `${where}: no schema for ${o.apiVersion} ${o.kind}`); return; }
  try { new Model(o).validate(); } catch (e) { check(false, `${where}: ${o.kind}/${o.metadata?.name}: ${e.message}`); }
}

const matches = (selector, labels) =>
  Object.entries(selector ?? {}).every(([k, v]) => labels?.[k] === v);

function checkServing(where, objects) {
  const find = (kind) => objects.filter((o) => o.kind === kind);
  const [deploy] = find('Deployment');
  check(deploy, `${where}: no Deployment`);
  if (!deploy) return;
  const pod = deploy.spec.template;
  const labels = pod.metadata.labels;
  check(matches(deploy.spec.selector.matchLabels, labels), `${where}: Deployment selector misses its pods`);
  check(pod.metadata.annotations?.['prometheus.io/scrape'] === 'true', `${where}: no prometheus.io/scrape`);
  const metricsPort = pod.metadata.annotations?.['prometheus.io/port'];
  for (const c of pod.spec.containers) {
    check(c.readinessProbe?.grpc && c.livenessProbe?.grpc, `${where}: ${c.name}: probes are not gRPC`);
    check(c.resources?.requests?.cpu && c.resources?.requests?.memory, `${where}: ${c.name}: no resource requests`);
    check(c.ports?.some((p) => String(p.containerPort) === metricsPort), `${where}: ${c.name}: no port ${metricsPort}`);
  }
  const [svc] = find('Service');
  check(svc?.spec?.clusterIP === 'None', `${where}: the Service is not headless (client-side gRPC balancing)`);
  check(svc && matches(svc.spec.selector, labels), `${where}: the Service selects no pod`);
  const [pdb] = find('PodDisruptionBudget');
  check(pdb && matches(pdb.spec.selector.matchLabels, labels), `${where}: no PodDisruptionBudget over the pods`);
  const [hpa] = find('HorizontalPodAutoscaler');
  check(hpa?.spec?.scaleTargetRef?.name === deploy.metadata.name, `${where}: the HPA does not target the Deployment`);
  check(hpa?.spec?.metrics?.some((m) => m.type === 'Pods' && m.pods.metric.name === 'neupims_num_requests_waiting'),
        `${where}: the HPA does not scale on neupims_num_requests_waiting`);
  check(hpa && hpa.spec.minReplicas <= hpa.spec.maxReplicas, `${where}: HPA min > max`);
  const ns = new Set(objects.map((o) => o.metadata.namespace));
  check(ns.size === 1, `${where}: objects in several namespaces`);
}

function checkSweepJob(where, objects) {
  const [job] = objects.filter((o) => o.kind === 'Job');
  check(job, `${where}: no Job`);
  if (!job) return;
  check(job.spec.completionMode === 'Indexed', `${where}: the Job is not Indexed`);
  const [c] = job.spec.template.spec.containers;
  const cmd = [...(c.command ?? []), ...(c.args ?? [])].join(' ');
  check(/--shard\s+\S*JOB_COMPLETION_INDEX\S*\/\d+/.test(cmd), `${where}: --shard does not use JOB_COMPLETION_INDEX`);
  const n = Number((cmd.match(/JOB_COMPLETION_INDEX\S*\/(\d+)/) ?? [])[1]);
  check(n === job.spec.completions, `${where}: --shard i/${n} but ${job.spec.completions} completions`);
  // The image runs as user 65534 (deploy/Dockerfile); a fresh volume is root's, so the shards
  // could not write their JSON unless the pod gives its volumes that group.
  const pod = job.spec.template.spec;
  const writable = (c.volumeMounts ?? []).filter((m) => !m.readOnly)
    .map((m) => pod.volumes.find((v) => v.name === m.name))
    .filter((v) => v?.persistentVolumeClaim);
  check(writable.length === 0 || pod.securityContext?.fsGroup === 65534,
        `${where}: the Job writes to a volume as user 65534 without securityContext.fsGroup 65534`);
}

const trees = { base: path.join(root, 'base') };
for (const o of fs.readdirSync(path.join(root, 'overlays'))) trees[`overlays/${o}`] = path.join(root, 'overlays', o);
let count = 0;
for (const [name, dir] of Object.entries(trees)) {
  const objects = build(dir);
  for (const o of objects) { validate(name, o); ++count; }
  checkServing(name, objects);
}
for (const f of fs.readdirSync(root).filter((f) => /\.ya?ml$/.test(f))) {
  const objects = loadAll(path.join(root, f));
  for (const o of objects) { validate(f, o); ++count; }
  if (objects.some((o) => o.kind === 'Job')) checkSweepJob(f, objects);
}
if (errors.length > 0) {
  for (const e of errors) console.error(`${root}: ${e}`);
  process.exit(1);
}
console.log(`${root}: ${Object.keys(trees).length} kustomizations and ${count} objects valid`);
