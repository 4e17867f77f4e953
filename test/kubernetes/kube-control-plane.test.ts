// The control plane's side of Kubernetes replicas (src/control/kinds/kubernetes/endpoint-replicas.ts), in
// one in-process gateway against the fake API server: what each endpoint state means for routing,
// with endpoints published by the test itself (no controller simulator), so every transition is
// exact. The multi-gateway behaviour (three processes, scale-ups, idle, API down) is in
// kube-gateways*.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { FAST, KUBE_TOKEN, NS, slice, startFakeKube, writeKubeconfig } from '../helpers/kube.js';
import { startReplica, type TestReplica } from '../helpers/replica.js';
import { CLI } from '../helpers/workers.js';
import type { FakeKubeApi } from '../fixtures/fake-kube-api.js';
import { eventually } from '../helpers/wait.js';

const run = promisify(execFile);

// The gateway in this process gets the test timings (src/cli/test-hooks.ts, read by startTestGateway).
process.env['NODE_ENV'] = 'test';
process.env['SLUICE_TEST_HOOKS'] = '1';
process.env['SLUICE_TEST_KUBE_TUNING'] = JSON.stringify(FAST);

interface Setup {
  api: FakeKubeApi;
  tg: TestGateway;
  replicas: TestReplica[];
  close(): Promise<void>;
}

/** A replica that answers with its own name. */
async function namedReplica(name: string): Promise<TestReplica> {
  return startReplica((req, res) => {
    req.resume();
    req.on('end', () => res.end(name));
  });
}

async function setup(
  replicas: Record<string, unknown>,
  names: string[],
  queue: Record<string, unknown> = { maxWaitMs: 10_000 },
  extra: Record<string, unknown> = {},
): Promise<Setup> {
  const api = await startFakeKube();
  api.addDeployment(NS, 'llama', names.length);
  const servers = await Promise.all(names.map(namedReplica));
  const kubeconfig = writeKubeconfig(api.url);
  const tg = await startTestGateway(
    rawService({ kubernetes: { namespace: NS, deployment: 'llama', service: 'llama', port: 'http', kubeconfig }, max: 4, ...replicas }, { slug: 'llama', queue }),
    extra,
  );
  return {
    api,
    tg,
    replicas: servers,
    close: async () => {
      await tg.close();
      await Promise.all(servers.map((s) => s.close()));
      assert.deepEqual(api.forbiddenCalls(), [], 'no call outside docs/kubernetes.md');
      await api.close();
      assert.ok(!tg.logText().includes(KUBE_TOKEN), 'the service account token is in no log line');
    },
  };
}

/** Publishes one slice per replica: `[replica, ready, terminating]`. */
function publish(api: FakeKubeApi, entries: [TestReplica, boolean, boolean?][]): void {
  for (const [r, ready, terminating] of entries) api.putEndpointSlice(slice(`llama-${r.port}`, r.port, [['127.0.0.1', ready, terminating ?? false]]));
}

async function ask(tg: TestGateway): Promise<{ status: number; body: string }> {
  const res = await fetch(tg.url('/v1/x'), { method: 'POST', headers: AUTH, body: '{}' });
  return { status: res.status, body: await res.text() };
}

function states(tg: TestGateway): string[] {
  return tg.logs.filter((l) => l.msg === 'replica state').map((l) => `${String(l.from)}→${String(l.to)} (${String(l.reason)})`);
}

test('a ready endpoint is routed to; not ready holds it out (a probe that answers does not bring it back); ready again takes the queued request', async (t) => {
  const s = await setup({}, ['a'], undefined, { admin: { host: '127.0.0.1', port: 0 } });
  t.after(() => s.close());
  const [a] = s.replicas as [TestReplica];
  publish(s.api, [[a, true]]);
  await eventually(async () => (await ask(s.tg)).body === 'a', 10_000, 'the endpoint to serve');
  const status = (await (await fetch(`http://127.0.0.1:${s.tg.gateway.adminPort!}/status`)).json()) as { services: Record<string, unknown>[] };
  assert.equal(status.services[0]!['kind'], 'kubernetes', '/status names the kind');
  assert.deepEqual(status.services[0]!['replicas'], { starting: 0, ready: 1, unreachable: 0, draining: 0 });

  publish(s.api, [[a, false]]);
  await eventually(() => states(s.tg).includes('ready→unreachable (endpoint not ready)'), 10_000, 'the endpoint to be held out');
  const seenBefore = a.seen.length;
  // The replica still answers: a recovery probe would find it up. It must stay out until Kubernetes says ready.
  const waiting = ask(s.tg);
  await eventually(() => s.tg.logs.some((l) => l.msg === 'kubernetes deployment scaled up' || l.msg === 'kubernetes endpoint'), 5_000, 'the queue to be seen');
  // A witness queued behind it, allowed to wait 1 s: its expiry comes after the recovery probe
  // (500 ms from the transition) that a held-out endpoint must not get, and which would bring it back.
  const witness = await fetch(s.tg.url('/v1/x'), { method: 'POST', headers: { ...AUTH, 'x-sluice-max-wait-ms': '1000' }, body: '{}' });
  assert.equal(witness.status, 503, 'the witness waited its second and expired');
  assert.equal(a.seen.length, seenBefore, 'nothing was sent to the endpoint while it was not ready');

  publish(s.api, [[a, true]]);
  assert.deepEqual(await waiting, { status: 200, body: 'a' });
  assert.ok(states(s.tg).includes('unreachable→ready (endpoint ready again)'));
});

test('a cold start is measured from the request that found the service cold to a ready endpoint; the next cold start says when', async (t) => {
  const s = await setup({}, ['a'], undefined, { admin: { host: '127.0.0.1', port: 0 } });
  t.after(() => s.close());
  const [a] = s.replicas as [TestReplica];
  const service = async (): Promise<{ expectedStartMs?: number | null; queued: number; replicas: Record<string, number> }> =>
    ((await (await fetch(`http://127.0.0.1:${s.tg.gateway.adminPort!}/status`)).json()) as { services: [{ expectedStartMs?: number | null; queued: number; replicas: Record<string, number> }] }).services[0];
  assert.equal((await service()).expectedStartMs, null, 'nothing measured yet');
  const waiting = ask(s.tg);
  await eventually(async () => (await service()).queued === 1, 10_000, 'the request to queue');
  publish(s.api, [[a, true]]);
  assert.deepEqual(await waiting, { status: 200, body: 'a' });
  const estimate = (await service()).expectedStartMs;
  assert.equal(typeof estimate, 'number', 'the cold start was measured');
  // The pod goes away: cold again, and a request that would not wait as long as a start takes is refused at once.
  s.api.deleteEndpointSlice(NS, `llama-${a.port}`);
  await eventually(async () => Object.values((await service()).replicas).every((n) => n === 0), 10_000, 'the endpoint to be gone');
  const res = await fetch(s.tg.url('/v1/x'), { method: 'POST', headers: { ...AUTH, 'x-sluice-max-wait-ms': String(Math.max(1, Math.floor(estimate! / 2))) }, body: '{}' });
  assert.equal(res.status, 503);
  assert.equal(res.headers.get('retry-after'), String(Math.max(1, Math.ceil(estimate! / 1000))));
  assert.match(await res.text(), /expected to be ready within the request's X-Sluice-Max-Wait-Ms/);
});

test('with readyPath, the gateway routes to a new endpoint once it answers, before Kubernetes marks it ready', async (t) => {
  const s = await setup({ readyPath: '/health' }, ['a']);
  t.after(() => s.close());
  const [a] = s.replicas as [TestReplica];
  publish(s.api, [[a, false]]);
  assert.deepEqual(await ask(s.tg), { status: 200, body: 'a' });
  assert.ok(a.seen.some((r) => r.method === 'GET' && r.url === '/health'), 'the endpoint was probed');
});

test('a terminating endpoint gets nothing new, its stream in flight completes, and its pool closes only when it is gone', async (t) => {
  let release: (() => void) | undefined;
  const slow = await startReplica((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('first ');
    release = () => res.end('last');
  });
  const s = await setup({}, ['b']);
  t.after(async () => {
    await s.close();
    await slow.close();
  });
  const [b] = s.replicas as [TestReplica];
  publish(s.api, [[slow, true]]);
  await eventually(() => states(s.tg).some((x) => x.startsWith('starting→ready')), 10_000, 'the slow endpoint to be ready');
  const res = await fetch(s.tg.url('/v1/stream'), { method: 'POST', headers: AUTH, body: '{}' });
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  assert.equal(new TextDecoder().decode((await reader.read()).value), 'first ');

  publish(s.api, [[slow, false, true], [b, true]]);
  await eventually(() => states(s.tg).includes('ready→draining (endpoint terminating)'), 10_000, 'the endpoint to drain');
  await eventually(async () => (await ask(s.tg)).body === 'b', 10_000, 'new requests to go to the other endpoint');
  assert.equal(slow.seen.length, 1, 'the terminating endpoint got no new request');

  release!();
  let rest = '';
  for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) rest += new TextDecoder().decode(chunk.value);
  assert.equal(rest, 'last', 'the stream in flight completed');

  s.api.deleteEndpointSlice(NS, `llama-${slow.port}`);
  await eventually(() => states(s.tg).includes('draining→stopped (endpoint removed)'), 10_000, 'the endpoint to be forgotten');
});

test('a new pod at the address and port of a terminating one is a new replica, and gets the requests', async (t) => {
  const s = await setup({ readyPath: '/health' }, ['a']);
  t.after(() => s.close());
  const [a] = s.replicas as [TestReplica];
  const podSlice = (pod: string, ready: boolean, terminating: boolean): Record<string, unknown> & { metadata: Record<string, unknown> } => {
    const sl = slice(`llama-${a.port}`, a.port, [['127.0.0.1', ready, terminating]]);
    (sl['endpoints'] as { targetRef: { name: string } }[])[0]!.targetRef.name = pod;
    return sl;
  };
  s.api.putEndpointSlice(podSlice('llama-old', true, false));
  assert.deepEqual(await ask(s.tg), { status: 200, body: 'a' });
  s.api.putEndpointSlice(podSlice('llama-old', false, true));
  await eventually(() => states(s.tg).includes('ready→draining (endpoint terminating)'), 10_000, 'the old pod to drain');
  // The old pod is gone and a new one got its IP, in one change of the slice.
  s.api.putEndpointSlice(podSlice('llama-new', true, false));
  assert.deepEqual(await ask(s.tg), { status: 200, body: 'a' });
  assert.ok(states(s.tg).includes('draining→stopped (endpoint removed)'), 'the old pod’s replica is gone');
  assert.equal(states(s.tg).filter((x) => x.endsWith('(endpoint ready)')).length, 2, 'the new pod is a new replica, probed again');
});

test('pods listed without the configured port: one warning naming the ports they have', async (t) => {
  const s = await setup({ max: 1 }, ['a'], { maxWaitMs: 500 });
  t.after(() => s.close());
  const [a] = s.replicas as [TestReplica];
  const wrong = slice(`llama-${a.port}`, a.port, [['127.0.0.1', true]]);
  (wrong['ports'] as { name: string }[])[0]!.name = 'grpc';
  s.api.putEndpointSlice(wrong);
  const warned = (): Record<string, unknown>[] => s.tg.logs.filter((l) => String(l.msg).startsWith('kubernetes endpoints have no port matching'));
  await eventually(() => warned().length === 1, 10_000, 'the warning');
  assert.deepEqual(warned()[0]!.ports, [`grpc:${a.port}`]);
  assert.equal((await ask(s.tg)).status, 503, 'no replica: the port matches nothing');
  assert.equal(warned().length, 1, 'warned once');
});

test('more endpoints than the slot table holds: the extra ones are logged once and used when room frees up', async (t) => {
  // max 1 → 18 slots (2 × max + 16).
  const names = Array.from({ length: 20 }, (_, i) => `r${i}`);
  const s = await setup({ max: 1 }, names);
  t.after(() => s.close());
  publish(
    s.api,
    s.replicas.map((r): [TestReplica, boolean] => [r, true]),
  );
  await eventually(() => s.tg.logs.filter((l) => l.msg === 'no slot for a kubernetes endpoint; it gets no requests').length === 2, 10_000, 'two endpoints without a slot');
  const skipped = s.tg.logs.filter((l) => l.msg === 'no slot for a kubernetes endpoint; it gets no requests').map((l) => String(l.endpoint));
  // Another change of the list does not log them again.
  const first = s.replicas.find((r) => !skipped.includes(`127.0.0.1:${r.port}`))!;
  publish(s.api, [[first, false]]);
  await eventually(() => states(s.tg).includes('ready→unreachable (endpoint not ready)'), 10_000, 'the list to change');
  assert.equal(s.tg.logs.filter((l) => l.msg === 'no slot for a kubernetes endpoint; it gets no requests').length, 2);
  // Two endpoints leave: the skipped ones get their slots.
  for (const r of s.replicas.filter((r) => !skipped.includes(`127.0.0.1:${r.port}`) && r !== first).slice(0, 2)) s.api.deleteEndpointSlice(NS, `llama-${r.port}`);
  // 18 replicas at first, then the 2 skipped ones: 20 created and ready in all.
  const count = (reason: string, to: string): number => s.tg.logs.filter((l) => l.msg === 'replica state' && l.reason === reason && l.to === to).length;
  await eventually(() => count('created', 'starting') === 20 && count('endpoint ready', 'ready') === 20, 10_000, 'the skipped endpoints to become replicas');
  assert.equal(count('endpoint removed', 'stopped'), 2);
});

test('missing credentials fail the start with one line naming the file; `sluice check` warns', async (t) => {
  const missing = '/nonexistent/sluice/kubeconfig';
  const service = rawService({ kubernetes: { namespace: NS, deployment: 'llama', service: 'llama', port: 'http', kubeconfig: missing } }, { slug: 'llama' });
  await assert.rejects(startTestGateway(service), (err: Error) => err.name === 'KubeCredentialsError' && err.message.includes(missing));

  const { mkdtempSync, writeFileSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const dir = mkdtempSync(join(tmpdir(), 'sluice-kube-check-'));
  const file = join(dir, 'config.json');
  writeFileSync(file, JSON.stringify({ services: [service] }));
  const env = { PATH: process.env['PATH'] ?? '' };
  const checked = await run(process.execPath, [CLI, 'check', '--config', file], { env });
  assert.match(checked.stdout, /^config OK: 1 service\n/);
  assert.match(checked.stdout, new RegExp(`warning: services\\[0\\]\\.replicas\\.kubernetes: kubeconfig ${missing} does not exist`));

  const served = await run(process.execPath, [CLI, 'serve', '--config', file], { env }).then(
    () => assert.fail('serve must exit 1'),
    (err: { code: number; stderr: string }) => err,
  );
  assert.equal(served.code, 1);
  assert.equal(served.stderr.trim().split('\n').length, 1, served.stderr);
  assert.match(served.stderr, new RegExp(`sluice: cannot start: .*${missing}`));
  t.diagnostic(served.stderr.trim());
});
