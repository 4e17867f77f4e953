// Issue 10, gateway level: several real `sluice serve` processes in front of one Deployment,
// coordinated only through the (fake) Kubernetes API. A cold burst over three gateways causes one
// scale-up and one pod (with concurrency 1, one step at a time up to max); idle, one gateway lowers
// the Deployment to `min` once, never while another gateway still relays, and the next request
// cold-starts again; a gateway killed while relaying does not hold the Deployment up.
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import type { FakeKubeApi } from '../fixtures/fake-kube-api.js';
import { KubeCluster, parseChatStream, scaleWrites } from '../helpers/kube-gateways.js';
import { NS } from '../helpers/kube.js';
import { eventually } from '../helpers/wait.js';

/** Waits for `n` reads of the Scale after request number `from`: idle checks that found the Deployment at min (and wrote nothing). */
const scaleReadsAfter = (api: FakeKubeApi, from: number, n: number): Promise<void> =>
  eventually(() => api.requests.slice(from).filter((r) => r.resource === 'deployments/scale' && r.verb === 'get').length >= n, 30_000, `${n} reads of the Scale`);

describe('kubernetes gateways: scale-up and idle scale-down', () => {
  let cluster: KubeCluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  test('three gateways, one cold service: a 30-request streaming burst over all three succeeds; one pod starts, spec.replicas is raised once', async () => {
    const kc = await KubeCluster.start();
    cluster = kc;
    const { api } = kc;
    const gws = await kc.gatewayGroup(3, {}, { workers: 2 });
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => kc.chat(gws[i % 3]!, ['burst', 'request', String(i)])));
    answers.forEach((a, i) => {
      assert.equal(a.status, 200, `request ${i}: ${a.raw}`);
      assert.match(a.contentType, /^text\/event-stream/, `request ${i} was streamed`);
      assert.equal(a.reply, `You said: burst request ${i}`, `request ${i} got its own whole reply`);
      assert.ok(a.done, `request ${i} ended with [DONE]`);
    });
    const sim = kc.sim();
    assert.equal(sim.started.length, 1, 'exactly one replica process was started');
    assert.equal(scaleWrites(api, 'patch').length, 1, 'spec.replicas was raised by one write');
    assert.equal(scaleWrites(api, 'update').length, 0, 'and never lowered');
    assert.equal(api.scaleOf(NS, 'llama').replicas, 1);
    // Log lines reach the processes' stdout a moment after the answers (more so with workers).
    const raises = (): Record<string, unknown>[] => gws.flatMap((g) => g.lines('kubernetes deployment scaled up'));
    await eventually(() => raises().length > 0, 10_000, 'the raise to be logged');
    const ups = raises();
    assert.equal(ups.length, 1, 'one gateway logged the raise');
    assert.deepEqual([ups[0]!.from, ups[0]!.to], [0, 1]);
    const pod = sim.started[0]!.name;
    for (const [i, gw] of gws.entries()) {
      // Log lines reach the process's stdout a moment after the answers.
      await eventually(() => KubeCluster.sawReady(gw, pod), 10_000, `gateway ${i} to log the pod ready`);
      await eventually(() => gw.lines('request').length === 10, 10_000, `gateway ${i}'s 10 access-log lines`);
      assert.ok(gw.lines('request').every((l) => l.status === 200), `gateway ${i} relayed its share`);
      // The case under test: every gateway found the service cold and queued.
      assert.ok(gw.lines('request').some((l) => Number(l.queuedMs) > 0), `gateway ${i} queued part of the burst`);
    }
  });

  test('concurrency 1, max 2: a burst over three gateways raises spec.replicas one step at a time to max and never beyond; every request succeeds', async () => {
    const kc = await KubeCluster.start();
    cluster = kc;
    const { api } = kc;
    const seen: number[] = [];
    api.onScale((_ns, name, replicas) => {
      if (name === 'llama') seen.push(replicas);
    });
    const setup = { services: [{ replicas: { concurrency: 1, max: 2 } }] };
    const gws = await kc.gatewayGroup(3, setup, { ...setup, workers: 2 });
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => kc.chat(gws[i % 3]!, ['one', 'at', 'a', 'time', String(i)])));
    answers.forEach((a, i) => {
      assert.equal(a.status, 200, `request ${i}: ${a.raw}`);
      assert.equal(a.reply, `You said: one at a time ${i}`);
    });
    assert.deepEqual(seen, [1, 2], 'raised 0 → 1 → 2, one step per write, never past max');
    assert.equal(scaleWrites(api, 'patch').length, 2);
    assert.equal(kc.sim().started.length, 2, 'two pods, as max allows');
    const ups = (): unknown[][] => gws.flatMap((g) => g.lines('kubernetes deployment scaled up')).map((l) => [l.from, l.to]);
    await eventually(() => ups().length >= 2, 10_000, 'both raises to be logged');
    assert.deepEqual(ups().sort(), [[0, 1], [1, 2]]);
  });

  test('idle: lowered to min once, after idleTimeoutMs with no traffic anywhere; never while one gateway still relays; the next request cold-starts again', async () => {
    const idleTimeoutMs = 3_000;
    // 100 ms per token: a 60-word reply streams for about 6 s, twice the idle timeout.
    const kc = await KubeCluster.start([{ env: { TOKEN_DELAY_MS: '100' } }]);
    cluster = kc;
    const { api } = kc;
    const sim = kc.sim();
    const setup = { services: [{ replicas: { idleTimeoutMs, min: 0 } }] };
    const [a, b, c] = await kc.gatewayGroup(3, setup);
    const lowered: number[] = [];
    api.onScale((_ns, name, replicas) => {
      if (name === 'llama' && replicas === 0) lowered.push(Date.now());
    });

    const first = await kc.chat(a!, ['wake', 'up']);
    assert.equal(first.status, 200, first.raw);
    assert.equal(first.reply, 'You said: wake up');
    assert.equal(sim.started.length, 1);

    // A long stream through b, while a and c have nothing.
    const words = Array.from({ length: 58 }, (_, i) => `w${i}`);
    const stream = await kc.open(b!, '/v1/chat/completions', { model: 'demo', stream: true, max_tokens: 60, messages: [{ role: 'user', content: words.join(' ') }] });
    assert.equal(stream.status, 200);
    const startedAt = Date.now();
    let raw = '';
    let checkedMidStream = false;
    for await (const chunk of stream.chunks) {
      raw += chunk.toString();
      if (!checkedMidStream && Date.now() - startedAt > idleTimeoutMs * 1.5) {
        // Longer than idleTimeoutMs since a and c relayed anything: b's traffic holds the Deployment.
        checkedMidStream = true;
        assert.equal(api.scaleOf(NS, 'llama').replicas, 1, 'not lowered while b relays');
        assert.equal(scaleWrites(api, 'update').length, 0, 'no lowering write while b relays');
        assert.deepEqual(lowered, []);
      }
    }
    assert.ok(checkedMidStream, 'the stream lasted longer than 1.5 × idleTimeoutMs (else the check above did not happen)');
    const whole = parseChatStream(raw);
    assert.equal(whole.reply, `You said: ${words.join(' ')}`, 'the long stream arrived whole');
    assert.ok(whole.done);
    // b's renewals reached the Lease, under b's identity.
    const lease = api.lease(NS, 'sluice-llama');
    assert.ok(lease !== undefined, 'the Lease sluice-llama exists');
    assert.ok([a!, b!, c!].map((g) => g.identity).includes(String((lease['spec'] as Record<string, unknown>)['holderIdentity'])), 'the Lease holder is one of the gateways (<hostname>-<pid>)');

    // Now nothing anywhere: one gateway lowers the Deployment to min, once.
    await eventually(() => api.scaleOf(NS, 'llama').replicas === 0, 30_000, 'the idle scale-down');
    await eventually(() => sim.pods.length === 0, 15_000, 'the pod to go');
    for (const gw of [a!, b!, c!]) await eventually(() => KubeCluster.sawGone(gw, sim.started[0]!.name), 10_000, 'every gateway to drop the pod');
    // The other gateways' idle checks (each runs idleTimeoutMs after its last traffic, already
    // passed) read the Scale after the lowering: they must find it at min and write nothing.
    const loweredAt = api.requests.findIndex((r) => r.resource === 'deployments/scale' && r.verb === 'update' && r.status === 200);
    await scaleReadsAfter(api, loweredAt + 1, 2);
    assert.equal(scaleWrites(api, 'update').length, 1, 'one lowering write to the Scale');
    assert.equal(lowered.length, 1);
    const downLines = (): Record<string, unknown>[] => [a!, b!, c!].flatMap((g) => g.lines('kubernetes deployment scaled down after idle'));
    await eventually(() => downLines().length > 0, 10_000, 'the scale-down log line');
    const downs = downLines();
    assert.equal(downs.length, 1, 'one gateway logged the scale-down');
    assert.deepEqual([downs[0]!.from, downs[0]!.to], [1, 0]);
    assert.ok(Number(downs[0]!.idleMs) >= idleTimeoutMs, `idle for at least idleTimeoutMs (${String(downs[0]!.idleMs)})`);
    assert.ok([a!, b!, c!].map((g) => g.identity).includes(String(downs[0]!.gateway)));

    // The next request cold-starts again, through the third gateway.
    const again = await kc.chat(c!, ['again']);
    assert.equal(again.status, 200, again.raw);
    assert.equal(again.reply, 'You said: again');
    assert.equal(sim.started.length, 2, 'a new pod was started');
    assert.equal(scaleWrites(api, 'patch').length, 2, 'two raises in all: the first cold start and this one');
    assert.equal(api.scaleOf(NS, 'llama').replicas, 1);
  });

  test('a gateway killed while it relays does not hold the Deployment up: another one lowers it once idleTimeoutMs after the last renewal', async () => {
    const idleTimeoutMs = 3_000;
    const kc = await KubeCluster.start([{ env: { TOKEN_DELAY_MS: '100' } }]);
    cluster = kc;
    const { api } = kc;
    const setup = { services: [{ replicas: { idleTimeoutMs } }] };
    const [a, b] = await kc.gatewayGroup(2, setup);
    const words = Array.from({ length: 58 }, (_, i) => `k${i}`);
    const stream = await kc.open(a!, '/v1/chat/completions', { model: 'demo', stream: true, max_tokens: 60, messages: [{ role: 'user', content: words.join(' ') }] });
    assert.equal(stream.status, 200);
    const reading = (async () => {
      try {
        for await (const chunk of stream.chunks) void chunk;
      } catch {
        // The gateway dies mid-stream: the body is cut.
      }
    })();
    // a renews the Lease while it relays; then it dies without a word.
    await eventually(() => (api.lease(NS, 'sluice-llama')?.['spec'] as Record<string, unknown> | undefined)?.['holderIdentity'] === a!.identity, 10_000, 'a to renew the Lease');
    a!.child.kill('SIGKILL');
    await a!.exited;
    await reading;
    await eventually(() => api.scaleOf(NS, 'llama').replicas === 0, 30_000, 'the idle scale-down by the gateway left');
    await eventually(() => b!.lines('kubernetes deployment scaled down after idle').length === 1, 10_000, "b's scale-down line");
    const down = b!.lines('kubernetes deployment scaled down after idle')[0]!;
    assert.equal(down.gateway, b!.identity);
    assert.ok(Number(down.idleMs) >= idleTimeoutMs, `idle for at least idleTimeoutMs by the Lease (${String(down.idleMs)})`);
    assert.equal(scaleWrites(api, 'update').length, 1, 'one lowering write');
  });

  test('min 1: idle lowers a Deployment at 2 to 1, not 0; the pod left keeps serving without a cold start, and nothing lowers it further', async () => {
    const idleTimeoutMs = 2_500;
    const kc = await KubeCluster.start();
    cluster = kc;
    const { api } = kc;
    const sim = kc.sim();
    api.setReplicas(NS, 'llama', 2); // someone scaled it to 2
    await eventually(() => sim.pods.filter((p) => p.ready).length === 2, 15_000, 'two ready pods');
    const setup = { services: [{ replicas: { idleTimeoutMs, min: 1 } }] };
    const [a, b] = await kc.gatewayGroup(2, setup);
    const first = await kc.chat(a!, ['two', 'pods']);
    assert.equal(first.status, 200, first.raw);

    await eventually(() => api.scaleOf(NS, 'llama').replicas === 1, 20_000, 'the idle scale-down to min');
    await eventually(() => sim.pods.length === 1, 15_000, 'one pod to go');
    const left = sim.pods[0]!.name;
    for (const gw of [a!, b!]) await eventually(() => gw.lines('kubernetes endpoint').filter((l) => l.gone === true).length === 1, 10_000, 'every gateway to drop the pod that went');
    const downs = [a!, b!].flatMap((g) => g.lines('kubernetes deployment scaled down after idle'));
    assert.equal(downs.length, 1);
    assert.deepEqual([downs[0]!.from, downs[0]!.to], [2, 1]);

    const again = await kc.chat(b!, ['still', 'warm']);
    assert.equal(again.status, 200, again.raw);
    assert.equal(sim.started.length, 2, 'no new pod: the one left served');
    assert.ok(sim.pods.some((p) => p.name === left));
    assert.equal(scaleWrites(api, 'patch').length, 0, 'no cold start, no raise');
    // Another idle period passes: b's idle check reads the Scale at min, and nothing writes to it.
    await scaleReadsAfter(api, api.requests.length, 1);
    assert.equal(scaleWrites(api, 'update').length, 1, 'one lowering write in all');
    assert.equal(api.scaleOf(NS, 'llama').replicas, 1);
  });
});
