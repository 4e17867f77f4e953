// examples/kubernetes/: every manifest parses; kinds and API versions are ones a current cluster
// serves; names that refer to each other match; the Role grants exactly the calls of the Role in
// docs/kubernetes.md; the gateways outlive their drain; probes point at the ops endpoints; both
// Deployments run the image as the Dockerfile builds it (which .ci/container builds and runs).
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, dirname, join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { parse, parseAllDocuments } from 'yaml';
import { ALLOWED_CALLS } from '../fixtures/fake-kube-api.js';
import { all, envOf, execForm, healthcheckCommand, one, readDockerfile } from '../helpers/dockerfile.js';
import { parseConfig } from '../../src/config/load.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const DIR = join(ROOT, 'examples/kubernetes/');

type Doc = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string }; [key: string]: unknown };
// Narrow helpers for reading nested manifest fields.
type Any = Record<string, any>;

const API_VERSIONS: Record<string, string> = {
  Namespace: 'v1',
  ServiceAccount: 'v1',
  ConfigMap: 'v1',
  Service: 'v1',
  Deployment: 'apps/v1',
  Role: 'rbac.authorization.k8s.io/v1',
  RoleBinding: 'rbac.authorization.k8s.io/v1',
  PodDisruptionBudget: 'policy/v1',
};

function load(): Doc[] {
  const docs: Doc[] = [];
  for (const file of readdirSync(DIR).filter((f) => f.endsWith('.yaml')).sort()) {
    for (const d of parseAllDocuments(readFileSync(join(DIR, file), 'utf8'))) {
      assert.deepEqual(d.errors, [], `${file} parses`);
      const doc = d.toJS() as Doc | null;
      if (doc !== null) docs.push(doc);
    }
  }
  return docs;
}

const docs = load();
const find = (kind: string, name: string): Any => {
  const d = docs.find((x) => x.kind === kind && x.metadata.name === name);
  assert.ok(d !== undefined, `${kind}/${name} exists`);
  return d as Any;
};
const labelsMatch = (selector: Record<string, string>, labels: Record<string, string>): boolean =>
  Object.entries(selector).every(([k, v]) => labels[k] === v);

describe('examples/kubernetes manifests', () => {
  test('kinds and API versions; one namespace; unique names', () => {
    const kinds = docs.map((d) => d.kind).sort();
    assert.deepEqual(kinds, ['ConfigMap', 'Deployment', 'Deployment', 'Namespace', 'PodDisruptionBudget', 'Role', 'RoleBinding', 'Service', 'Service', 'ServiceAccount']);
    for (const d of docs) {
      assert.equal(d.apiVersion, API_VERSIONS[d.kind], `${d.kind}/${d.metadata.name} apiVersion`);
      if (d.kind !== 'Namespace') assert.equal(d.metadata.namespace, 'models', `${d.kind}/${d.metadata.name} namespace`);
    }
    const keys = docs.map((d) => `${d.kind}/${d.metadata.name}`);
    assert.equal(new Set(keys).size, keys.length);
  });

  test('the Role grants exactly the verbs of the Role in docs/kubernetes.md, and is bound to the gateways\' ServiceAccount', () => {
    const role = find('Role', 'sluice');
    const granted: Record<string, Set<string>> = {};
    const groups: Record<string, string> = { 'deployments/scale': 'apps', endpointslices: 'discovery.k8s.io', leases: 'coordination.k8s.io' };
    for (const rule of role['rules'] as Any[]) {
      for (const resource of rule['resources'] as string[]) {
        assert.deepEqual(rule['apiGroups'], [groups[resource]], `API group of ${resource}`);
        for (const verb of rule['verbs'] as string[]) (granted[resource] ??= new Set()).add(verb);
      }
    }
    const asLists = Object.fromEntries(Object.entries(granted).map(([r, v]) => [r, [...v].sort()]));
    const expected = Object.fromEntries(Object.entries(ALLOWED_CALLS).map(([r, v]) => [r, [...v].sort()]));
    assert.deepEqual(asLists, expected);
    // The model Deployment and its Lease are the names the rules are limited to.
    const config = sluiceConfig();
    const kube = config.services[0].replicas.kubernetes;
    for (const rule of role['rules'] as Any[]) {
      const names = rule['resourceNames'] as string[] | undefined;
      if (names === undefined) continue;
      if ((rule['resources'] as string[]).includes('deployments/scale')) assert.deepEqual(names, [kube.deployment]);
      if ((rule['resources'] as string[]).includes('leases')) assert.deepEqual(names, [`sluice-${kube.service}`]);
    }
    const binding = find('RoleBinding', 'sluice');
    assert.deepEqual(binding['roleRef'], { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: role['metadata'].name });
    const sa = find('ServiceAccount', 'sluice');
    assert.deepEqual(binding['subjects'], [{ kind: 'ServiceAccount', name: sa['metadata'].name, namespace: sa['metadata'].namespace }]);
  });

  test('the gateways: several, their ServiceAccount and ConfigMap, probes on /healthz and /readyz, a grace period above drainTimeoutMs', () => {
    const deploy = find('Deployment', 'sluice');
    assert.ok(deploy['spec'].replicas >= 2, 'several gateways');
    const pod = deploy['spec'].template.spec;
    assert.ok(labelsMatch(deploy['spec'].selector.matchLabels, deploy['spec'].template.metadata.labels));
    assert.equal(pod.serviceAccountName, find('ServiceAccount', 'sluice')['metadata'].name);
    const container = pod.containers[0];
    const configVolume = pod.volumes.find((v: Any) => v.configMap !== undefined);
    assert.equal(configVolume.configMap.name, find('ConfigMap', 'sluice-config')['metadata'].name);
    const mount = container.volumeMounts.find((m: Any) => m.name === configVolume.name);
    const configArg = container.args[container.args.indexOf('--config') + 1];
    assert.equal(configArg, `${mount.mountPath}/config.yaml`);
    const config = sluiceConfig();
    const httpPort = container.ports.find((p: Any) => p.name === 'http');
    assert.equal(httpPort.containerPort, config.listen.port);
    assert.equal(config.listen.host, '0.0.0.0');
    assert.deepEqual(container.readinessProbe.httpGet, { path: '/readyz', port: 'http' });
    assert.deepEqual(container.livenessProbe.httpGet, { path: '/healthz', port: 'http' });
    assert.ok(pod.terminationGracePeriodSeconds > config.drainTimeoutMs / 1000, 'grace period above drainTimeoutMs');

    const service = find('Service', 'sluice');
    assert.ok(labelsMatch(service['spec'].selector, deploy['spec'].template.metadata.labels));
    assert.equal(service['spec'].ports[0].targetPort, 'http');
    const pdb = find('PodDisruptionBudget', 'sluice');
    assert.ok(labelsMatch(pdb['spec'].selector.matchLabels, deploy['spec'].template.metadata.labels));
    assert.ok(pdb['spec'].maxUnavailable < deploy['spec'].replicas || pdb['spec'].minAvailable < deploy['spec'].replicas);
  });

  test("the ConfigMap's config is valid: Sluice's own loader accepts it, with a kubernetes service", () => {
    const config = parseConfig(sluiceConfig());
    assert.equal(config.services[0]!.replicas.kubernetes?.deployment, 'llama');
    assert.ok(config.drainTimeoutMs > 0);
  });

  test('the model: a Deployment at 0 replicas with a readiness probe, and the Service and port the config names', () => {
    const kube = sluiceConfig().services[0].replicas.kubernetes;
    const model = find('Deployment', kube.deployment);
    assert.equal(model['metadata'].namespace, kube.namespace);
    assert.equal(model['spec'].replicas, 0);
    const container = model['spec'].template.spec.containers[0];
    assert.equal(container.readinessProbe.httpGet.path, sluiceConfig().services[0].replicas.readyPath);
    const service = find('Service', kube.service);
    assert.ok(labelsMatch(service['spec'].selector, model['spec'].template.metadata.labels));
    // The config's port is the Service port's name (EndpointSlices carry it), whose target is a
    // named container port of the model.
    const port = service['spec'].ports.find((p: Any) => p.name === kube.port);
    assert.ok(port !== undefined, `Service port ${kube.port}`);
    assert.ok(container.ports.some((p: Any) => p.name === port.targetPort));
    assert.equal(find('Namespace', kube.namespace)['kind'], 'Namespace');
  });

  test('both Deployments run the image as the Dockerfile builds it: its tag, entrypoint, user, port, health endpoint and config path', () => {
    const image = readDockerfile().at(-1)!;
    const env = envOf(image);
    const gateway = find('Deployment', 'sluice')['spec'].template.spec;
    const model = find('Deployment', sluiceConfig().services[0].replicas.kubernetes.deployment)['spec'].template.spec;
    const container = gateway.containers[0];
    // The image the comments and docs/kubernetes.md build.
    const tags = [read('examples/kubernetes/sluice.yaml'), read('docs/kubernetes.md')].map((t) => /`docker build -t (\S+) \.`/.exec(t)?.[1]);
    assert.deepEqual(tags, [container.image, container.image], 'the docker build line names the image the manifests run');
    assert.equal(model.containers[0].image, container.image, 'the model server is the one in the same image');
    // The image's ENTRYPOINT runs (no `command`), with its CMD's subcommand and its SLUICE_CONFIG.
    assert.equal(container.command, undefined, 'the ENTRYPOINT is the image\'s: exec form, SIGTERM reaches Node');
    assert.equal(container.workingDir, undefined, 'the image\'s WORKDIR');
    assert.equal(container.args[0], execForm(one(image, 'CMD').args)![0]);
    const configArg = container.args[container.args.indexOf('--config') + 1];
    assert.equal(configArg, env['SLUICE_CONFIG'], 'the config where the image looks for it');
    const mount = container.volumeMounts.find((m: Any) => m.mountPath === dirname(env['SLUICE_CONFIG']!));
    assert.equal(mount?.readOnly, true, `the ConfigMap mounted read-only at ${dirname(env['SLUICE_CONFIG']!)}`);
    const volume = gateway.volumes.find((v: Any) => v.name === mount.name);
    assert.ok(basename(env['SLUICE_CONFIG']!) in find('ConfigMap', volume.configMap.name)['data'], 'the ConfigMap holds the file SLUICE_CONFIG names');
    // The port the image exposes, and the health endpoint its HEALTHCHECK asks.
    const httpPort = container.ports.find((p: Any) => p.name === 'http');
    assert.equal(String(httpPort.containerPort), one(image, 'EXPOSE').args);
    const healthPath = /'(\/\w+)'/.exec(healthcheckCommand(image)!.join(' '))?.[1];
    assert.equal(container.livenessProbe.httpGet.path, healthPath, 'liveness asks what the HEALTHCHECK asks');
    // The user: USER names `node`, which Kubernetes cannot check against runAsNonRoot; the pod
    // names its uid, 1000 in the node images (the uid .ci/container sees the built image run as).
    assert.equal(one(image, 'USER').args, 'node');
    assert.equal(gateway.securityContext.runAsNonRoot, true);
    assert.equal(gateway.securityContext.runAsUser, 1000);
    // Read-only: the image writes nothing at run time (.ci/container runs it on a read-only root).
    assert.equal(container.securityContext.readOnlyRootFilesystem, true);
    // Kubernetes stops a container with SIGTERM whatever its STOPSIGNAL: the image's is that one.
    assert.equal(one(image, 'STOPSIGNAL').args, 'SIGTERM');
    // The model server: the file the image ships, run from its WORKDIR, on the port it is told.
    const [node, script] = model.containers[0].command as string[];
    assert.equal(node, 'node');
    const copied = all(image, 'COPY').map((c) => c.args.split(/\s+/).at(-1)!.replace(/\/$/, ''));
    assert.ok(copied.some((dest) => script!.startsWith(`${dest}/`)), `the image copies ${script}`);
    assert.ok(existsSync(join(ROOT, script!.replace(/^dist\//, '').replace(/\.js$/, '.ts'))), `${script} is built from a source file`);
    assert.ok(!posix.isAbsolute(script!), 'relative to the image\'s WORKDIR');
    const modelEnv = Object.fromEntries((model.containers[0].env as Any[]).map((e) => [e.name, e.value]));
    assert.equal(Number(modelEnv['PORT']), model.containers[0].ports.find((p: Any) => p.name === 'http').containerPort);
    assert.equal(modelEnv['HOST'], '0.0.0.0');
  });
});

const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');

/** The Sluice config inside the ConfigMap. */
function sluiceConfig(): Any {
  const cm = find('ConfigMap', 'sluice-config');
  return parse(cm['data']['config.yaml'] as string) as Any;
}
