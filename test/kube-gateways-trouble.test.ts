// Issue 10, gateway level, unhappy paths: the API server down (known endpoints keep serving
// through every gateway; a cold service answers 503 no_replica within its queue budget, and
// cold-starts once the API server is back), watches broken and history compacted (every gateway
// relists and routes to endpoints added meanwhile, without dropping one still there), credentials
// the API server refuses, and a kubeconfig that does not exist.
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, test } from 'node:test';
import { assertNoSecrets, eventually, secret } from './helpers/gateway.js';
import { type KubeGateway, KubeCluster, runServeToExit, scaleWrites } from './helpers/kube-gateways.js';
import { NS, writeKubeconfig } from './helpers/kube.js';
import { heldStreamBody, type TaggedReplica } from './helpers/tagged-replica.js';

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

  test('API server down: known endpoints keep serving through every gateway; a cold service answers 503 no_replica within its budget, and cold-starts once the API server is back', async () => {
    const kc = await KubeCluster.start([{ name: 'llama' }, { name: 'mistral' }]);
    cluster = kc;
    const { api } = kc;
    const services = [{ name: 'llama' }, { name: 'mistral', queue: { maxWaitMs: 1_500 } }];
    const gws = await kc.gatewayGroup(3, { services }, { services, workers: 2 });

    const warm = await kc.chat(gws[0]!, ['warm', 'up']);
    assert.equal(warm.status, 200, warm.raw);
    const pod = kc.sim('llama').started[0]!.name;
    for (const [i, gw] of gws.entries()) await eventually(() => KubeCluster.sawReady(gw, pod), 10_000, `gateway ${i} to see ${pod} ready`);

    await api.goDown();
    for (const [i, gw] of gws.entries()) {
      for (let j = 0; j < 3; j++) {
        const res = await kc.chat(gw, ['while', 'down', String(i), String(j)]);
        assert.equal(res.status, 200, `gateway ${i} request ${j}: ${res.raw}`);
        assert.equal(res.reply, `You said: while down ${i} ${j}`);
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
    for (const [i, gw] of gws.entries()) assert.ok(!KubeCluster.sawGone(gw, pod), `gateway ${i} kept the known endpoint`);

    await api.comeUp();
    // Back up: the cold service starts (the first tries may still meet the gateways' backoff).
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
    const warnings = gw.logs.filter((l) => l.level === 'warn' || l.level === 'error' || l.level === 40 || l.level === 50);
    assert.ok(warnings.length > 0, `the refusal was logged: ${gw.output()}`);
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
    // As every failed start (workers-port-in-use): one line on stderr; the log line on stdout.
    const lines = stderr.split('\n').filter((l) => l.trim() !== '');
    assert.equal(lines.length, 1, `one line on stderr: ${stderr}`);
    assert.match(lines[0]!, /^sluice: cannot start: /);
    assert.ok(lines[0]!.includes(missing), `the line names the file: ${lines[0]!}`);
    assert.ok(stdout.split('\n').some((l) => l.includes('"gateway start failed"')), `the start failure is logged: ${stdout}`);
    assert.ok(!stdout.includes('gateway listening'), 'the gateway never listened');
    assertNoSecrets(stdout + stderr);
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
