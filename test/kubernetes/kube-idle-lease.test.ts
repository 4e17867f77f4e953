// Idle scale-down across gateways through the Lease, with the real client library against the
// fake API server (which refuses Lease times that are not MicroTime, as the API server does).
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';
import type { KubernetesReplicaSource } from '../../src/control/kinds/kubernetes/kubernetes-source.js';
import type { FakeKubeApi } from '../fixtures/fake-kube-api.js';
import { type CapturedLog, NS, newSource, type SourceSetup, startFakeKube, writeKubeconfig, stopSources } from '../helpers/kube.js';
import { eventually, sleep } from '../helpers/wait.js';

const IDLE_MS = 1_000;
const MICRO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/;

const scaleUpdates = (api: FakeKubeApi): number =>
  api.requests.filter((r) => r.resource === 'deployments/scale' && r.verb === 'update' && r.status === 200).length;


/**
 * Lease reads no write followed: the idle checks of gateways that relay nothing (a renewal, or a
 * claim, reads the Lease and then writes it). A renewal between its read and its write counts one.
 */
const idleCheckReads = (api: FakeKubeApi): number => {
  const leases = api.requests.filter((r) => r.resource === 'leases');
  return leases.filter((r) => r.verb === 'get').length - leases.filter((r) => r.verb === 'update' || r.verb === 'create').length;
};

/**
 * From now on, how stale the Lease was at the stalest read of it: how long before that read the
 * latest traffic it shows ended (or `from`, when the gateways started, if later). While this stays
 * under IDLE_MS no idle check can have decided to lower (a check lowers only after a read that
 * shows no traffic for idleTimeoutMs). On a machine so busy that a renewal came later than that,
 * the lowering is right, and a test that says "not lowered" has no premise left.
 */
const stalestLeaseRead = (api: FakeKubeApi, from: number): (() => number) => {
  let stalest = 0;
  api.beforeEvery('get', 'leases', () => {
    const spec = api.lease(NS, 'sluice-llama')?.['spec'] as Record<string, unknown> | undefined;
    const renewed = typeof spec?.['renewTime'] === 'string' ? Date.parse(spec['renewTime']) : -Infinity;
    stalest = Math.max(stalest, Date.now() - Math.max(renewed, from));
  });
  return () => stalest;
};

/** Resolves once `n` gateways read the Scale after the Deployment was lowered: they saw it at min and stopped deciding. */
const scaleReadsAfterLowering = (api: FakeKubeApi, n: number): Promise<void> =>
  eventually(() => {
    const lowered = api.requests.findIndex((r) => r.resource === 'deployments/scale' && r.verb === 'update' && r.status === 200);
    return lowered >= 0 && api.requests.slice(lowered + 1).filter((r) => r.resource === 'deployments/scale' && r.verb === 'get').length >= n;
  }, 30_000, `${n} Scale reads after the lowering`);

describe('kubernetes idle scale-down through the Lease', () => {
  let api: FakeKubeApi;
  let kubeconfig: string;
  const sources: { source: KubernetesReplicaSource; log: CapturedLog }[] = [];

  const gateway = (id: string, setup: SourceSetup = {}): { source: KubernetesReplicaSource; log: CapturedLog } => {
    const g = newSource(kubeconfig, { gatewayId: id, ...setup, replicas: { idleTimeoutMs: IDLE_MS, ...setup.replicas } });
    sources.push(g);
    g.source.start();
    return g;
  };

  beforeEach(async () => {
    api = await startFakeKube({ bookmarkEveryMs: 100 });
    kubeconfig = writeKubeconfig(api.url);
    api.addDeployment(NS, 'llama', 1);
  });
  afterEach(async () => {
    await stopSources(sources);
    await api.close();
    assert.deepEqual(api.forbiddenCalls(), [], 'no call outside the Role (docs/kubernetes.md#the-role)');
  });

  test('never while one gateway relays; once it stops, one of three gateways lowers to min, once', async (t) => {
    const startedAt = Date.now();
    const stalest = stalestLeaseRead(api, startedAt);
    const [a, b, c] = [gateway('gw-a'), gateway('gw-b'), gateway('gw-c')];
    // gw-a relays one long stream; the others have no traffic at all.
    a.source.report(0, 1);
    // Three idle periods pass, and b and c look at the Lease in them (two idle checks each and one
    // more, counted): without a's renewals they would have lowered the Deployment.
    await eventually(() => (Date.now() - startedAt >= 3 * IDLE_MS && idleCheckReads(api) >= 5) || scaleUpdates(api) > 0, 30_000, 'three idle periods and the idle checks of gw-b and gw-c');
    const elapsed = Date.now() - startedAt;
    // gw-a's renewals come every idleTimeoutMs / 4: only a machine stalled for most of an idle
    // period between two of them lets a read find the Lease that old (and then lowering is right).
    if (stalest() >= IDLE_MS) {
      t.skip(`the Lease was read ${stalest()} ms after gw-a's last renewal: the machine stalled gw-a's heartbeat, the case under test did not arise`);
      return;
    }
    assert.equal(api.scaleOf(NS, 'llama').replicas, 1, 'not lowered while gw-a relays');
    assert.equal(scaleUpdates(api), 0);
    const lease = api.lease(NS, 'sluice-llama');
    assert.ok(lease !== undefined, 'the Lease exists');
    const spec = lease['spec'] as Record<string, unknown>;
    assert.equal(spec['holderIdentity'], 'gw-a');
    assert.match(String(spec['renewTime']), MICRO_TIME);
    assert.equal(spec['leaseDurationSeconds'], 1);
    // Renewals are rate-limited: at most one per idleTimeoutMs / 4 (plus the first) in the time that passed.
    const renewals = api.requests.filter((r) => r.resource === 'leases' && (r.verb === 'update' || r.verb === 'create') && r.status < 300).length;
    assert.ok(renewals <= Math.ceil(elapsed / (IDLE_MS / 4)) + 2, `${renewals} Lease writes in ${elapsed} ms`);

    // The stream ends: after idleTimeoutMs with no traffic anywhere, one gateway lowers to 0.
    a.source.report(0, 0);
    await eventually(() => api.scaleOf(NS, 'llama').replicas === 0, 10_000, 'the idle scale-down');
    await scaleReadsAfterLowering(api, 2); // the other two gateways' decisions: they found it at min
    assert.equal(scaleUpdates(api), 1, 'lowered once');
    const downLines = (): Record<string, unknown>[] => [a, b, c].flatMap((g) => g.log.lines.filter((l) => l['msg'] === 'kubernetes deployment scaled down after idle'));
    await eventually(() => downLines().length > 0, 5_000, 'the log line');
    const downs = downLines();
    assert.equal(downs.length, 1);
    assert.deepEqual([downs[0]!['from'], downs[0]!['to']], [1, 0]);
    assert.ok(Number(downs[0]!['idleMs']) >= IDLE_MS);

    // The next request cold-starts again.
    b.source.report(1, 0);
    await eventually(() => api.scaleOf(NS, 'llama').replicas === 1, 10_000, 'the cold start after idle');
  });

  test('traffic on another gateway keeps the Deployment up; lowering goes to min, not to 0', async (t) => {
    api.setReplicas(NS, 'llama', 3);
    const stalest = stalestLeaseRead(api, Date.now());
    const [a, b] = [gateway('gw-a', { replicas: { min: 1 } }), gateway('gw-b', { replicas: { min: 1 } })];
    // Short requests on gw-b, one every idle/3, for three idle periods; gw-a has none. The sleep is
    // the pace of the traffic (time must pass for idle checks to run), not a wait for something.
    for (let i = 0; i < 9; i++) {
      b.source.report(0, 1);
      b.source.report(0, 0);
      await sleep(IDLE_MS / 3);
    }
    // Each request is in the Lease at most idleTimeoutMs / 4 after it ended, so a read finds it
    // at most idle/3 + idle/4 old, unless the machine stalled the pace for most of an idle period:
    // then the traffic did stop for that long, and lowering was right.
    if (stalest() < IDLE_MS) assert.equal(api.scaleOf(NS, 'llama').replicas, 3, 'not lowered while gw-b keeps relaying');
    else t.diagnostic(`the Lease was read ${stalest()} ms after gw-b's last renewal (a stalled machine): not lowered is not checked`);
    await eventually(() => api.scaleOf(NS, 'llama').replicas === 1, 10_000, 'lowered to min');
    await scaleReadsAfterLowering(api, 1); // the other gateway's decision: it found it at min
    assert.equal(scaleUpdates(api), 1);
    assert.equal(api.scaleOf(NS, 'llama').replicas, 1);
    void a;
  });

  test('a renewal that lands between a gateway\'s idle read and its claim wins: the claimer reads again and waits', async () => {
    // gw-b relays one request and goes away; its renewal created the Lease.
    const b = gateway('gw-b');
    b.source.report(0, 1);
    b.source.report(0, 0);
    await eventually(() => api.lease(NS, 'sluice-llama') !== undefined, 5_000, 'the Lease');
    await b.source.stop();
    // gw-a has no traffic. Its claim (its first Lease update) finds that gw-b renewed since gw-a
    // read the Lease: the fake server applies that renewal just before the claim.
    let renewedAt = 0;
    api.beforeNext('update', 'leases', () => {
      renewedAt = Date.now();
      api.renewLease(NS, 'sluice-llama', 'gw-b');
    });
    let loweredAt = 0;
    api.beforeNext('update', 'deployments/scale', () => (loweredAt = Date.now()));
    const a = gateway('gw-a');
    await eventually(() => api.scaleOf(NS, 'llama').replicas === 0, 10_000, 'the idle scale-down');
    assert.ok(renewedAt > 0, 'the race happened');
    assert.ok(api.requests.some((r) => r.resource === 'leases' && r.verb === 'update' && r.status === 409), 'the claim conflicted');
    assert.ok(loweredAt - renewedAt >= IDLE_MS, `lowered ${loweredAt - renewedAt} ms after the racing renewal`);
    assert.equal(scaleUpdates(api), 1);
    // The server applied the write before the gateway read its answer: wait for the gateway's line.
    await eventually(() => a.log.lines.some((l) => l['msg'] === 'kubernetes deployment scaled down after idle'), 5_000, 'the log line');
    assert.equal(a.log.lines.filter((l) => l['msg'] === 'kubernetes deployment scaled down after idle').length, 1);
  });

  test('API server down at the idle deadline: the idle check fails quietly (one warning) and lowers once the server is back', async () => {
    // Down at the idle deadline exactly: just before the first idle check's read of the Lease is
    // answered (gw-a has no traffic, so nothing else reads it), however late the deadline comes.
    api.beforeNext('get', 'leases', () => void api.goDown());
    const a = gateway('gw-a');
    await eventually(() => a.log.lines.some((l) => l['msg'] === 'kubernetes API call failed again' && l['call'] === 'idle-check'), 10_000, 'retried idle checks');
    assert.equal(a.log.lines.filter((l) => l['msg'] === 'kubernetes API call failed; retrying with backoff' && l['call'] === 'idle-check').length, 1);
    await api.comeUp();
    await eventually(() => api.scaleOf(NS, 'llama').replicas === 0, 10_000, 'the idle scale-down after the outage');
    assert.equal(scaleUpdates(api), 1);
  });
});
