// The Kubernetes source's credentials and its readiness probing of new endpoints.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { KubeCredentialsError, loadCredentials, SERVICE_ACCOUNT_DIR } from '../../src/control/kinds/kubernetes/credentials.js';
import type { FakeKubeApi } from '../fixtures/fake-kube-api.js';
import { KUBE_TOKEN, NS, newSource, slice, startFakeKube, writeKubeconfig } from '../helpers/kube.js';
import { startReplica, type TestReplica } from '../helpers/replica.js';
import { eventually } from '../helpers/wait.js';

/** A pod's service-account mount under a temporary prefix. */
function serviceAccount(namespace: string | undefined): string {
  const prefix = mkdtempSync(join(tmpdir(), 'sluice-sa-'));
  const dir = join(prefix, SERVICE_ACCOUNT_DIR);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'token'), KUBE_TOKEN);
  writeFileSync(join(dir, 'ca.crt'), '');
  if (namespace !== undefined) writeFileSync(join(dir, 'namespace'), namespace);
  return prefix;
}

describe('kubernetes credentials', () => {
  const inCluster = { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' };

  test('the kubeconfig of the config comes first; the namespace defaults to the pod\'s, then the context\'s, then "default"', () => {
    const file = writeKubeconfig('http://127.0.0.1:1');
    const fromFile = loadCredentials({ kubeconfig: file, env: {}, inClusterPrefix: '/nonexistent' });
    assert.equal(fromFile.source, 'kubeconfig');
    assert.equal(fromFile.server, 'http://127.0.0.1:1');
    assert.equal(fromFile.namespace, 'elsewhere', 'the context namespace');
    assert.equal(loadCredentials({ kubeconfig: file, namespace: 'models', env: {} }).namespace, 'models');
    const pod = loadCredentials({ kubeconfig: file, env: {}, inClusterPrefix: serviceAccount('team-a') });
    assert.equal(pod.namespace, 'team-a', "the pod's own namespace");
    assert.ok(!JSON.stringify({ ...fromFile, kubeConfig: undefined }).includes(KUBE_TOKEN));
  });

  test('in a pod: the service account, with the pod\'s namespace', () => {
    const prefix = serviceAccount('models');
    const c = loadCredentials({ env: { ...inCluster, KUBECONFIG: writeKubeconfig('http://127.0.0.1:1') }, inClusterPrefix: prefix });
    assert.equal(c.source, 'in-cluster');
    assert.equal(c.server, 'https://10.96.0.1:443');
    assert.equal(c.namespace, 'models');
    assert.equal(c.kubeConfig.getCurrentUser()?.authProvider?.config?.['tokenFile'], join(prefix, SERVICE_ACCOUNT_DIR, 'token'));
    // process.env was restored after loading.
    assert.equal(process.env['KUBERNETES_SERVICE_HOST'], undefined);
  });

  test('outside a pod: $KUBECONFIG; with nothing, a one-line reason', () => {
    const c = loadCredentials({ env: { KUBECONFIG: `/nonexistent:${writeKubeconfig('http://127.0.0.1:2')}` }, inClusterPrefix: '/nonexistent' });
    assert.equal(c.source, 'KUBECONFIG');
    assert.equal(c.server, 'http://127.0.0.1:2');
    assert.throws(() => loadCredentials({ env: {}, inClusterPrefix: '/nonexistent' }), (err: unknown) => {
      assert.ok(err instanceof KubeCredentialsError);
      assert.match(err.message, /no Kubernetes credentials/);
      return true;
    });
    assert.throws(() => loadCredentials({ kubeconfig: '/nonexistent/kubeconfig', env: {} }), /kubeconfig \/nonexistent\/kubeconfig does not exist/);
    // In-cluster host without a token mounted is not in-cluster.
    assert.throws(() => loadCredentials({ env: inCluster, inClusterPrefix: '/nonexistent' }), KubeCredentialsError);
  });
});

describe('kubernetes endpoints and readyPath', () => {
  let api: FakeKubeApi;
  let kubeconfig: string;
  let answering: TestReplica;
  let loading: TestReplica;
  let terminating: TestReplica;
  let healthy = false;

  before(async () => {
    api = await startFakeKube({ bookmarkEveryMs: 100 });
    kubeconfig = writeKubeconfig(api.url);
    api.addDeployment(NS, 'llama', 0);
    answering = await startReplica((_req, res) => void res.end('ok'));
    loading = await startReplica((_req, res) => void res.writeHead(healthy ? 200 : 503).end());
    terminating = await startReplica((_req, res) => void res.end('ok'));
  });
  after(async () => {
    await Promise.all([answering.close(), loading.close(), terminating.close(), api.close()]);
    assert.deepEqual(api.forbiddenCalls(), []);
  });

  test('with readyPath, each gateway routes to an endpoint once it answers, whatever Kubernetes says; never to a terminating one', async () => {
    api.putEndpointSlice(slice('llama-p1', answering.port, [['127.0.0.1', false]])); // answers, not marked ready yet
    api.putEndpointSlice(slice('llama-p2', loading.port, [['127.0.0.1', true]])); // marked ready, does not answer 2xx
    api.putEndpointSlice(slice('llama-p3', terminating.port, [['127.0.0.1', false, true]]));
    const { source } = newSource(kubeconfig, { replicas: { readyPath: '/health' } });
    source.start();
    try {
      await eventually(() => source.endpoints().some((e) => e.port === answering.port && e.ready), 10_000, 'the answering endpoint');
      const byPort = new Map(source.endpoints().map((e) => [e.port, e]));
      assert.equal(byPort.get(answering.port)?.kubeReady, false, 'routed before Kubernetes marks it ready');
      await eventually(() => loading.seen.length >= 3, 10_000, 'probes of the loading endpoint');
      assert.equal(source.endpoints().find((e) => e.port === loading.port)?.ready, false, 'not routed while it does not answer');
      assert.equal(byPort.get(terminating.port)?.ready, false);
      assert.equal(terminating.seen.length, 0, 'a terminating endpoint is not even probed');
      healthy = true;
      await eventually(() => source.endpoints().find((e) => e.port === loading.port)?.ready === true, 10_000, 'the endpoint once it answers');
      assert.ok(loading.seen.every((r) => r.method === 'GET' && r.url === '/health'));
    } finally {
      await source.stop();
      for (const n of ['llama-p1', 'llama-p2', 'llama-p3']) api.deleteEndpointSlice(NS, n);
    }
  });

  test('with readyPath, an endpoint Kubernetes takes out of rotation is routed again only after it answers again', async () => {
    healthy = true;
    api.putEndpointSlice(slice('llama-r1', loading.port, [['127.0.0.1', true]]));
    const { source } = newSource(kubeconfig, { replicas: { readyPath: '/health' } });
    source.start();
    try {
      await eventually(() => source.endpoints()[0]?.ready === true, 10_000, 'ready');
      healthy = false;
      api.putEndpointSlice(slice('llama-r1', loading.port, [['127.0.0.1', false]])); // its readiness probe failed
      await eventually(() => source.endpoints()[0]?.ready === false, 10_000, 'out of rotation');
      const probes = loading.seen.length;
      await eventually(() => loading.seen.length >= probes + 2, 10_000, 'probed again');
      assert.equal(source.endpoints()[0]!.ready, false, 'not routed while it does not answer');
      healthy = true;
      await eventually(() => source.endpoints()[0]?.ready === true, 10_000, 'back once it answers');
    } finally {
      await source.stop();
      api.deleteEndpointSlice(NS, 'llama-r1');
    }
  });

  test('without readyPath, Kubernetes\' ready condition decides and nothing is probed', async () => {
    const before = answering.seen.length;
    api.putEndpointSlice(slice('llama-q1', answering.port, [['127.0.0.1', false]]));
    const { source } = newSource(kubeconfig);
    source.start();
    try {
      await eventually(() => source.endpoints().length === 1, 5_000, 'the endpoint');
      assert.equal(source.endpoints()[0]!.ready, false);
      api.putEndpointSlice(slice('llama-q1', answering.port, [['127.0.0.1', true]]));
      await eventually(() => source.endpoints()[0]?.ready === true, 5_000, 'ready from Kubernetes');
      assert.equal(answering.seen.length, before);
    } finally {
      await source.stop();
      api.deleteEndpointSlice(NS, 'llama-q1');
    }
  });
});

describe('the fake API server itself', () => {
  test('answers 403 to any call outside the Role (docs/kubernetes.md#the-role), 401 without the token, and lists both as not allowed', async () => {
    const api = await startFakeKube();
    api.addDeployment(NS, 'llama', 0);
    const auth = { authorization: `Bearer ${KUBE_TOKEN}` };
    try {
      const call = async (method: string, path: string, headers: Record<string, string> = auth): Promise<number> =>
        (await fetch(`${api.url}${path}`, { method, headers })).status;
      assert.equal(await call('GET', `/apis/apps/v1/namespaces/${NS}/deployments/llama/scale`), 200);
      assert.equal(await call('GET', `/apis/apps/v1/namespaces/${NS}/deployments/llama`), 403);
      assert.equal(await call('GET', '/api/v1/namespaces/models/pods'), 403);
      assert.equal(await call('GET', '/apis/discovery.k8s.io/v1/endpointslices'), 403);
      assert.equal(await call('DELETE', `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/sluice-llama`), 403);
      assert.equal(await call('GET', `/apis/apps/v1/namespaces/${NS}/deployments/llama/scale`, {}), 401);
      const body = (await (await fetch(`${api.url}/api/v1/secrets`, { headers: auth })).json()) as Record<string, unknown>;
      assert.deepEqual([body['kind'], body['reason'], body['code']], ['Status', 'Forbidden', 403]);
      assert.deepEqual(
        api.forbiddenCalls().map((r) => `${r.method} ${r.path}`),
        [
          `GET /apis/apps/v1/namespaces/${NS}/deployments/llama`,
          'GET /api/v1/namespaces/models/pods',
          'GET /apis/discovery.k8s.io/v1/endpointslices',
          `DELETE /apis/coordination.k8s.io/v1/namespaces/${NS}/leases/sluice-llama`,
          'GET /api/v1/secrets',
        ],
      );
    } finally {
      await api.close();
    }
  });
});

describe('kubernetes credentials in logs', () => {
  test('a server URL with user:password is logged without them', () => {
    const file = writeKubeconfig('http://admin:hunter2@127.0.0.1:1');
    const c = loadCredentials({ kubeconfig: file, env: {} });
    assert.equal(c.server, 'http://127.0.0.1:1/');
    const { source, log } = newSource(file);
    source.start();
    void source.stop();
    assert.ok(log.lines.some((l) => l['msg'] === 'kubernetes replica source started'));
    assert.ok(!log.text().includes('hunter2'));
    assert.ok(!log.text().includes(KUBE_TOKEN));
  });
});
