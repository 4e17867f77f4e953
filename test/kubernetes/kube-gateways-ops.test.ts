// Issue 10, gateway level, operations: a rolling restart of the gateways (SIGTERM drains one while
// a stream runs through it; the others keep serving; nothing is scaled), and a token reload
// (SIGHUP) that leaves the Kubernetes source as it was: one watch, endpoints still followed; a
// draining gateway's long stream keeps the Deployment up.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { afterEach, describe, test } from 'node:test';
import { request } from 'undici';
import { sha256Hex } from '../../src/cli/token.js';
import { secret } from '../helpers/gateway.js';
import { KubeCluster, parseChatStream, scaleWrites } from '../helpers/kube-gateways.js';
import { NS } from '../helpers/kube.js';
import { heldStreamBody } from '../helpers/tagged-replica.js';
import { eventually } from '../helpers/wait.js';

const NEW_TOKEN = secret('slc_kube_token_added_by_the_reload_22222222222222222');

describe('kubernetes gateways: operations', () => {
  let cluster: KubeCluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  test('SIGTERM on one gateway (a rolling restart): its stream in flight finishes, it exits 0, the others keep serving, and the Deployment is left alone', async () => {
    const kc = await KubeCluster.start();
    cluster = kc;
    const { api } = kc;
    const [a, b] = await kc.gatewayGroup(2, {}, { workers: 2 });
    const pod = await kc.hpaPod('hpa-a');
    for (const gw of [a!, b!]) await eventually(() => KubeCluster.sawReady(gw, 'hpa-a'), 10_000, 'both gateways to see hpa-a');

    const stream = await kc.open(a!, '/hold');
    assert.equal(stream.status, 200);
    await eventually(() => pod.holding() === 1, 10_000, 'the stream to be held');
    a!.child.kill('SIGTERM');

    // b serves on while a drains.
    for (let i = 0; i < 3; i++) {
      const res = await kc.post(b!, `/during/${i}`);
      assert.equal(res.status, 200, res.text);
    }
    assert.equal(a!.child.exitCode, null, 'a waits for its stream in flight');
    pod.release();
    assert.equal(await stream.text(), heldStreamBody('hpa-a'), 'the stream finished whole');
    assert.equal(await a!.exited, 0, 'a exited 0 after its drain');
    assert.deepEqual(
      a!.lines('kubernetes deployment scaled down after idle'),
      [],
      'a gateway going away lowers nothing',
    );
    const after = await kc.post(b!, '/after');
    assert.equal(after.status, 200, after.text);
    assert.equal(api.scaleOf(NS, 'llama').replicas, 0);
    assert.equal(scaleWrites(api, 'patch').length + scaleWrites(api, 'update').length, 0, 'no write to the Scale');
  });

  test('SIGHUP reloads the tokens of a kubernetes service and leaves its source as it was: one watch, new endpoints still followed', async () => {
    const kc = await KubeCluster.start();
    cluster = kc;
    const { api } = kc;
    const setup = { workers: 2 };
    const gw = await kc.gateway(setup);
    const first = await kc.hpaPod('hpa-1');
    await eventually(() => KubeCluster.sawReady(gw, 'hpa-1'), 10_000, 'the gateway to see hpa-1');
    await eventually(() => api.watchCount === 1, 10_000, 'one watch');

    const config = kc.config(setup);
    const services = config['services'] as Record<string, unknown>[];
    services[0]!['tokens'] = [{ name: 'new', sha256: sha256Hex(NEW_TOKEN) }];
    writeFileSync(gw.configFile, JSON.stringify({ listen: { host: '127.0.0.1', port: gw.port }, ...config }));
    gw.child.kill('SIGHUP');
    await eventually(() => [0, 1].every((w) => gw.logs.some((l) => l.msg === 'tokens reloaded' && l.worker === w)), 10_000, 'both workers to reload their tokens');

    const withNew = await request(gw.url('/new-token', 'llama'), { method: 'POST', headers: { authorization: `Bearer ${NEW_TOKEN}` }, body: '{}' });
    assert.equal(withNew.statusCode, 200, await withNew.body.text());
    const withOld = await kc.post(gw, '/old-token');
    assert.equal(withOld.status, 401, 'the token the reload removed is refused');

    assert.equal(gw.lines('kubernetes replica source started').length, 1, 'the source was not restarted');
    assert.equal(api.watchCount, 1, 'still one watch');
    const second = await kc.hpaPod('hpa-2');
    kc.sim().removeEndpoint('hpa-1');
    await eventually(() => KubeCluster.sawReady(gw, 'hpa-2') && KubeCluster.sawGone(gw, 'hpa-1'), 10_000, 'the gateway to follow the endpoints after the reload');
    const res = await request(gw.url('/after-reload', 'llama'), { method: 'POST', headers: { authorization: `Bearer ${NEW_TOKEN}` }, body: '{}' });
    assert.equal(res.statusCode, 200);
    assert.deepEqual(await res.body.json(), { replica: 'hpa-2', path: '/after-reload' });
    assert.deepEqual(first.requests, ['/new-token']);
    assert.deepEqual(second.requests, ['/after-reload']);
  });

  test('a draining gateway keeps its stream on the Lease: no other gateway lowers the Deployment until the stream ends', async () => {
    const idleTimeoutMs = 3_000;
    // 100 ms per token: a 50-token reply streams for about 5 s.
    const kc = await KubeCluster.start([{ env: { TOKEN_DELAY_MS: '100' } }]);
    cluster = kc;
    const { api } = kc;
    const setup = { drainTimeoutMs: 30_000, services: [{ replicas: { idleTimeoutMs } }] };
    const [a, b] = await kc.gatewayGroup(2, setup);
    const words = Array.from({ length: 48 }, (_, i) => `d${i}`);
    const stream = await kc.open(a!, '/v1/chat/completions', { model: 'demo', stream: true, max_tokens: 50, messages: [{ role: 'user', content: words.join(' ') }] });
    assert.equal(stream.status, 200);
    const startedAt = Date.now();
    a!.child.kill('SIGTERM'); // a rolling restart reaches a while it relays
    let raw = '';
    let checked = false;
    for await (const chunk of stream.chunks) {
      raw += chunk.toString();
      if (!checked && Date.now() - startedAt > idleTimeoutMs * 1.3) {
        checked = true;
        assert.equal(api.scaleOf(NS, 'llama').replicas, 1, 'not lowered while the draining gateway streams');
        assert.equal(scaleWrites(api, 'update').length, 0);
      }
    }
    assert.ok(checked, 'the stream outlived 1.3 × idleTimeoutMs (else the check above did not happen)');
    assert.equal(parseChatStream(raw).reply, `You said: ${words.join(' ')}`, 'the stream finished whole');
    assert.equal(await a!.exited, 0);
    // Then, with no traffic anywhere, b lowers it once.
    await eventually(() => api.scaleOf(NS, 'llama').replicas === 0, 30_000, 'the idle scale-down by b');
    await eventually(() => b!.lines('kubernetes deployment scaled down after idle').length === 1, 10_000, "b's line");
    assert.equal(scaleWrites(api, 'update').length, 1);
  });
});
