// Issue 10, gateway level, unhappy paths: the API server down or black-holed (known endpoints keep
// serving through every gateway; a cold service answers 503 no_replica after its queue budget, and
// cold-starts once the API server is back; one warning per kind of call, even for a second
// outage), a scale-up answered 500 (retried), watches broken and history compacted (every gateway
// relists and routes to endpoints added meanwhile, without dropping one still there), watches cut
// again soon after an outage (resumed at once, not after the backoff the outage grew), credentials
// the API server refuses, and a kubeconfig that does not exist.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, test } from 'node:test';
import { assertNoSecrets, secret } from '../helpers/gateway.js';
import type { FakeKubeApi } from '../fixtures/fake-kube-api.js';
import { type KubeGateway, KubeCluster, runServeToExit, scaleWrites } from '../helpers/kube-gateways.js';
import { NS, writeKubeconfig } from '../helpers/kube.js';
import { heldStreamBody, type TaggedReplica } from '../helpers/tagged-replica.js';
import { eventually } from '../helpers/wait.js';

/** The warnings of API calls starting to fail. */
function failedLines(gw: KubeGateway): Record<string, unknown>[] {
  return gw.lines('kubernetes API call failed; retrying with backoff');
}

/** The error code of a Sluice error answer. */
function errorCode(text: string): string | undefined {
  try {
    return (JSON.parse(text) as { error?: { code?: string } }).error?.code;
  } catch {
    return undefined;
  }
}

describe('kubernetes gateways: API server trouble', () => {
  let cluster: KubeCluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  const outages = [
    // Down: every connection is reset, the watches too.
    { name: 'down (connections refused)', watchesBreak: true, begin: (api: FakeKubeApi) => api.goDown(), end: (api: FakeKubeApi) => api.comeUp() },
    // Black-holed: new calls hang (and time out); the watches already open keep their connection.
    {
      name: 'black-holed (requests accepted, never answered)',
      watchesBreak: false,
      begin: (api: FakeKubeApi) => api.hang(),
      end: (api: FakeKubeApi) => api.stopHanging(),
    },
  ];
  for (const outage of outages) {
    test(`API server ${outage.name}: known endpoints keep serving through every gateway; a cold service answers 503 no_replica within its budget, and cold-starts once the API server is back; one warning per kind of call`, async () => {
      const kc = await KubeCluster.start([{ name: 'llama' }, { name: 'mistral' }]);
      cluster = kc;
      const { api } = kc;
      const services = [{ name: 'llama' }, { name: 'mistral', queue: { maxWaitMs: 1_500 } }];
      // Calls time out after 1 s (a black-holed call must not hold a scale-up for the default 10 s).
      const setup = { services, tuning: { callTimeoutMs: 1_000 } };
      const gws = await kc.gatewayGroup(3, setup, { ...setup, workers: 2 });

      const warm = await kc.chat(gws[0]!, ['warm', 'up']);
      assert.equal(warm.status, 200, warm.raw);
      const pod = kc.sim('llama').started[0]!.name;
      for (const [i, gw] of gws.entries()) await eventually(() => KubeCluster.sawReady(gw, pod), 10_000, `gateway ${i} to see ${pod} ready`);

      await outage.begin(api);
      for (const [i, gw] of gws.entries()) {
        for (let j = 0; j < 3; j++) {
          const res = await kc.chat(gw, ['while', 'out', String(i), String(j)]);
          assert.equal(res.status, 200, `gateway ${i} request ${j}: ${res.raw}`);
          assert.equal(res.reply, `You said: while out ${i} ${j}`);
        }
      }
      const cold = await Promise.all(gws.map((gw) => kc.post(gw, '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }] }, 'mistral')));
      cold.forEach((res, i) => {
        assert.equal(res.status, 503, `gateway ${i}: ${res.text}`);
        assert.equal(errorCode(res.text), 'no_replica', `gateway ${i}: ${res.text}`);
        assert.equal(res.headers['x-sluice-error'], 'no_replica');
        assert.ok(res.headers['retry-after'] !== undefined, 'with Retry-After');
      });
      assert.equal(kc.sim('mistral').started.length, 0);
      // Each waited out its budget (a cold start waits, it does not fail at once: docs/kubernetes.md).
      for (const [i, gw] of gws.entries()) {
        await eventually(() => gw.lines('request').some((l) => l.service === 'mistral'), 10_000, `gateway ${i}'s access line of the cold request`);
        const line = gw.lines('request').find((l) => l.service === 'mistral')!;
        assert.equal(line.outcome, 'no_replica');
        assert.ok(Number(line.queuedMs) >= 1_400, `gateway ${i} queued the request for its budget (${String(line.queuedMs)} ms)`);
      }
      // Every gateway noticed (its scale-up for mistral failed), with one warning per kind of call.
      for (const [i, gw] of gws.entries()) {
        await eventually(() => failedLines(gw).some((l) => l.service === 'mistral'), 15_000, `gateway ${i} to log the failing API calls`);
      }
      for (const [i, gw] of gws.entries()) assert.ok(!KubeCluster.sawGone(gw, pod), `gateway ${i} kept the known endpoint`);

      await outage.end(api);
      // Back: the cold service starts (the first tries may still meet the gateways' backoff).
      let served: Awaited<ReturnType<KubeCluster['chat']>> | undefined;
      await eventually(async () => {
        served = await kc.chat(gws[1]!, ['back', 'up'], 'mistral');
        return served.status === 200;
      }, 30_000, 'the cold service to start once the API server is back');
      assert.equal(served!.reply, 'You said: back up');
      assert.equal(kc.sim('mistral').started.length, 1, 'one pod for the cold service');
      assert.equal(scaleWrites(api, 'patch', 'mistral').length, 1, 'raised once');
      assert.equal(scaleWrites(api, 'patch', 'llama').length, 1, 'the warm service was raised once, before');
      for (const [i, gw] of gws.entries()) {
        const res = await kc.chat(gw, ['llama', 'still', 'here']);
        assert.equal(res.status, 200, `gateway ${i}: ${res.raw}`);
        assert.ok(!KubeCluster.sawGone(gw, pod), `gateway ${i} never dropped the pod that stayed`);
      }
      // Each kind of call that failed warned once per service, and says so when it works again.
      for (const [i, gw] of gws.entries()) {
        const failed = failedLines(gw);
        const kinds = failed.map((l) => `${String(l.service)} ${String(l.call)}`);
        assert.equal(new Set(kinds).size, kinds.length, `gateway ${i}: one warning per kind of call, not per retry: ${kinds.join(', ')}`);
        const recovered = (): string[] => gw.lines('kubernetes API call recovered').map((l) => `${String(l.service)} ${String(l.call)}`);
        // Scale calls are made only while requests wait: the queue gave up on the cold request,
        // so the gateway gives up their failures (the next outage warns again).
        const givenUp = (): string[] => gw.lines('kubernetes API call given up; nothing needs it now').map((l) => `${String(l.service)} ${String(l.call)}`);
        if (outage.watchesBreak) assert.ok(kinds.some((k) => k.endsWith(' endpointslices.watch')), `gateway ${i}: the watches failed: ${kinds.join(', ')}`);
        await eventually(
          () => kinds.every((k) => recovered().includes(k) || (k.includes(' scale.') && givenUp().includes(k))),
          15_000,
          `gateway ${i} to log the end of every failure: ${kinds.join(', ')}`,
        );
      }
    });
  }

  test('a scale-up answered 500 twice is retried with a backoff: the cold request still succeeds, one raise lands, one warning then one recovery line', async () => {
    const kc = await KubeCluster.start();
    cluster = kc;
    const { api } = kc;
    const gw = await kc.gateway();
    api.failNext('patch', 'deployments/scale', 500, 2);
    const res = await kc.chat(gw, ['despite', 'errors']);
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.reply, 'You said: despite errors');
    const patches = api.requests.filter((r) => r.resource === 'deployments/scale' && r.verb === 'patch');
    assert.deepEqual(patches.map((r) => r.status), [500, 500, 200]);
    assert.equal(kc.sim().started.length, 1);
    await eventually(() => gw.lines('kubernetes API call recovered').length === 1, 10_000, 'the recovery line');
    const failed = failedLines(gw);
    assert.equal(failed.length, 1, `one warning for two failures: ${JSON.stringify(failed)}`);
    assert.equal(failed[0]!.status, 500);
    assert.equal(gw.lines('kubernetes API call recovered')[0]!.call, failed[0]!.call);
  });

  test('a second outage warns again: a scale call that failed while a request waited, and was not needed again, must not turn the next outage\'s warning into a debug line', async () => {
    const kc = await KubeCluster.start();
    cluster = kc;
    const { api } = kc;
    const gw = await kc.gateway({ services: [{ queue: { maxWaitMs: 1_000 } }] });
    const scaleWarnings = (): number => failedLines(gw).filter((l) => String(l.call).startsWith('scale.')).length;
    const scaleGivenUp = (): number => gw.lines('kubernetes API call given up; nothing needs it now').filter((l) => String(l.call).startsWith('scale.')).length;
    const coldWhileDown = async (outage: number): Promise<void> => {
      await api.goDown();
      const res = await kc.post(gw, '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }] });
      assert.equal(res.status, 503, res.text);
      assert.equal(errorCode(res.text), 'no_replica');
      // The scale-up gives up once it sees the queue empty (after its current backoff): wait for
      // that before the API server comes back (else, still retrying, it raises for a request that left).
      await eventually(() => scaleGivenUp() === outage, 15_000, `outage ${outage}: the scale-up to give up`);
    };
    await coldWhileDown(1);
    assert.equal(scaleWarnings(), 1, 'the first outage\'s scale warning');
    await api.comeUp();
    await eventually(() => api.watchCount === 1, 15_000, 'the watch to resume');
    assert.ok(!gw.lines('kubernetes API call recovered').some((l) => String(l.call).startsWith('scale.')), 'no scale call after the outage: nothing waits');
    assert.equal(api.scaleOf(NS, 'llama').replicas, 0);
    // A second outage, much later for all the gateway knows: its operator must be warned again.
    await coldWhileDown(2);
    assert.equal(scaleWarnings(), 2, 'a warning for the second outage\'s failing scale call');
    await api.comeUp();
  });

  test('watches broken and history compacted: every gateway relists, sees the endpoints added and removed meanwhile, routes to the new ones and keeps the one still there', async () => {
    const kc = await KubeCluster.start();
    cluster = kc;
    const { api } = kc;
    // concurrency 1: two requests at once through a gateway must use two endpoints.
    const setup = { services: [{ replicas: { concurrency: 1, max: 1 } }] };
    const gws = await kc.gatewayGroup(3, setup, { ...setup, workers: 2 });
    const a = await kc.hpaPod('hpa-a');
    const c = await kc.hpaPod('hpa-c');
    for (const [i, gw] of gws.entries()) {
      await eventually(() => KubeCluster.sawReady(gw, 'hpa-a') && KubeCluster.sawReady(gw, 'hpa-c'), 10_000, `gateway ${i} to see hpa-a and hpa-c`);
    }
    const lists = (): number => api.requests.filter((r) => r.resource === 'endpointslices' && r.verb === 'list').length;

    // 1. Watches reset; in the same tick hpa-b comes, hpa-c goes, and the history is compacted,
    //    so every gateway's resume is answered 410 Gone.
    const b = await kc.hpaPod('hpa-b', { publish: false });
    const listsBefore = lists();
    api.breakWatches();
    kc.publish(b);
    kc.sim().removeEndpoint('hpa-c');
    api.compact();
    for (const [i, gw] of gws.entries()) {
      await eventually(() => KubeCluster.sawReady(gw, 'hpa-b') && KubeCluster.sawGone(gw, 'hpa-c'), 15_000, `gateway ${i} to see hpa-b come and hpa-c go`);
    }
    assert.ok(lists() >= listsBefore + 3, `every gateway relisted (${lists() - listsBefore} lists)`);
    await routesToEach(kc, gws, [a, b]);

    // 2. The API server goes away; meanwhile hpa-d comes and the history is compacted again.
    const d = await kc.hpaPod('hpa-d', { publish: false });
    await api.goDown();
    kc.publish(d);
    api.compact();
    await api.comeUp();
    for (const [i, gw] of gws.entries()) await eventually(() => KubeCluster.sawReady(gw, 'hpa-d'), 15_000, `gateway ${i} to see hpa-d`);
    await routesToEach(kc, gws, [a, b, d]);

    for (const [i, gw] of gws.entries()) {
      assert.ok(!KubeCluster.sawGone(gw, 'hpa-a') && !KubeCluster.sawGone(gw, 'hpa-b'), `gateway ${i} never dropped an endpoint that stayed`);
    }
    assert.deepEqual(c.requests, [], 'the endpoint that left got nothing');
    assert.equal(kc.sim().started.length, 0, 'no scale-up: the endpoints covered every request');
  });

  test('after an outage, a resumed watch ends the backoff once accepted: watches cut again resume at once, and with the history compacted meanwhile every gateway relists and routes to a pod that became ready meanwhile', async () => {
    // No periodic bookmarks: a watch resumed after the outage stays silent (nothing changed, no
    // bookmark yet), as on a real cluster, which sends one about once a minute.
    const kc = await KubeCluster.start([{}], { bookmarkEveryMs: 0 });
    cluster = kc;
    const { api } = kc;
    // The default backoff (250 ms doubling to 10 s); no stall restart while the watches are silent.
    // Debug lines: every failed retry of the watch is logged, with its count.
    const tuning = { backoffBaseMs: 250, backoffMaxMs: 10_000, watchStallMs: 60_000 };
    const gws = await kc.gatewayGroup(3, { tuning, logLevel: 'debug' });
    const a = await kc.hpaPod('hpa-a');
    for (const [i, gw] of gws.entries()) await eventually(() => KubeCluster.sawReady(gw, 'hpa-a'), 10_000, `gateway ${i} to see hpa-a ready`);
    const lists = (): number => api.requests.filter((r) => r.resource === 'endpointslices' && r.verb === 'list').length;
    const watchRecovered = (gw: KubeGateway): boolean => gw.lines('kubernetes API call recovered').some((l) => l.call === 'endpointslices.watch');

    // 1. An outage long enough for every gateway's watch backoff to grow to 4 s or more (its fifth
    //    refused try, after retries 0.25, 0.5, 1 and 2 s apart), then the watches resume: each is
    //    accepted and says so (a resumed watch stays silent here: no change, no bookmark).
    await api.goDown();
    for (const [i, gw] of gws.entries()) {
      await eventually(
        () => gw.lines('kubernetes API call failed again').some((l) => l.call === 'endpointslices.watch' && Number(l.failures) >= 5),
        30_000,
        `gateway ${i}'s watch to fail five times`,
      );
    }
    await api.comeUp();
    await eventually(() => api.watchCount === 3, 30_000, 'every gateway to resume its watch');
    // The failure count (and with it the backoff) ends when the resumed watch is accepted, not at
    // its first event: the recovery line says so before any event came.
    for (const [i, gw] of gws.entries()) await eventually(() => watchRecovered(gw), 15_000, `gateway ${i} to log its watch's recovery`);
    assert.equal(api.watchCount, 3, 'the resumed watches stayed open');

    // 2. A stream held on hpa-a through each gateway: a gateway that knows hpa-b sends its next
    //    request there (fewest requests in flight), one that does not sends it to hpa-a.
    const held = gws.map((gw) => kc.open(gw, '/hold'));
    await eventually(() => a.holding() === 3, 10_000, 'a stream held on hpa-a through each gateway');

    // 3. In one tick every watch is cut, hpa-b becomes ready and the history is compacted: each
    //    gateway's next watch is answered 410 Gone and it relists.
    const b = await kc.hpaPod('hpa-b', { publish: false });
    const listsBefore = lists();
    api.breakWatches();
    kc.publish(b);
    api.compact();
    // Each gateway retries at once (its backoff ended with the recovery above), relists and routes
    // to hpa-b. How soon is not asserted (a busy machine decides that); the order is: the recovery
    // (the backoff's end) came before the cut.
    const which = async (gw: KubeGateway): Promise<string> => {
      const res = await kc.post(gw, '/which');
      assert.equal(res.status, 200, res.text);
      return (JSON.parse(res.text) as { replica: string }).replica;
    };
    for (const [i, gw] of gws.entries()) await eventually(async () => (await which(gw)) === 'hpa-b', 30_000, `gateway ${i} to send a request to hpa-b`);
    assert.ok(lists() >= listsBefore + 3, `every gateway relisted (${lists() - listsBefore} lists)`);

    a.release();
    const bodies = await Promise.all(held.map(async (s) => (await s).text()));
    assert.deepEqual(bodies, gws.map(() => heldStreamBody('hpa-a')));
    // Logged once: a warning when the outage began and a recovery line once the resumed watch was
    // accepted; the cut of a watch that had been working is no failure to warn about.
    for (const [i, gw] of gws.entries()) {
      const warnings = failedLines(gw).map((l) => String(l.call));
      assert.deepEqual(warnings, ['endpointslices.watch'], `gateway ${i}: one warning, for the outage`);
      const recovered = gw.lines('kubernetes API call recovered').filter((l) => l.call === 'endpointslices.watch');
      assert.equal(recovered.length, 1, `gateway ${i}: one recovery line for the watch`);
    }
  });

  test('credentials the API server refuses: the gateway runs, a cold request answers 503 no_replica within its budget, and the token is never logged', async () => {
    const kc = await KubeCluster.start();
    cluster = kc;
    const { api } = kc;
    const wrong = secret('eyJhbGciOiJSUzI1NiJ9.a-token-the-api-server-refuses.c2lnbmF0dXJl');
    const kubeconfig = writeKubeconfig(api.url, wrong);
    const gw = await kc.gateway({ kubeconfig, services: [{ queue: { maxWaitMs: 1_500 } }] });
    const res = await kc.post(gw, '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(res.status, 503, res.text);
    assert.equal(errorCode(res.text), 'no_replica');
    assert.ok(api.requests.some((r) => r.status === 401), 'the API server refused the calls');
    assert.equal(api.scaleOf(NS, 'llama').replicas, 0);
    assert.equal(kc.sim().started.length, 0);
    // Not a passing outage: an error line per kind of call, with the status and a hint, once.
    await eventually(() => gw.lines('kubernetes API call refused; retrying with backoff').length > 0, 10_000, 'the refusal to be logged');
    const refused = gw.lines('kubernetes API call refused; retrying with backoff');
    assert.ok(refused.every((l) => l.status === 401 && typeof l.hint === 'string'), JSON.stringify(refused));
    const kinds = refused.map((l) => String(l.call));
    assert.equal(new Set(kinds).size, kinds.length, `once per kind of call: ${kinds.join(', ')}`);
    assert.ok(!gw.output().includes(wrong), 'the refused token is not in the log');
    assert.ok(gw.child.exitCode === null, 'the gateway keeps running');
  });

  test('a kubeconfig that does not exist: sluice serve exits 1 with one line on stderr naming it', async () => {
    const missing = join(mkdtempSync(join(tmpdir(), 'sluice-kube-')), 'no-such-kubeconfig');
    const config = {
      workers: 1,
      services: [
        {
          slug: 'llama',
          tokens: [{ name: 'test', sha256: '0'.repeat(64) }],
          replicas: { kubernetes: { namespace: NS, deployment: 'llama', service: 'llama', port: 'http', kubeconfig: missing } },
        },
      ],
    };
    const { code, stdout, stderr } = await runServeToExit(config);
    assert.equal(code, 1, `exit code: ${stdout}${stderr}`);
    // As every failed start (port-in-use.test.ts): one line on stderr; the log line on stdout.
    const lines = stderr.split('\n').filter((l) => l.trim() !== '');
    assert.equal(lines.length, 1, `one line on stderr: ${stderr}`);
    assert.match(lines[0]!, /^sluice: cannot start: /);
    assert.ok(lines[0]!.includes(missing), `the line names the file: ${lines[0]!}`);
    assert.ok(stdout.split('\n').some((l) => l.includes('"gateway start failed"')), `the start failure is logged: ${stdout}`);
    assert.ok(!stdout.includes('gateway listening'), 'the gateway never listened');
    assertNoSecrets(stdout + stderr);
  });

  test('a Deployment that does not exist (a wrong name in the config): the gateway runs, says so with a hint, and a cold request answers 503 no_replica', async () => {
    const kc = await KubeCluster.start([{ name: 'llama' }]);
    cluster = kc;
    const { api } = kc;
    const config = kc.config({ services: [{ queue: { maxWaitMs: 1_000 } }] });
    // The service follows Deployment `lama` (a typo) and Service `llama`.
    const replicas = (config['services'] as { replicas: { kubernetes: Record<string, unknown> } }[])[0]!.replicas;
    replicas.kubernetes['deployment'] = 'lama';
    const gw = await kc.gatewayFromConfig(config);
    const res = await kc.post(gw, '/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(res.status, 503, res.text);
    assert.equal(errorCode(res.text), 'no_replica');
    await eventually(() => gw.lines('kubernetes API call refused; retrying with backoff').length > 0, 10_000, 'the refusal to be logged');
    const refused = gw.lines('kubernetes API call refused; retrying with backoff');
    assert.ok(refused.every((l) => l.status === 404 && l.deployment === 'lama' && typeof l.hint === 'string'), JSON.stringify(refused));
    assert.ok(api.requests.some((r) => r.resource === 'deployments/scale' && r.status === 404));
    assert.equal(api.scaleOf(NS, 'llama').replicas, 0, 'the Deployment named like the Service is not touched');
  });
});

/** Through each gateway, as many held requests at once as `replicas` (concurrency 1): one lands on each. */
async function routesToEach(kc: KubeCluster, gws: KubeGateway[], replicas: TaggedReplica[]): Promise<void> {
  for (const [i, gw] of gws.entries()) {
    const before = replicas.map((r) => r.requests.length);
    // Not awaited yet: a request queued behind another (two on one endpoint) would not answer.
    const opening = replicas.map(() => kc.open(gw, '/hold'));
    await eventually(() => replicas.every((r) => r.holding() === 1), 10_000, `gateway ${i}'s requests to be held, one on each endpoint`);
    const streams = await Promise.all(opening);
    assert.deepEqual(streams.map((s) => s.status), replicas.map(() => 200));
    replicas.forEach((r, k) => assert.equal(r.requests.length, before[k]! + 1, `gateway ${i}: one request on ${r.name}`));
    for (const r of replicas) r.release();
    const bodies = await Promise.all(streams.map((s) => s.text()));
    assert.deepEqual(bodies.sort(), replicas.map((r) => heldStreamBody(r.name)).sort());
  }
}
