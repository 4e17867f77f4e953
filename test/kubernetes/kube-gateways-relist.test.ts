// Issue 36, gateway level: three real `sluice serve` processes in front of one Deployment, with
// requests running through each, meet what a load balancer and an API server do to watches:
// every watch is cut mid-response (a reset, no final chunk), then the history is compacted (a
// watch from any resourceVersion handed out so far is answered 410 Gone as an ERROR event), then
// the Deployment is scaled to 2. Each gateway must resume at once, relist at once on the 410 (no
// failure counted, so no backoff), and route to the new pod through the watch it opened after the
// relist: nothing more to ask of the API server once the pod is ready. Order and counts, no times.
//
// A second Service (`llama2`, no pods) has a watch that never carries an event, as the issue's
// second service had. The API server's way of answering watches varies as a proxy or a fake API
// server in front of the gateways may vary it: the stream ends after the ERROR event (the API
// server) or stays open, and a watch's status line goes out at once (the API server) or only with
// its first line (a Node.js server without `flushHeaders()`: `llama2`'s watch then has no answer
// at all when it is cut).
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import { WATCH_HELD_MS } from '../../src/tunables.js';
import type { FakeKubeOptions, KubeRequest } from '../fixtures/fake-kube-api.js';
import { type KubeGateway, KubeCluster } from '../helpers/kube-gateways.js';
import { NS } from '../helpers/kube.js';
import { POOL_REPLICA } from '../helpers/pool.js';
import { eventually } from '../helpers/wait.js';

/** The index of the first log line of `gw` from line `from` on that `match` accepts, or -1. */
function lineIndex(gw: KubeGateway, from: number, match: (l: Record<string, unknown>) => boolean): number {
  const i = gw.logs.slice(from).findIndex(match);
  return i === -1 ? -1 : from + i;
}

const SERVICES = ['llama', 'llama2'];
const RELIST = 'endpointslice watch expired (410 Gone); relisting';

const variants: { name: string; options: Omit<FakeKubeOptions, 'token'> }[] = [
  { name: 'answered as the API server does (the stream ended after the ERROR event, the status line sent at once)', options: {} },
  { name: 'left open after the 410 ERROR event', options: { afterErrorEvent: 'keep-open' } },
  { name: 'whose status line is held until their first line', options: { watchHeaders: 'held' } },
  { name: 'left open after the ERROR event and with their status line held (a Node.js server that writes the event without ending, and never flushes headers)', options: { afterErrorEvent: 'keep-open', watchHeaders: 'held' } },
];

describe('kubernetes gateways: watches cut, history compacted, Deployment scaled', () => {
  let cluster: KubeCluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  for (const variant of variants) {
    test(`every watch cut mid-response, the history compacted, the Deployment scaled to 2 under load, watches ${variant.name}: each of three gateways relists at once (no failure, no backoff) and sends requests to the new pod through the watch it opened after the relist`, async () => {
      // Pods answer with their process id, so a test tells which pod served a request. No periodic
      // bookmarks: a real API server sends one about a minute, so a watch here is silent between events.
      const kc = await KubeCluster.start([{ command: [process.execPath, POOL_REPLICA] }, { name: 'llama2' }], { bookmarkEveryMs: 0, ...variant.options });
      cluster = kc;
      const { api } = kc;
      const sim = kc.sim();
      // The default backoff (250 ms doubling to 10 s), as the gateways had; watches neither
      // end nor count as stalled while the test runs.
      const tuning = { backoffBaseMs: 250, backoffMaxMs: 10_000, watchTimeoutSeconds: 300, watchStallMs: 300_000 };
      const gws = await kc.gatewayGroup(3, { services: SERVICES.map((name) => ({ name })), tuning, logLevel: 'debug' });
      await eventually(() => api.watchCount === 6, 10_000, 'every gateway watching both services');

      // One pod, whose events reach every gateway through its open watch: each watch of `llama` is working.
      api.setReplicas(NS, 'llama', 1);
      await eventually(() => sim.started[0]?.readyAt !== undefined, 20_000, 'the first pod ready');
      const first = sim.started[0]!;
      for (const [i, gw] of gws.entries()) await eventually(() => KubeCluster.sawReady(gw, first.name), 10_000, `gateway ${i} to see ${first.name} ready`);
      assert.equal(api.watchCount, 6, 'the events came through the watches opened at start');

      // Load through every gateway until the end: each answer names the pod that served it.
      const servedBy = gws.map(() => new Set<number>());
      let loading = true;
      const load = gws.map(async (gw, i) => {
        while (loading) {
          const res = await kc.post(gw, '/echo');
          assert.equal(res.status, 200, `gateway ${i}: ${res.text}`);
          servedBy[i]!.add((JSON.parse(res.text) as { pid: number }).pid);
        }
      });
      let marks: number[] = [];
      let before = 0;
      let second: (typeof sim.started)[number];
      try {
        await eventually(() => servedBy.every((s) => s.has(first.pid!)), 10_000, 'every gateway relaying to the first pod');
        // Every watch has been open a while, as a watch is between two changes: the cut is that of
        // a watch that was running, not of one cut as soon as it started (that one is a failure).
        const lastWatch = Math.max(...api.requests.filter((r) => r.verb === 'watch').map((r) => r.at));
        await eventually(() => performance.now() - lastWatch >= WATCH_HELD_MS, 10_000, 'every watch open for a while');
        // In one tick: every watch cut mid-response, the history compacted, the Deployment scaled.
        marks = gws.map((gw) => gw.logs.length);
        before = api.requests.length;
        api.cutWatches();
        api.compact();
        api.setReplicas(NS, 'llama', 2);
        await eventually(() => sim.started[1]?.readyAt !== undefined, 20_000, 'the second pod ready');
        second = sim.started[1]!;
        for (const [i] of gws.entries()) await eventually(() => servedBy[i]!.has(second.pid!), 30_000, `gateway ${i} to send a request to ${second.name}`);
      } finally {
        loading = false;
        await Promise.all(load);
      }

      // Each gateway: the relist of each service, then the new pod ready; no failure of a watch or a list.
      for (const [i, gw] of gws.entries()) {
        const readyLine = (): number => lineIndex(gw, marks[i]!, (l) => l.msg === 'kubernetes endpoint' && l.pod === second.name && l.ready === true);
        // Log lines reach the process's stdout a moment after the change they tell of.
        await eventually(() => readyLine() !== -1, 10_000, `gateway ${i}'s line: ${second!.name} ready`);
        await eventually(() => lineIndex(gw, marks[i]!, (l) => l.msg === RELIST && l.service === 'llama2') !== -1, 10_000, `gateway ${i}'s relist of llama2`);
        const relisted = lineIndex(gw, marks[i]!, (l) => l.msg === RELIST && l.service === 'llama');
        assert.ok(relisted !== -1, `gateway ${i} relisted llama`);
        const ready = readyLine();
        assert.ok(ready > relisted, `gateway ${i}: the relist (line ${relisted}), then ${second.name} ready (line ${ready})`);
        const failures = gw.logs.slice(marks[i]!).filter((l) => String(l.msg).startsWith('kubernetes API call failed') && String(l.call).startsWith('endpointslices.'));
        assert.deepEqual(failures, [], `gateway ${i}: no failure counted between the cut and the new pod`);
      }
      // Each gateway asked the API server three things per service: its resumed watch (410), one
      // list, one watch from the list, still open: the pod's events came through it, one round trip.
      for (const service of SERVICES) {
        const calls: KubeRequest[] = api.requests.slice(before).filter((r) => r.resource === 'endpointslices' && r.query['labelSelector'] === `kubernetes.io/service-name=${service}`);
        const kinds = calls.map((r) => (r.verb === 'list' ? 'list' : r.expired === true ? 'watch 410' : 'watch'));
        assert.deepEqual(
          [...kinds].sort(),
          ['list', 'list', 'list', 'watch', 'watch', 'watch', 'watch 410', 'watch 410', 'watch 410'],
          `${service}: the calls after the cut: ${kinds.join(', ')}`,
        );
      }
      assert.equal(api.watchCount, 6, 'the watches opened after the relists are still open');
    });
  }
});
