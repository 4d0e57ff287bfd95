// Structural check of deploy/compose.yaml (no container engine needed): the services the stack
// needs exist; every bind-mounted file or folder and the build context exist; ports are
// host:container pairs; Prometheus mounts a config that scrapes the neupims service on its
// published metrics port and loads the mounted rules; Grafana gets a datasource pointing at the
// prometheus service and a dashboard provider whose path holds the mounted dashboard.
// Usage: node check_compose.mjs [compose.yaml]; exit 0 if every check passes.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';

const here = path.dirname(fileURLToPath(import.meta.url));
const composePath = process.argv[2] ?? path.join(here, '..', 'compose.yaml');
const base = path.dirname(composePath);
const errors = [];
const check = (ok, message) => { if (!ok) errors.push(message); };
const load = (p) => YAML.parse(fs.readFileSync(p, 'utf8'));

const compose = load(composePath);
const services = compose.services ?? {};
for (const name of ['neupims', 'prometheus', 'grafana']) check(name in services, `no service ${name}`);

// Bind mounts: "./host:/container[:ro]".
const mounts = {};  // service -> [{host, container}]
for (const [name, svc] of Object.entries(services)) {
  check(svc.image || svc.build, `${name}: neither image nor build`);
  for (const p of svc.ports ?? []) {
    check(/^\d+:\d+$/.test(String(p)), `${name}: port ${p} is not HOST:CONTAINER`);
  }
  mounts[name] = [];
  for (const v of svc.volumes ?? []) {
    const [host, container] = String(v).split(':');
    if (!host.startsWith('.') && !host.startsWith('/')) continue;  // a named volume
    const hostPath = path.resolve(base, host);
    check(fs.existsSync(hostPath), `${name}: mounted ${host} does not exist (${hostPath})`);
    mounts[name].push({ host: hostPath, container });
  }
  for (const d of svc.depends_on ?? []) check(d in services, `${name}: depends on unknown ${d}`);
}
const build = services.neupims?.build;
if (build) {
  const context = path.resolve(base, build.context ?? '.');
  check(fs.existsSync(path.join(context, build.dockerfile ?? 'Dockerfile')),
        `neupims: no Dockerfile ${build.dockerfile} in ${context}`);
}
const hostOf = (service, container) =>
  mounts[service]?.find((m) => m.container === container)?.host;

// Prometheus: its config scrapes neupims:<metrics port> and its rule files are mounted.
const configArg = (services.prometheus?.command ?? []).find((a) => a.startsWith('--config.file='));
const configIn = configArg ? configArg.split('=')[1] : '/etc/prometheus/prometheus.yml';
const configHost = hostOf('prometheus', configIn);
check(configHost, `prometheus: ${configIn} is not mounted`);
if (configHost) {
  const config = load(configHost);
  const targets = (config.scrape_configs ?? []).flatMap((s) =>
      (s.static_configs ?? []).flatMap((c) => c.targets ?? []));
  const metricsPorts = (services.neupims?.ports ?? []).map((p) => String(p).split(':')[1]);
  check(targets.some((t) => t.split(':')[0] === 'neupims' && metricsPorts.includes(t.split(':')[1])),
        `prometheus: no target neupims:<a port neupims publishes> in ${configHost} (${targets})`);
  for (const rules of config.rule_files ?? []) {
    const inContainer = path.posix.resolve(path.posix.dirname(configIn), rules);
    check(hostOf('prometheus', inContainer), `prometheus: rule file ${inContainer} is not mounted`);
  }
}

// Grafana: provisioning mounted; datasource -> prometheus service; dashboards path mounted.
const provisioning = hostOf('grafana', '/etc/grafana/provisioning');
check(provisioning, 'grafana: /etc/grafana/provisioning is not mounted');
if (provisioning) {
  const yamls = (dir) => fs.readdirSync(path.join(provisioning, dir))
      .filter((f) => /\.ya?ml$/.test(f)).map((f) => load(path.join(provisioning, dir, f)));
  const datasources = yamls('datasources').flatMap((d) => d.datasources ?? []);
  const promPort = (services.prometheus?.ports ?? []).map((p) => String(p).split(':')[1]);
  check(datasources.some((d) => d.type === 'prometheus' &&
                                promPort.some((p) => d.url === `http://prometheus:${p}`)),
        'grafana: no prometheus datasource at http://prometheus:<its port>');
  const providers = yamls('dashboards').flatMap((d) => d.providers ?? []);
  check(providers.length > 0, 'grafana: no dashboard provider');
  for (const p of providers) {
    const dir = p.options?.path;
    const files = (mounts.grafana ?? []).filter((m) => m.container.startsWith(`${dir}/`));
    check(files.some((m) => m.host.endsWith('.json')), `grafana: nothing mounted under ${dir}`);
    for (const m of files.filter((f) => fs.existsSync(f.host))) JSON.parse(fs.readFileSync(m.host, "utf8"));
  }
}

if (errors.length > 0) {
  for (const e of errors) console.error(`${composePath}: ${e}`);
  process.exit(1);
}
console.log(`${composePath}: ${Object.keys(services).length} services, mounts and wiring check out`);
