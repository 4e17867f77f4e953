// Issue 10, gateway level: endpoints someone else adds (an HPA, a person) get traffic from every
// gateway; a terminating endpoint gets nothing new while the stream in flight on it finishes
// whole; an endpoint leaving the list is dropped and its connections closed; with readyPath, an
// endpoint Kubernetes calls ready but that does not answer it gets nothing; a Deployment lowered by
// someone else mid-stream; more endpoints than the slot table holds.
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import { KubeCluster, parseChatStream, scaleWrites } from '../helpers/kube-gateways.js';
import { NS } from '../helpers/kube.js';
import { heldStreamBody, type TaggedReplica } from '../helpers/tagged-replica.js';
import { eventually } from '../helpers/wait.js';

describe('kubernetes gateways: routing to endpoints', () => {
  let cluster: KubeCluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  test('an endpoint added by someone else gets traffic from every gateway, and the Deployment is left alone', async () => {
    const kc = await KubeCluster.start();
    cluster = kc;
    const { api } = kc;
    const gws = await kc.gatewayGroup(3, {}, { workers: 2 });
    const hpa = await kc.hpaPod('hpa-1');
    for (const [i, gw] of gws.entries()) await eventually(() => KubeCluster.sawReady(gw, 'hpa-1'), 10_000, `gateway ${i} to see hpa-1 ready`);
    const expected: string[] = [];
    for (const [i, gw] of gws.entries()) {
      for (let j = 0; j < 4; j++) {
        const path = `/from/${i}/${j}`;
        expected.push(path);
        const res = await kc.post(gw, path);
        assert.equal(res.status, 200, res.text);
        assert.deepEqual(JSON.parse(res.text), { replica: 'hpa-1', path });
      }
    }
    assert.deepEqual(hpa.requests, expected, 'each request reached the pod once, from every gateway');
    assert.equal(api.scaleOf(NS, 'llama').replicas, 0, 'a ready endpoint needs no scale-up');
    assert.equal(scaleWrites(api, 'patch').length, 0);
    assert.equal(kc.sim().started.length, 0);
  });

  test('a terminating endpoint gets no new request, the stream in flight on it completes whole, and its leaving the list is seen by every gateway', async () => {
    const kc = await KubeCluster.start();
    cluster = kc;
    const gws = await kc.gatewayGroup(3, {}, { workers: 2 });
    const a = await kc.hpaPod('hpa-a');
    for (const [i, gw] of gws.entries()) await eventually(() => KubeCluster.sawReady(gw, 'hpa-a'), 10_000, `gateway ${i} to see hpa-a ready`);

    // A stream in flight on hpa-a, through the two-worker gateway.
    const stream = await kc.open(gws[0]!, '/hold');
    assert.equal(stream.status, 200);
    await eventually(() => a.holding() === 1, 10_000, 'the stream to be held on hpa-a');

    const b = await kc.hpaPod('hpa-b');
    for (const [i, gw] of gws.entries()) await eventually(() => KubeCluster.sawReady(gw, 'hpa-b'), 10_000, `gateway ${i} to see hpa-b ready`);
    kc.markTerminating(a);
    for (const [i, gw] of gws.entries()) await eventually(() => KubeCluster.sawTerminating(gw, 'hpa-a'), 10_000, `gateway ${i} to see hpa-a terminating`);

    // New requests, from every gateway, all go to hpa-b.
    for (const [i, gw] of gws.entries()) {
      for (let j = 0; j < 4; j++) {
        const res = await kc.post(gw, `/after/${i}/${j}`);
        assert.equal(res.status, 200, res.text);
        assert.equal((JSON.parse(res.text) as { replica: string }).replica, 'hpa-b', `request ${j} through gateway ${i}`);
      }
    }
    assert.deepEqual(a.requests, ['/hold'], 'the terminating endpoint got nothing new');
    assert.equal(b.requests.length, 12);

    // The stream on the terminating endpoint finishes whole.
    a.release();
    assert.equal(await stream.text(), heldStreamBody('hpa-a'));

    // The endpoint leaves the list: every gateway drops it, and traffic keeps flowing to hpa-b.
    const openBefore = a.openConnections();
    kc.sim().removeEndpoint('hpa-a');
    for (const [i, gw] of gws.entries()) await eventually(() => KubeCluster.sawGone(gw, 'hpa-a'), 10_000, `gateway ${i} to drop hpa-a`);
    // Its pools are closed: no gateway keeps a connection to a pod that is gone.
    assert.ok(openBefore >= 1, 'precondition of the check below: the gateway that relayed the stream still has its (idle) connection to hpa-a');
    await eventually(() => a.openConnections() === 0, 10_000, `the gateways to close their connections to hpa-a (${a.openConnections()} open)`);
    for (const gw of gws) {
      const res = await kc.post(gw, '/last');
      assert.equal(res.status, 200, res.text);
      assert.equal((JSON.parse(res.text) as { replica: string }).replica, 'hpa-b');
    }
    for (const [i, gw] of gws.entries()) {
      const states = (): string[] => gw.lines('replica state').map((l) => String(l.to));
      await eventually(() => states().includes('draining') && states().includes('stopped'), 10_000, `gateway ${i} to log a replica draining, then stopped`);
      assert.ok(states().indexOf('draining') < states().lastIndexOf('stopped'), `gateway ${i}: ${states().join(', ')}`);
    }
  });

  test('with readyPath, an endpoint Kubernetes calls ready that fails the probe gets nothing: the gateway cold-starts a pod instead, and routes to the endpoint once it answers', async () => {
    const kc = await KubeCluster.start();
    cluster = kc;
    const { api } = kc;
    const setup = { services: [{ replicas: { readyPath: '/health' } }] };
    const gws = await kc.gatewayGroup(2, setup);
    const sick = await kc.hpaPod('sick', { publish: false });
    sick.healthy = false;
    kc.publish(sick);
    for (const [i, gw] of gws.entries()) {
      await eventually(() => gw.lines('kubernetes endpoint').some((l) => l.pod === 'sick'), 10_000, `gateway ${i} to see the sick endpoint`);
      assert.ok(!KubeCluster.sawReady(gw, 'sick'), `gateway ${i} does not route to an endpoint that fails readyPath`);
    }
    const answer = await kc.chat(gws[0]!, ['not', 'the', 'sick', 'one']);
    assert.equal(answer.status, 200, answer.raw);
    assert.equal(answer.reply, 'You said: not the sick one', 'served by the model server the gateway scaled up');
    assert.equal(kc.sim().started.length, 1);
    assert.equal(scaleWrites(api, 'patch').length, 1);
    assert.deepEqual(sick.requests, [], 'the endpoint that failed its probe got nothing');

    // Once it answers its readiness path, each gateway's own probe lets it in.
    sick.healthy = true;
    for (const [i, gw] of gws.entries()) await eventually(() => KubeCluster.sawReady(gw, 'sick'), 10_000, `gateway ${i} to see the endpoint ready after its probe`);
  });

  test('the Deployment lowered by someone else while a stream runs on its pod: the stream finishes whole, and a new request waits for the pod the gateway raises again', async () => {
    // 50 ms per token: a 40-token reply streams for about 2 s.
    const kc = await KubeCluster.start([{ env: { TOKEN_DELAY_MS: '50' } }]);
    cluster = kc;
    const { api } = kc;
    const sim = kc.sim();
    const gws = await kc.gatewayGroup(2, {});
    api.setReplicas(NS, 'llama', 1); // kubectl scale --replicas=1
    await eventually(() => sim.started.length === 1, 10_000, 'the pod to start');
    const first = sim.started[0]!.name;
    for (const [i, gw] of gws.entries()) await eventually(() => KubeCluster.sawReady(gw, first), 10_000, `gateway ${i} to see ${first} ready`);

    const words = Array.from({ length: 38 }, (_, i) => `t${i}`);
    const stream = await kc.open(gws[0]!, '/v1/chat/completions', { model: 'demo', stream: true, max_tokens: 40, messages: [{ role: 'user', content: words.join(' ') }] });
    assert.equal(stream.status, 200);
    let raw = '';
    let ended = false;
    const reading = (async () => {
      for await (const chunk of stream.chunks) raw += chunk.toString();
      ended = true;
    })();
    await eventually(() => raw.includes('data: '), 10_000, 'the first tokens');

    api.setReplicas(NS, 'llama', 0); // kubectl scale --replicas=0: the pod terminates (SIGTERM)
    await sim.settled();
    assert.ok(!ended, 'the stream was still in flight when its pod began terminating');
    for (const [i, gw] of gws.entries()) await eventually(() => KubeCluster.sawTerminating(gw, first), 10_000, `gateway ${i} to see ${first} terminating`);

    // A new request now: nothing routable, so it waits and the gateway raises the Deployment again.
    const next = kc.chat(gws[1]!, ['after', 'the', 'scale', 'down']);
    await reading;
    const whole = parseChatStream(raw);
    assert.equal(whole.reply, `You said: ${words.join(' ')}`, 'the stream on the terminating pod finished whole');
    assert.ok(whole.done);
    const answer = await next;
    assert.equal(answer.status, 200, answer.raw);
    assert.equal(answer.reply, 'You said: after the scale down');
    assert.equal(sim.started.length, 2, 'a second pod served the new request');
    assert.equal(scaleWrites(api, 'patch').length, 1, 'one raise, by a gateway');
    await eventually(() => gws.every((gw) => KubeCluster.sawGone(gw, first)), 10_000, 'the first pod to leave every gateway');
  });

  test('more endpoints than the slot table holds (2 × max + 16): the one beyond gets no request and is logged once, then gets a place when others go', async () => {
    const kc = await KubeCluster.start();
    cluster = kc;
    const { api } = kc;
    const setup = { workers: 2, services: [{ replicas: { max: 1 } }] }; // 18 slots
    const gw = await kc.gateway(setup);
    const readyLines = (): number => gw.lines('replica state').filter((l) => l.to === 'ready').length;
    const pods: TaggedReplica[] = [];
    for (let i = 0; i < 18; i++) pods.push(await kc.hpaPod(`pod-${i}`));
    await eventually(() => readyLines() === 18, 15_000, 'the 18 endpoints to be ready replicas');
    const extra = await kc.hpaPod('pod-extra');
    const noSlot = (): Record<string, unknown>[] => gw.lines('no slot for a kubernetes endpoint; it gets no requests');
    await eventually(() => noSlot().length > 0, 10_000, 'the endpoint beyond the slot table to be logged');
    assert.equal(noSlot()[0]!.pod, 'pod-extra');
    const answers = await Promise.all(Array.from({ length: 36 }, (_, i) => kc.post(gw, `/many/${i}`)));
    assert.ok(answers.every((a) => a.status === 200), 'every request is served by the pods that have a slot');
    assert.deepEqual(extra.requests, [], 'the endpoint with no slot got nothing');

    // Every other pod goes: the one that waited gets a place and the traffic.
    for (const p of pods) kc.sim().removeEndpoint(p.name);
    // The waiting endpoint takes the first slot freed, so wait for every pod to be gone too,
    // not just for it to be ready: until then the pods not yet removed still take requests.
    await eventually(() => readyLines() === 19, 15_000, 'the waiting endpoint to become a ready replica');
    await eventually(() => pods.every((p) => KubeCluster.sawGone(gw, p.name)), 15_000, 'every other pod to be gone');
    const res = await kc.post(gw, '/finally');
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(JSON.parse(res.text), { replica: 'pod-extra', path: '/finally' });
    assert.equal(noSlot().length, 1, 'logged once, not on every retry');
    assert.equal(scaleWrites(api, 'patch').length, 0);
  });

  test('an endpoint Kubernetes marks not ready gets nothing new until it is ready again, in every gateway', async () => {
    const kc = await KubeCluster.start();
    cluster = kc;
    const setup = { services: [{ replicas: { concurrency: 1 } }] };
    const gws = await kc.gatewayGroup(2, setup, { ...setup, workers: 2 });
    const a = await kc.hpaPod('hpa-a');
    const b = await kc.hpaPod('hpa-b');
    for (const [i, gw] of gws.entries()) {
      await eventually(() => KubeCluster.sawReady(gw, 'hpa-a') && KubeCluster.sawReady(gw, 'hpa-b'), 10_000, `gateway ${i} to see both pods`);
    }
    kc.setConditions(a, { ready: false, serving: false, terminating: false }); // its readiness probe fails
    const notReady = (gw: typeof gws[number]): boolean => gw.lines('kubernetes endpoint').some((l) => l.pod === 'hpa-a' && l.ready === false && l.terminating === false);
    for (const [i, gw] of gws.entries()) await eventually(() => notReady(gw), 10_000, `gateway ${i} to see hpa-a not ready`);
    for (const [i, gw] of gws.entries()) {
      for (let j = 0; j < 4; j++) {
        const res = await kc.post(gw, `/held-out/${i}/${j}`);
        assert.equal(res.status, 200, res.text);
        assert.equal((JSON.parse(res.text) as { replica: string }).replica, 'hpa-b');
      }
    }
    assert.deepEqual(a.requests, [], 'nothing reached the pod while it was not ready');

    kc.setConditions(a, { ready: true, serving: true, terminating: false });
    const readyAgain = (gw: typeof gws[number]): boolean => {
      const lines = gw.lines('kubernetes endpoint').filter((l) => l.pod === 'hpa-a');
      return lines.length >= 3 && lines[lines.length - 1]!.ready === true;
    };
    for (const [i, gw] of gws.entries()) await eventually(() => readyAgain(gw), 10_000, `gateway ${i} to see hpa-a ready again`);
    // Back in rotation: with one pod holding a stream (concurrency 1), the next request through
    // the same gateway must go to the other one, whichever it is.
    for (const gw of gws) {
      const held = await kc.open(gw, '/hold');
      assert.equal(held.status, 200);
      await eventually(() => a.holding() + b.holding() === 1, 10_000, 'the stream to be held');
      const other = a.holding() === 1 ? b : a;
      const before = other.requests.length;
      const res = await kc.post(gw, '/next');
      assert.equal(res.status, 200, res.text);
      a.release();
      b.release();
      await held.text();
      assert.equal(other.requests.length, before + 1);
    }
    assert.ok(a.requests.length > 0, 'hpa-a serves again');
    assert.equal(kc.sim().started.length, 0, 'no request waited: no scale-up');
  });

  test('with readyPath, a new pod at the address and port of one that went is a new replica: probed again before it gets a request', async () => {
    const kc = await KubeCluster.start();
    cluster = kc;
    const { api } = kc;
    const setup = { services: [{ replicas: { readyPath: '/health' } }] };
    const gws = await kc.gatewayGroup(2, setup);
    const server = await kc.hpaPod('pod-old');
    for (const [i, gw] of gws.entries()) await eventually(() => KubeCluster.sawReady(gw, 'pod-old'), 10_000, `gateway ${i} to see pod-old ready`);
    const res = await kc.post(gws[0]!, '/old');
    assert.equal(res.status, 200, res.text);

    // pod-old is replaced by pod-new at the same IP and port (the address is reused) in one update
    // of the EndpointSlice; pod-new does not answer its readiness path yet, though Kubernetes
    // already calls it ready.
    server.healthy = false;
    const slice = api.endpointSlice(NS, 'llama-pod-old')!;
    const endpoint = (slice['endpoints'] as { targetRef: { name: string } }[])[0]!;
    endpoint.targetRef.name = 'pod-new';
    api.putEndpointSlice(slice);
    for (const [i, gw] of gws.entries()) {
      await eventually(() => gw.lines('kubernetes endpoint').some((l) => l.pod === 'pod-new'), 10_000, `gateway ${i} to see pod-new`);
      assert.ok(!KubeCluster.sawReady(gw, 'pod-new'), `gateway ${i} waits for its own probe of pod-new`);
    }
    const cold = await kc.chat(gws[1]!, ['not', 'pod', 'new']);
    assert.equal(cold.status, 200, cold.raw);
    assert.equal(cold.reply, 'You said: not pod new', 'served by a pod the gateway raised, not by the unprobed one');
    assert.deepEqual(server.requests, ['/old'], 'nothing reached the new pod before its probe passed');
    assert.equal(scaleWrites(api, 'patch').length, 1);

    server.healthy = true;
    for (const [i, gw] of gws.entries()) await eventually(() => KubeCluster.sawReady(gw, 'pod-new'), 10_000, `gateway ${i} to probe pod-new ready`);
  });
});
