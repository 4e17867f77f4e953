// Kubernetes services behind a router (docs/kubernetes.md#routers-over-kubernetes-services): the
// request names its model, the router picks the Kubernetes service that serves it, and from there
// the request is that service's: a cold one waits while its Deployment is raised from zero, and
// the answer comes from the pod. `/v1/models` and `/status` say cold, then starting, then ready.
// One in-process gateway against the fake API server; endpoints published by the test itself
// (exact transitions), then by the controller simulator running the demo model server, through
// the OpenAI SDK.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import OpenAI from 'openai';
import { sha256Hex } from '../../src/cli/token.js';
import type { FakeKubeApi } from '../fixtures/fake-kube-api.js';
import { KubeControllerSim } from '../fixtures/kube-controller-sim.js';
import { secret, startTestGateway, TEST_TOKEN_SHA256, type TestGateway } from '../helpers/gateway.js';
import { FAST, KUBE_TOKEN, NS, slice, startFakeKube, writeKubeconfig } from '../helpers/kube.js';
import { startReplica, type TestReplica } from '../helpers/replica.js';
import { eventually } from '../helpers/wait.js';

// The gateway in this process gets the test timings (src/cli/test-hooks.ts, read by startTestGateway).
process.env['NODE_ENV'] = 'test';
process.env['SLUICE_TEST_HOOKS'] = '1';
process.env['SLUICE_TEST_KUBE_TUNING'] = JSON.stringify(FAST);

const ROUTER_TOKEN = secret('slc_router_token_for_the_kubernetes_router_tests_0123');
const ROUTER_AUTH = { authorization: `Bearer ${ROUTER_TOKEN}` };

interface Model {
  id: string;
  service: string;
  state: string;
}

interface Setup {
  api: FakeKubeApi;
  tg: TestGateway;
  admin: string;
  router: (path: string) => string;
  close(): Promise<void>;
}

/** Kubernetes services `chat` (model llama-3.1-8b) and `coder` (coder-7b), their Deployments at `replicas`, a router `models` over both. */
async function setup(replicas: { chat: number; coder: number }, extra: Record<string, unknown> = {}, closeAlso: () => Promise<void> = async () => undefined): Promise<Setup> {
  const api = await startFakeKube({ bookmarkEveryMs: 100 });
  api.addDeployment(NS, 'chat', replicas.chat);
  api.addDeployment(NS, 'coder', replicas.coder);
  const kubeconfig = writeKubeconfig(api.url);
  const service = (name: string, model: string): Record<string, unknown> => ({
    slug: name,
    tokens: [{ name: 'test', sha256: TEST_TOKEN_SHA256 }],
    models: [model],
    queue: { maxWaitMs: 30_000 },
    replicas: { kubernetes: { namespace: NS, deployment: name, service: name, port: 'http', kubeconfig }, min: 0, max: 2, idleTimeoutMs: 60_000 },
  });
  const tg = await startTestGateway([service('chat', 'llama-3.1-8b'), service('coder', 'coder-7b')] as never, {
    routers: [{ slug: 'models', tokens: [{ name: 'router-caller', sha256: sha256Hex(ROUTER_TOKEN) }] }],
    admin: { host: '127.0.0.1', port: 0 },
    ...extra,
  });
  return {
    api,
    tg,
    admin: `http://127.0.0.1:${tg.gateway.adminPort!}`,
    router: (path) => tg.url(path, 'models'),
    close: async () => {
      await tg.close();
      await closeAlso();
      assert.deepEqual(api.forbiddenCalls(), [], 'no call outside docs/kubernetes.md');
      await api.close();
      assert.ok(!tg.logText().includes(KUBE_TOKEN), 'the service account token is in no log line');
    },
  };
}

/** An EndpointSlice of Service `service` with one endpoint, the test's replica. */
function publish(api: FakeKubeApi, service: string, replica: TestReplica, ready: boolean): void {
  const s = slice(`${service}-${replica.port}`, replica.port, [['127.0.0.1', ready]]);
  s.metadata['labels'] = { 'kubernetes.io/service-name': service };
  api.putEndpointSlice(s);
}

async function named(name: string): Promise<TestReplica> {
  return startReplica((req, res) => {
    req.resume();
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ replica: name, path: req.url }));
    });
  });
}

async function models(s: Setup): Promise<Model[]> {
  const res = await fetch(s.router('/v1/models'), { headers: ROUTER_AUTH });
  assert.equal(res.status, 200);
  return ((await res.json()) as { data: Model[] }).data.map(({ id, service, state }) => ({ id, service, state }));
}

interface Status {
  services: { slug: string; state: string; queued: number; kind: string }[];
  routers: { slug: string; models: Model[] }[];
}

async function status(s: Setup): Promise<Status> {
  return (await (await fetch(`${s.admin}/status`)).json()) as Status;
}

test('a router routes by model to Kubernetes services; a cold one is scaled from zero while the request waits, and the list says cold, starting, ready', async (t) => {
  const chat = await named('chat');
  const coder = await named('coder');
  const s = await setup({ chat: 1, coder: 0 }, {}, async () => {
    await chat.close();
    await coder.close();
  });
  t.after(() => s.close());
  publish(s.api, 'chat', chat, true);
  await eventually(async () => (await models(s)).find((m) => m.id === 'llama-3.1-8b')?.state === 'ready', 10_000, 'the chat pod to be ready');
  assert.deepEqual(await models(s), [
    { id: 'llama-3.1-8b', service: 'chat', state: 'ready' },
    { id: 'coder-7b', service: 'coder', state: 'cold' },
  ]);
  const before = await status(s);
  assert.deepEqual(before.services.map((x) => [x.slug, x.kind, x.state]), [['chat', 'kubernetes', 'ready'], ['coder', 'kubernetes', 'cold']]);
  assert.deepEqual(before.routers[0]!.models, await models(s), '/status says what the model list says');

  const post = (model: string): Promise<Response> =>
    fetch(s.router('/v1/chat/completions'), { method: 'POST', headers: { ...ROUTER_AUTH, 'content-type': 'application/json' }, body: JSON.stringify({ model, messages: [] }) });
  const warm = await post('llama-3.1-8b');
  assert.equal(warm.status, 200);
  assert.deepEqual(await warm.json(), { replica: 'chat', path: '/v1/chat/completions' });
  assert.equal(s.api.scaleOf(NS, 'chat').replicas, 1, 'a ready service is not raised');

  // The cold model: the request waits, the gateway raises coder's Deployment from zero.
  const cold = post('coder-7b');
  await eventually(() => s.api.scaleOf(NS, 'coder').replicas === 1, 10_000, 'coder raised to 1');
  await eventually(async () => (await status(s)).services[1]!.queued === 1, 10_000, 'the request queued for coder');
  // No pod is an endpoint yet: the service is starting (requests wait for it), not cold.
  const starting = await status(s);
  assert.equal(starting.services[1]!.state, 'starting');
  assert.deepEqual(starting.routers[0]!.models.map((m) => m.state), ['ready', 'starting']);
  assert.deepEqual((await models(s)).map((m) => m.state), ['ready', 'starting']);
  assert.equal(coder.seen.length, 0);

  // The pod comes up (the Deployment's controller): the waiting request goes to it.
  publish(s.api, 'coder', coder, true);
  const answer = await cold;
  assert.equal(answer.status, 200);
  assert.deepEqual(await answer.json(), { replica: 'coder', path: '/v1/chat/completions' });
  const ready = await models(s);
  assert.deepEqual(ready, [
    { id: 'llama-3.1-8b', service: 'chat', state: 'ready' },
    { id: 'coder-7b', service: 'coder', state: 'ready' },
  ]);
  assert.deepEqual((await status(s)).routers[0]!.models, ready);
  await eventually(() => s.tg.logs.some((l) => l['msg'] === 'request' && l['service'] === 'coder'), 10_000, 'the access line');
  assert.equal(s.tg.logs.find((l) => l['msg'] === 'request' && l['service'] === 'coder')!['router'], 'models');
  assert.equal(s.api.scaleOf(NS, 'coder').replicas, 1, 'raised once');

  const unknown = await post('gpt-4o');
  assert.equal(unknown.status, 404);
  assert.equal(unknown.headers.get('x-sluice-error'), 'model_not_found');
  await unknown.body?.cancel();
});

test('through the OpenAI SDK with two worker threads: a streamed chat for a model whose Deployment is at zero starts its pod, and models.list shows it cold then ready', async (t) => {
  let sim: KubeControllerSim | undefined;
  const s = await setup({ chat: 0, coder: 0 }, { workers: 2 }, async () => sim?.close());
  sim = new KubeControllerSim(s.api, { namespace: NS, deployment: 'coder', service: 'coder', env: { TOKEN_DELAY_MS: '5' } });
  t.after(() => s.close());
  const client = new OpenAI({ baseURL: s.router('/v1'), apiKey: ROUTER_TOKEN, maxRetries: 0, timeout: 30_000 });
  const list = async (): Promise<Record<string, string>> => {
    const out: Record<string, string> = {};
    for await (const m of client.models.list()) out[m.id] = (m as unknown as { state: string }).state;
    return out;
  };
  assert.deepEqual(await list(), { 'llama-3.1-8b': 'cold', 'coder-7b': 'cold' });

  const stream = await client.chat.completions.create({ model: 'coder-7b', messages: [{ role: 'user', content: 'write a loop' }], stream: true });
  const deltas: string[] = [];
  for await (const chunk of stream) {
    const content = chunk.choices[0]?.delta.content;
    if (content) deltas.push(content);
  }
  assert.equal(deltas.join(''), 'You said: write a loop');
  assert.equal(sim.started.length, 1, 'one pod started');
  assert.equal(s.api.scaleOf(NS, 'coder').replicas, 1);
  assert.equal(s.api.scaleOf(NS, 'chat').replicas, 0, 'the other model stays cold');
  assert.deepEqual(await list(), { 'llama-3.1-8b': 'cold', 'coder-7b': 'ready' });
});
