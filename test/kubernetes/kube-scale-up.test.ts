// Scale-up through deployments/scale, with the real client library against the fake API server
// and the controller simulator starting real replica processes: N gateways raise once, conflicts
// are read again, errors back off and are logged once, and nothing is ever lowered by a raise.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';
import type { KubernetesReplicaSource } from '../../src/control/kinds/kubernetes/kubernetes-source.js';
import { wantedReplicas } from '../../src/control/kinds/kubernetes/scaler.js';
import type { FakeKubeApi } from '../fixtures/fake-kube-api.js';
import { KubeControllerSim } from '../fixtures/kube-controller-sim.js';
import { startReplica } from '../helpers/replica.js';
import { type CapturedLog, KUBE_TOKEN, NS, newSource, type SourceSetup, startFakeKube, writeKubeconfig, stopSources } from '../helpers/kube.js';
import { eventually } from '../helpers/wait.js';

const scaleWrites = (api: FakeKubeApi): number =>
  api.requests.filter((r) => r.resource === 'deployments/scale' && (r.verb === 'patch' || r.verb === 'update') && r.status === 200).length;

describe('kubernetes scale-up', () => {
  let api: FakeKubeApi;
  let sim: KubeControllerSim;
  let kubeconfig: string;
  const sources: { source: KubernetesReplicaSource; log: CapturedLog }[] = [];

  const gateway = (setup: SourceSetup = {}): { source: KubernetesReplicaSource; log: CapturedLog } => {
    const g = newSource(kubeconfig, { replicas: { readyPath: '/health' }, ...setup });
    sources.push(g);
    g.source.start();
    return g;
  };

  beforeEach(async () => {
    api = await startFakeKube({ bookmarkEveryMs: 100 });
    kubeconfig = writeKubeconfig(api.url);
    api.addDeployment(NS, 'llama', 0);
    sim = new KubeControllerSim(api, { namespace: NS, deployment: 'llama', service: 'llama' });
  });
  afterEach(async () => {
    await stopSources(sources);
    await sim.close();
    await api.close();
    assert.deepEqual(api.forbiddenCalls(), [], 'no call outside the Role (docs/kubernetes.md#the-role)');
  });

  test('three gateways see the same cold service: spec.replicas is raised once, one pod starts, every gateway routes to it', async () => {
    const gws = [gateway({ gatewayId: 'a' }), gateway({ gatewayId: 'b' }), gateway({ gatewayId: 'c' })];
    await eventually(() => api.watchCount === 3, 5_000, 'three watches');
    for (const g of gws) g.source.report(4, 0);
    await eventually(() => gws.every((g) => g.source.endpoints().some((e) => e.ready)), 20_000, 'a ready endpoint in every gateway');
    assert.equal(api.scaleOf(NS, 'llama').replicas, 1);
    assert.equal(scaleWrites(api), 1, 'one raise');
    assert.equal(sim.started.length, 1, 'one pod');
    const patches = api.requests.filter((r) => r.verb === 'patch');
    assert.ok(patches.every((r) => r.contentType?.startsWith('application/merge-patch+json')));
    // The losers got 409 (or read a Scale already at 1) and did not write again.
    assert.ok(patches.filter((r) => r.status === 409).length + 1 === patches.length);
    const ups = gws.flatMap((g) => g.log.lines.filter((l) => l['msg'] === 'kubernetes deployment scaled up'));
    assert.equal(ups.length, 1);
    assert.deepEqual([ups[0]!['from'], ups[0]!['to']], [0, 1]);
    // The endpoint the gateways route to is the pod the simulator started.
    const pod = sim.started[0]!;
    for (const g of gws) assert.equal(g.source.endpoints()[0]!.origin, `http://127.0.0.1:${pod.port}`);
  });

  test('pods added by someone else (an HPA, another controller) reach every gateway; none of them writes', async () => {
    api.setReplicas(NS, 'llama', 1);
    const gws = [gateway({ gatewayId: 'a' }), gateway({ gatewayId: 'b' }), gateway({ gatewayId: 'c' })];
    await eventually(() => gws.every((g) => g.source.endpoints().filter((e) => e.ready).length === 1), 20_000, 'one pod everywhere');
    api.setReplicas(NS, 'llama', 2); // the HPA
    const outside = await startReplica((_req, res) => void res.end('ok'));
    try {
      sim.addEndpoint('outside-pod', outside.port); // an endpoint no Deployment of ours runs
      await eventually(() => gws.every((g) => g.source.endpoints().filter((e) => e.ready).length === 3), 20_000, 'three endpoints everywhere');
      assert.ok(gws.every((g) => g.source.endpoints().some((e) => e.port === outside.port && e.pod === 'outside-pod')));
      sim.removeEndpoint('outside-pod');
      await eventually(() => gws.every((g) => g.source.endpoints().length === 2), 10_000, 'the outside endpoint gone everywhere');
    } finally {
      await outside.close();
    }
    assert.equal(scaleWrites(api), 0);
  });

  test('a conflict (someone wrote since the read) is read again, quietly, and the raise goes through', async () => {
    api.failNext('patch', 'deployments/scale', 409, 2);
    const g = gateway();
    g.source.report(1, 0);
    await eventually(() => g.log.lines.some((l) => l['msg'] === 'kubernetes deployment scaled up'), 10_000, 'the raise');
    assert.equal(api.scaleOf(NS, 'llama').replicas, 1);
    assert.equal(api.requests.filter((r) => r.verb === 'patch' && r.status === 409).length, 2);
    assert.ok(api.requests.filter((r) => r.verb === 'get' && r.resource === 'deployments/scale').length >= 3, 'read again after each conflict');
    assert.equal(g.log.lines.filter((l) => Number(l['level']) >= 40).length, 0, 'a conflict is not a warning');
  });

  test('while every ready replica is at its concurrency and requests wait: one more at a time, up to max', async () => {
    api.setReplicas(NS, 'llama', 1);
    const g = gateway({ replicas: { readyPath: '/health', concurrency: 1, max: 3 } });
    await eventually(() => g.source.endpoints().some((e) => e.ready), 20_000, 'the first pod ready');
    const writes = scaleWrites(api);
    g.source.report(5, 1);
    await eventually(() => api.scaleOf(NS, 'llama').replicas === 3, 20_000, 'raised to max');
    const ups = (): unknown[][] => g.log.lines.filter((l) => l['msg'] === 'kubernetes deployment scaled up').map((l) => [l['from'], l['to']]);
    await eventually(() => ups().length === 2, 10_000, 'the second answer');
    assert.equal(scaleWrites(api) - writes, 2, 'two raises of one each: 1 → 2 → 3');
    assert.deepEqual(ups(), [[1, 2], [2, 3]]);
    // More waiting requests never go past max.
    g.source.report(50, 3);
    await eventually(() => g.source.endpoints().filter((e) => e.ready).length === 3, 20_000, 'three ready pods');
    assert.equal(api.scaleOf(NS, 'llama').replicas, 3);
  });

  test('a raise never lowers: with more pods already asked for than this gateway needs, it writes nothing', async () => {
    api.setReplicas(NS, 'llama', 2); // someone else (an HPA) asked for 2; none is ready yet
    const g = gateway();
    g.source.report(3, 0);
    await eventually(() => g.source.endpoints().filter((e) => e.ready).length === 2, 20_000, 'the two pods ready');
    assert.equal(scaleWrites(api), 0);
    assert.equal(api.scaleOf(NS, 'llama').replicas, 2);
  });

  test('API errors on the raise back off and are logged once; the raise lands when the API answers again', async () => {
    api.failNext('patch', 'deployments/scale', 500, 4);
    const g = gateway();
    g.source.report(1, 0);
    await eventually(() => g.log.lines.some((l) => l['msg'] === 'kubernetes deployment scaled up'), 10_000, 'the raise');
    assert.equal(api.scaleOf(NS, 'llama').replicas, 1);
    assert.equal(api.requests.filter((r) => r.verb === 'patch' && r.status === 500).length, 4);
    const warnings = g.log.lines.filter((l) => l['msg'] === 'kubernetes API call failed; retrying with backoff');
    assert.equal(warnings.length, 1);
    assert.deepEqual([warnings[0]!['call'], warnings[0]!['status']], ['scale.raise', 500]);
    assert.equal(g.log.lines.filter((l) => l['msg'] === 'kubernetes API call recovered' && l['call'] === 'scale.raise').length, 1);
  });

  test('a refused call (403: the Role is missing a verb) is an error line with a hint, once', async () => {
    api.failNext('get', 'deployments/scale', 403, 3);
    const g = gateway();
    g.source.report(1, 0);
    await eventually(() => g.log.lines.some((l) => l['msg'] === 'kubernetes deployment scaled up'), 10_000, 'the raise after the refusals');
    const refused = g.log.lines.filter((l) => l['msg'] === 'kubernetes API call refused; retrying with backoff');
    assert.equal(refused.length, 1);
    assert.deepEqual([refused[0]!['level'], refused[0]!['status'], refused[0]!['reason'], refused[0]!['call']], [50, 403, 'Forbidden', 'scale.get']);
    assert.match(String(refused[0]!['hint']), /Role/);
  });

  test('an API server that accepts calls and never answers: each call gives up at its deadline, quietly; the raise lands once it answers', async () => {
    const g = gateway({ tuning: { callTimeoutMs: 200, watchStallMs: 400 } });
    await eventually(() => api.watchCount === 1, 5_000, 'the watch');
    api.hang();
    g.source.report(1, 0);
    await eventually(() => g.log.lines.filter((l) => l['call'] === 'scale.get' && l['reason'] === 'aborted').length >= 2, 10_000, 'calls given up');
    assert.equal(g.log.lines.filter((l) => l['msg'] === 'kubernetes API call failed; retrying with backoff' && l['call'] === 'scale.get').length, 1);
    api.stopHanging();
    await eventually(() => api.scaleOf(NS, 'llama').replicas === 1, 10_000, 'the raise');
    assert.equal(scaleWrites(api), 1);
  });

  test('API server down during a cold start: retries quietly until the queue gives up, then stops asking', async () => {
    const g = gateway();
    await eventually(() => api.watchCount === 1, 5_000, 'the watch');
    await api.goDown();
    g.source.report(2, 0);
    await eventually(() => g.log.lines.filter((l) => l['msg'] === 'kubernetes API call failed again' && l['call'] === 'scale.get').length >= 2, 10_000, 'retries');
    assert.equal(g.log.lines.filter((l) => l['msg'] === 'kubernetes API call failed; retrying with backoff' && l['call'] === 'scale.get').length, 1);
    // The queue's budget ran out: the control plane reports no more waiting requests.
    g.source.report(0, 0);
    await api.comeUp();
    await eventually(() => api.watchCount === 1, 10_000, 'the watch back');
    // A new request after the outage raises as usual: the earlier demand did not linger.
    assert.equal(api.scaleOf(NS, 'llama').replicas, 0);
    g.source.report(1, 0);
    await eventually(() => api.scaleOf(NS, 'llama').replicas === 1, 10_000, 'the raise after the outage');
    assert.equal(scaleWrites(api), 1);
  });
});

describe('kubernetes scale-down, as the gateways see it', () => {
  test('a pod being removed turns terminating at once (not routable); a stream in flight on it completes; then it is gone', async () => {
    const api = await startFakeKube({ bookmarkEveryMs: 100 });
    const sim = new KubeControllerSim(api, { namespace: NS, deployment: 'llama', service: 'llama', env: { TOKEN_DELAY_MS: '40' } });
    api.addDeployment(NS, 'llama', 0);
    const { source, log } = newSource(writeKubeconfig(api.url), { replicas: { readyPath: '/health' } });
    const seen: string[] = [];
    source.onEndpoints((eps) => seen.push(eps.map((e) => `${e.ready ? 'ready' : e.terminating ? 'terminating' : 'starting'}`).join(',')));
    source.start();
    try {
      api.setReplicas(NS, 'llama', 1);
      await eventually(() => source.endpoints()[0]?.ready === true, 20_000, 'the pod ready');
      const pod = source.endpoints()[0]!;
      // A stream of 12 tokens, 40 ms apart, straight to the pod.
      const res = await fetch(`${pod.origin}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'toy', prompt: 'a b c d e f g h i j k l', max_tokens: 12, stream: true }),
      });
      assert.equal(res.status, 200);
      const body = res.text();
      api.setReplicas(NS, 'llama', 0);
      await eventually(() => source.endpoints()[0]?.terminating === true, 10_000, 'terminating');
      assert.equal(source.endpoints()[0]!.ready, false, 'no new request goes to a terminating pod');
      const text = await body;
      assert.match(text, /data: \[DONE\]/, 'the stream in flight completed');
      await eventually(() => source.endpoints().length === 0, 10_000, 'gone once its process exited');
      assert.deepEqual(seen.filter((s, i) => s !== seen[i - 1]), ['starting', 'ready', 'terminating', '']);
      assert.ok(!log.text().includes(KUBE_TOKEN));
    } finally {
      await source.stop();
      await sim.close();
      await api.close();
    }
    assert.deepEqual(api.forbiddenCalls(), []);
  });
});

describe('wantedReplicas', () => {
  test('the rule of docs/api.md#cold-start-and-the-queue, docs/kubernetes.md', () => {
    // (current, routable, queued, inflight, concurrency, max)
    // cold: at least 1
    assert.equal(wantedReplicas(0, 0, 1, 0, 0, 3), 1);
    assert.equal(wantedReplicas(0, 0, 1, 0, 4, 3), 1);
    // unlimited concurrency: one coming or routable pod takes every waiting request
    assert.equal(wantedReplicas(1, 0, 100, 0, 0, 3), 1);
    assert.equal(wantedReplicas(1, 1, 100, 7, 0, 3), 1, 'a pod just ready, the queue not handed to it yet');
    // one coming pod takes `concurrency` of them; more wait: one more
    assert.equal(wantedReplicas(1, 0, 3, 0, 2, 3), 2);
    assert.equal(wantedReplicas(2, 0, 3, 0, 2, 3), 2);
    // room left on a routable pod counts
    assert.equal(wantedReplicas(1, 1, 2, 2, 4, 3), 1);
    assert.equal(wantedReplicas(1, 1, 3, 2, 4, 3), 2);
    // all ready at capacity, requests wait: one more, never past max
    assert.equal(wantedReplicas(2, 2, 1, 8, 4, 3), 3);
    assert.equal(wantedReplicas(3, 3, 10, 12, 4, 3), 3);
    // nothing waits: what is there stays (never lower)
    assert.equal(wantedReplicas(5, 5, 0, 0, 1, 3), 5);
    assert.equal(wantedReplicas(5, 0, 1, 0, 1, 3), 5);
  });
});
