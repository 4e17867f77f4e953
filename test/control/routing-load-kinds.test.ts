// Load readings for every kind of replicas, and across worker threads: a launched replica's
// reading is on /status and /metrics; Kubernetes pods (fake API server) are chosen by their own
// queues; with `workers: 2` each worker follows the readings (they travel through the shared slot
// table, not by message).
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, test } from 'node:test';
import { AUTH, metric, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { FAST, NS, slice, startFakeKube, writeKubeconfig } from '../helpers/kube.js';
import { startLoadReplica, type LoadReplica } from '../helpers/load-replica.js';
import { connectionsOnEveryWorker, type WorkerConnection } from '../helpers/workers.js';
import { eventually } from '../helpers/wait.js';

process.env['NODE_ENV'] = 'test';
process.env['SLUICE_TEST_HOOKS'] = '1';
process.env['SLUICE_TEST_KUBE_TUNING'] = JSON.stringify(FAST);

const METRICS_REPLICA = fileURLToPath(new URL('../fixtures/metrics-replica.js', import.meta.url));
const open: { close(): Promise<void> }[] = [];
after(async () => {
  for (const x of open.splice(0).reverse()) await x.close();
});

async function post(tg: TestGateway, slug = 'svc'): Promise<string> {
  const res = await fetch(tg.url('/v1/x', slug), { method: 'POST', headers: AUTH, body: '{}' });
  assert.equal(res.status, 200);
  return res.text();
}

test('a launched replica is read once ready: its reading is on /status and /metrics', async () => {
  const admin = { host: '127.0.0.1', port: 0 };
  const tg = await startTestGateway(
    rawService({ command: [process.execPath, METRICS_REPLICA], env: { LOAD_WAITING: '4', LOAD_CACHE: '0.5' }, readyPath: '/health', load: { preset: 'vllm', intervalMs: 500 } }),
    { workers: 1, admin },
  );
  open.push(tg);
  const beforeFirstRequest = performance.now();
  assert.equal(await post(tg), 'launched');
  // With an admin listener, /metrics is served there only.
  const adminPort = Number(tg.logs.find((l) => l.msg === 'gateway listening')!.adminPort);
  const onAdmin = { ...tg, origin: `http://127.0.0.1:${adminPort}` };
  await eventually(async () => (await metric(onAdmin, 'sluice_replica_waiting{service="svc",replica="svc-1"}')) === 4, 10_000, 'the reading');
  assert.equal(await metric(onAdmin, 'sluice_replica_cache_usage{service="svc",replica="svc-1"}'), 0.5);
  const status = (await (await fetch(`http://127.0.0.1:${adminPort}/status`)).json()) as { services: { routing: unknown; loads: Record<string, unknown>[] }[] };
  const svc = status.services[0]!;
  assert.deepEqual(svc.routing, { policy: 'queue-aware', affinityHeader: null, prefix: null });
  assert.equal(svc.loads.length, 1);
  const load = svc.loads[0]!;
  assert.equal(load['replica'], 'svc-1');
  assert.equal(load['waiting'], 4);
  assert.equal(load['cacheUsage'], 0.5);
  assert.equal(load['used'], true);
  assert.equal(load['problem'], null);
  // Order, not speed: the reading was taken after the replica started, which the first request asked for.
  const sinceFirstRequest = performance.now() - beforeFirstRequest;
  assert.ok(typeof load['ageMs'] === 'number' && load['ageMs'] >= 0 && load['ageMs'] <= sinceFirstRequest, `age ${String(load['ageMs'])}, ${sinceFirstRequest} ms since the first request`);
});

test('Kubernetes pods are chosen by their own queues', async () => {
  const api = await startFakeKube();
  open.push(api);
  api.addDeployment(NS, 'llama', 2);
  const pods = await Promise.all([startLoadReplica('pod-a', 6), startLoadReplica('pod-b', 0)]);
  open.push(...pods);
  for (const pod of pods) api.putEndpointSlice(slice(`llama-${new URL(pod.url).port}`, Number(new URL(pod.url).port), [['127.0.0.1', true]]));
  const tg = await startTestGateway(
    rawService({ kubernetes: { namespace: NS, deployment: 'llama', service: 'llama', port: 'http', kubeconfig: writeKubeconfig(api.url) }, max: 4, load: { preset: 'vllm', intervalMs: 500 } }, { slug: 'llama' }),
    { workers: 1 },
  );
  open.push(tg);
  await eventually(async () => (await metric(tg, 'sluice_replica_waiting{service="llama",replica="llama-1"}')) !== undefined && (await metric(tg, 'sluice_replica_waiting{service="llama",replica="llama-2"}')) !== undefined, 10_000, 'both pods read');
  const names: string[] = [];
  for (let i = 0; i < 8; i++) names.push(await post(tg, 'llama'));
  assert.deepEqual([...new Set(names)], ['pod-b']);
  pods[0]!.waiting = 0;
  pods[1]!.waiting = 9;
  await eventually(async () => (await post(tg, 'llama')) === 'pod-a', 10_000, 'the other pod once its queue is shorter');
});

test('workers: 2 — every worker follows the readings', async () => {
  const [a, b] = (await Promise.all([startLoadReplica('a', 0), startLoadReplica('b', 6)])) as [LoadReplica, LoadReplica];
  open.push(a, b);
  const tg = await startTestGateway(rawService({ urls: [a.url, b.url], load: { preset: 'vllm', intervalMs: 500 } }), { workers: 2 });
  open.push(tg);
  const connections: WorkerConnection[] = (await connectionsOnEveryWorker(tg, tg.origin, 2, 1)).flat();
  open.push(...connections.map((c) => c.client));
  const path = new URL(tg.url('/v1/x')).pathname;
  const ask = async (c: WorkerConnection): Promise<string> => {
    const res = await c.client.request({ path, method: 'POST', headers: AUTH, body: '{}' });
    assert.equal(res.statusCode, 200);
    return res.body.text();
  };
  await eventually(async () => (await metric(tg, 'sluice_replica_waiting{service="svc",replica="svc-2"}')) === 6, 10_000, 'the readings');
  for (const c of connections) {
    const names = [await ask(c), await ask(c), await ask(c), await ask(c)];
    assert.deepEqual(names, ['a', 'a', 'a', 'a'], `worker ${c.worker}`);
  }
  a.waiting = 8;
  b.waiting = 0;
  await eventually(async () => (await metric(tg, 'sluice_replica_waiting{service="svc",replica="svc-1"}')) === 8, 10_000, 'the new readings');
  for (const c of connections) {
    const names = [await ask(c), await ask(c), await ask(c), await ask(c)];
    assert.deepEqual(names, ['b', 'b', 'b', 'b'], `worker ${c.worker}`);
  }
});
