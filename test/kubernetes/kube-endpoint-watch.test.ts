// The Kubernetes source's EndpointSlice watch, with the real client library against the fake API
// server: what it reports, and how it gets through 410 Gone, ERROR events, broken watches and an
// absent API server (a watch that was working, or open a second, resumes at once when cut; an
// ERROR event is acted on when it comes; failures in a row back off).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { KubeEndpoint } from '../../src/control/kinds/kubernetes/kubernetes-source.js';
import { WATCH_HELD_MS } from '../../src/tunables.js';
import type { FakeKubeApi, FakeKubeOptions, KubeRequest } from '../fixtures/fake-kube-api.js';
import { KUBE_TOKEN, NS, newSource, slice, startFakeKube, writeKubeconfig } from '../helpers/kube.js';
import { eventually } from '../helpers/wait.js';

const ids = (eps: readonly KubeEndpoint[]): string[] => eps.map((e) => `${e.id}${e.ready ? '' : e.terminating ? ' terminating' : ' not-ready'}`);

describe('kubernetes EndpointSlice watch', () => {
  let api: FakeKubeApi;
  let kubeconfig: string;

  before(async () => {
    api = await startFakeKube({ bookmarkEveryMs: 50 });
    kubeconfig = writeKubeconfig(api.url);
    api.addDeployment(NS, 'llama', 0);
  });
  after(async () => {
    assert.deepEqual(api.forbiddenCalls(), [], 'no call outside the Role (docs/kubernetes.md#the-role)');
    await api.close();
  });

  test('reports the endpoints of the service at the named port: ready, not ready, terminating, and null endpoints', async () => {
    api.putEndpointSlice(slice('llama-a', 8000, [['10.0.0.1', true], ['10.0.0.2', false], ['10.0.0.3', false, true], ['10.0.0.4', null]]));
    api.putEndpointSlice({ ...slice('llama-empty', 8000, []), endpoints: null });
    // Another service's slice, and a slice of this service without the `http` port.
    api.putEndpointSlice({ ...slice('other-a', 8000, [['10.9.9.9', true]]), metadata: { name: 'other-a', namespace: NS, labels: { 'kubernetes.io/service-name': 'other' } } });
    api.putEndpointSlice({ ...slice('llama-metrics', 9100, [['10.0.0.5', true]]), ports: [{ name: 'metrics', port: 9100 }] });
    const { source, log } = newSource(kubeconfig);
    const seen: string[][] = [];
    source.onEndpoints((eps) => seen.push(ids(eps)));
    source.start();
    try {
      await eventually(() => source.endpoints().length === 4, 5_000, 'the listed endpoints');
      assert.deepEqual(ids(source.endpoints()), ['10.0.0.1:8000', '10.0.0.2:8000 not-ready', '10.0.0.3:8000 terminating', '10.0.0.4:8000']);
      const first = source.endpoints()[0]!;
      assert.equal(first.origin, 'http://10.0.0.1:8000');
      assert.equal(first.host, '10.0.0.1:8000');
      assert.equal(first.pod, 'pod-10.0.0.1-8000');

      // Watch events: a pod turns ready, one terminates, a slice goes away.
      api.putEndpointSlice(slice('llama-a', 8000, [['10.0.0.1', false, true], ['10.0.0.2', true], ['10.0.0.4', null]]));
      await eventually(() => source.endpoints().some((e) => e.id === '10.0.0.2:8000' && e.ready), 5_000, 'the MODIFIED event');
      assert.deepEqual(ids(source.endpoints()), ['10.0.0.1:8000 terminating', '10.0.0.2:8000', '10.0.0.4:8000']);
      api.deleteEndpointSlice(NS, 'llama-a');
      await eventually(() => source.endpoints().length === 0, 5_000, 'the DELETED event');
      assert.equal(seen.at(-1)?.length, 0);
      assert.ok(!log.text().includes(KUBE_TOKEN));
    } finally {
      await source.stop();
      api.deleteEndpointSlice(NS, 'llama-empty');
      api.deleteEndpointSlice(NS, 'llama-metrics');
      api.deleteEndpointSlice(NS, 'other-a');
    }
    // Only namespaced list/watch calls with the service's label selector.
    const sliceCalls = api.requests.filter((r) => r.resource === 'endpointslices');
    assert.ok(sliceCalls.length >= 2);
    for (const r of sliceCalls) {
      assert.equal(r.path, `/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices`);
      assert.equal(r.query['labelSelector'], 'kubernetes.io/service-name=llama');
      if (r.verb === 'watch') assert.equal(r.query['allowWatchBookmarks'], 'true');
    }
  });

  test('a port given as a number selects the slice port with that number', async () => {
    api.putEndpointSlice({ ...slice('llama-n', 7000, [['10.0.1.1', true]]), ports: [{ port: 7000 }] });
    const { source } = newSource(kubeconfig, { target: { port: 7000 } });
    source.start();
    try {
      await eventually(() => source.endpoints().length === 1, 5_000, 'the endpoint');
      assert.equal(source.endpoints()[0]!.origin, 'http://10.0.1.1:7000');
    } finally {
      await source.stop();
      api.deleteEndpointSlice(NS, 'llama-n');
    }
  });

  const goneVariants: { name: string; goneAs: FakeKubeOptions['goneAs']; afterErrorEvent: FakeKubeOptions['afterErrorEvent'] }[] = [
    { name: 'an ERROR event, the stream ended after it', goneAs: 'event', afterErrorEvent: 'end' },
    { name: 'the status', goneAs: 'status', afterErrorEvent: 'end' },
    // A proxy or a fake API server may leave the stream open: the event itself relists.
    { name: 'an ERROR event, the stream kept open after it', goneAs: 'event', afterErrorEvent: 'keep-open' },
  ];
  for (const { name, goneAs, afterErrorEvent } of goneVariants) {
    test(`history compacted while the watch was broken (410 as ${name}): relists, keeps what is still there, sees what is new`, async () => {
      api.goneAs = goneAs ?? 'event';
      api.afterErrorEvent = afterErrorEvent ?? 'end';
      api.putEndpointSlice(slice('llama-keep', 8000, [['10.0.2.1', true]]));
      api.putEndpointSlice(slice('llama-old', 8000, [['10.0.2.2', true]]));
      const { source, log } = newSource(kubeconfig);
      const everyList: string[][] = [];
      source.onEndpoints((eps) => everyList.push(ids(eps)));
      source.start();
      try {
        await eventually(() => source.endpoints().length === 2, 5_000, 'the first list');
        const listsBefore = api.requests.filter((r) => r.verb === 'list').length;
        api.breakWatches();
        api.putEndpointSlice(slice('llama-new', 8000, [['10.0.2.3', true]]));
        api.deleteEndpointSlice(NS, 'llama-old');
        api.compact();
        await eventually(
          () => ids(source.endpoints()).join(',') === '10.0.2.1:8000,10.0.2.3:8000',
          5_000,
          'the relisted endpoints',
        );
        assert.ok(api.requests.filter((r) => r.verb === 'list').length > listsBefore, 'it relisted');
        for (const list of everyList) assert.ok(list.includes('10.0.2.1:8000'), `a list without the endpoint that stayed: ${list.join(',')}`);
        assert.ok(log.lines.some((l) => l['msg'] === 'endpointslice watch expired (410 Gone); relisting'));
        // Events after the relist arrive through the new watch.
        api.putEndpointSlice(slice('llama-later', 8000, [['10.0.2.4', true]]));
        await eventually(() => source.endpoints().length === 3, 5_000, 'an event after the relist');
      } finally {
        await source.stop();
        for (const n of ['llama-keep', 'llama-new', 'llama-later']) api.deleteEndpointSlice(NS, n);
        api.goneAs = 'event';
        api.afterErrorEvent = 'end';
      }
    });
  }

  test('a broken watch resumes from the last resourceVersion: no relist, the events of the gap arrive', async () => {
    api.putEndpointSlice(slice('llama-b', 8000, [['10.0.3.1', true]]));
    const { source } = newSource(kubeconfig);
    source.start();
    try {
      await eventually(() => source.endpoints().length === 1 && api.watchCount > 0, 5_000, 'the first list and watch');
      const lists = api.requests.filter((r) => r.verb === 'list').length;
      const watches = api.requests.filter((r) => r.verb === 'watch').length;
      api.breakWatches();
      api.putEndpointSlice(slice('llama-b', 8000, [['10.0.3.1', true], ['10.0.3.2', true]]));
      await eventually(() => source.endpoints().length === 2, 5_000, 'the event made during the break');
      assert.equal(api.requests.filter((r) => r.verb === 'list').length, lists, 'no relist');
      const resumed = api.requests.filter((r) => r.verb === 'watch').slice(watches);
      assert.ok(resumed.length >= 1);
      assert.notEqual(resumed[0]!.query['resourceVersion'], '');
    } finally {
      await source.stop();
      api.deleteEndpointSlice(NS, 'llama-b');
    }
  });

  test('a working watch that is cut resumes at once, cut after cut, without a warning: the backoff is not waited', async () => {
    api.putEndpointSlice(slice('llama-w', 8000, [['10.0.7.1', true]]));
    // A backoff no test run outlasts: a resume that waited it would never be seen.
    const { source, log } = newSource(kubeconfig, { tuning: { backoffBaseMs: 600_000, backoffMaxMs: 600_000 } });
    source.start();
    try {
      await eventually(() => source.endpoints().length === 1 && api.watchCount === 1, 5_000, 'the first list and watch');
      for (let n = 2; n <= 4; n++) {
        // An event through the watch: it is working.
        api.putEndpointSlice(slice('llama-w', 8000, Array.from({ length: n }, (_, i) => [`10.0.7.${i + 1}`, true] as [string, boolean])));
        await eventually(() => source.endpoints().length === n, 5_000, `the event with ${n} endpoints`);
        api.breakWatches();
        await eventually(() => api.watchCount === 1, 30_000, 'the watch to resume (without the 600 s backoff)');
      }
      assert.deepEqual(log.lines.filter((l) => Number(l['level']) >= 40), [], 'no warning');
      assert.ok(log.lines.filter((l) => l['msg'] === 'endpointslice watch broken; resuming').length >= 3);
    } finally {
      await source.stop();
      api.deleteEndpointSlice(NS, 'llama-w');
    }
  });

  test('a working watch cut, the history compacted and the relist answered 500: the watch resumes at once, the list retries after one backoff; one warning and one recovery, for the list', async () => {
    api.putEndpointSlice(slice('llama-x', 8000, [['10.0.8.1', true]]));
    const { source, log } = newSource(kubeconfig, { tuning: { backoffBaseMs: 250, backoffMaxMs: 10_000 } });
    source.start();
    try {
      await eventually(() => source.endpoints().length === 1 && api.watchCount === 1, 5_000, 'the first list and watch');
      api.putEndpointSlice(slice('llama-x', 8000, [['10.0.8.1', true], ['10.0.8.2', true]]));
      await eventually(() => source.endpoints().length === 2, 5_000, 'an event: the watch is working');
      const beforeCut = api.requests.length;
      api.failNext('list', 'endpointslices', 500);
      api.breakWatches();
      api.putEndpointSlice(slice('llama-x', 8000, [['10.0.8.1', true], ['10.0.8.2', true], ['10.0.8.3', true]]));
      api.compact();
      await eventually(() => source.endpoints().length === 3, 10_000, 'the relisted endpoints');
      // Counted, not timed: the resumed watch (its 410 Gone comes as an event), then one failed list and one retry after its backoff.
      const afterCut = api.requests.slice(beforeCut).filter((r) => r.resource === 'endpointslices');
      assert.deepEqual(afterCut.slice(0, 3).map((r) => [r.verb, r.status]), [['watch', 200], ['list', 500], ['list', 200]]);
      assert.ok(afterCut[2]!.at - afterCut[1]!.at >= 200, 'the list was retried after its backoff (250 ms ±20%)');
      await eventually(() => log.lines.some((l) => l['msg'] === 'kubernetes API call recovered'), 5_000, 'the recovery line');
      const warned = log.lines.filter((l) => Number(l['level']) >= 40);
      assert.deepEqual(warned.map((l) => [l['call'], l['status']]), [['endpointslices.list', 500]]);
      const recovered = log.lines.filter((l) => l['msg'] === 'kubernetes API call recovered');
      assert.deepEqual(recovered.map((l) => l['call']), ['endpointslices.list']);
    } finally {
      await source.stop();
      api.deleteEndpointSlice(NS, 'llama-x');
    }
  });

  for (const watchHeaders of ['flushed', 'held'] as const) {
    test(`watches cut as soon as they are sent (status line ${watchHeaders === 'flushed' ? 'sent at once' : 'held until a first line'}) are failures in a row: the backoff grows, one warning`, async () => {
      // No bookmarks: no watch ever delivers a line, and each is cut within milliseconds.
      const flaky = await startFakeKube({ watchHeaders });
      flaky.addDeployment(NS, 'llama', 0);
      flaky.putEndpointSlice(slice('llama-f', 8000, [['10.0.9.1', true]]));
      const { source, log } = newSource(writeKubeconfig(flaky.url), { tuning: { backoffBaseMs: 50, backoffMaxMs: 400 } });
      const cutter = setInterval(() => flaky.breakWatches(), 5);
      source.start();
      try {
        const watches = (): KubeRequest[] => flaky.requests.filter((r) => r.verb === 'watch');
        await eventually(() => watches().length >= 6, 30_000, 'six watches');
        // 50, 100, 200, 400, 400 ms (±20%) between watches, not one per round trip: each gap is at
        // least its backoff (a busy machine only lengthens them).
        const at = watches().map((r) => r.at);
        const gaps = at.slice(1, 6).map((t, i) => Math.round(t - at[i]!));
        gaps.forEach((gap, i) => assert.ok(gap >= 0.8 * Math.min(50 * 2 ** i, 400) - 1, `gap ${i + 1} of ${gaps.join(', ')} ms: the backoff grows`));
        const warnings = log.lines.filter((l) => l['msg'] === 'kubernetes API call failed; retrying with backoff');
        assert.equal(warnings.length, 1, JSON.stringify(warnings));
        assert.ok(!log.lines.some((l) => l['msg'] === 'kubernetes API call recovered'), 'a watch cut at once is no recovery');
        assert.deepEqual(ids(source.endpoints()), ['10.0.9.1:8000'], 'the known endpoint stays');
      } finally {
        clearInterval(cutter);
        await source.stop();
        await flaky.close();
      }
    });
  }

  test("a silent watch whose status line the server holds until its first line (a Node.js server without flushHeaders()), open a second and cut, resumes at once, cut after cut, without a warning: the backoff is not waited", async () => {
    // No bookmarks: nothing goes through the watches, so none of them is ever answered before its cut.
    const holding = await startFakeKube({ watchHeaders: 'held' });
    holding.addDeployment(NS, 'llama', 0);
    holding.putEndpointSlice(slice('llama-h', 8000, [['10.0.11.1', true]]));
    // A backoff no test run outlasts: a resume that waited it would never be seen.
    const { source, log } = newSource(writeKubeconfig(holding.url), { tuning: { backoffBaseMs: 600_000, backoffMaxMs: 600_000 } });
    source.start();
    const watches = (): KubeRequest[] => holding.requests.filter((r) => r.verb === 'watch');
    try {
      await eventually(() => source.endpoints().length === 1 && holding.watchCount === 1, 5_000, 'the first list and watch');
      for (let cut = 1; cut <= 3; cut++) {
        const sent = watches().length;
        // Open a while, as a watch is between two changes (one cut as soon as it is sent is a failure).
        const opened = watches().at(-1)!.at;
        await eventually(() => performance.now() - opened >= WATCH_HELD_MS, 5_000, 'the watch open for a second');
        holding.cutWatches();
        await eventually(() => holding.watchCount === 1 && watches().length === sent + 1, 30_000, `the watch to resume after cut ${cut} (without the 600 s backoff)`);
      }
      assert.deepEqual(log.lines.filter((l) => Number(l['level']) >= 40), [], 'no warning');
      assert.equal(holding.requests.filter((r) => r.verb === 'list').length, 1, 'no relist');
      holding.putEndpointSlice(slice('llama-h', 8000, [['10.0.11.1', true], ['10.0.11.2', true]]));
      await eventually(() => source.endpoints().length === 2, 5_000, 'an event through the last watch');
    } finally {
      await source.stop();
      await holding.close();
    }
  });

  for (const afterErrorEvent of ['end', 'keep-open'] as const) {
    test(`an ERROR event other than 410 (a 200 whose one line is a Status 500, the stream ${afterErrorEvent === 'end' ? 'ended' : 'kept open'} after it) is a failure: each next watch waits its backoff, one warning with the status, then one recovery`, async () => {
      const failing = await startFakeKube({ afterErrorEvent });
      failing.addDeployment(NS, 'llama', 0);
      failing.putEndpointSlice(slice('llama-e', 8000, [['10.0.10.1', true]]));
      failing.failNext('watch', 'endpointslices', 500, 3, 'event');
      const { source, log } = newSource(writeKubeconfig(failing.url), { tuning: { backoffBaseMs: 50, backoffMaxMs: 400 } });
      source.start();
      const watches = (): KubeRequest[] => failing.requests.filter((r) => r.verb === 'watch');
      try {
        await eventually(() => watches().length === 4 && failing.watchCount === 1, 10_000, 'three watches answered with the ERROR event, then one that works');
        // 50, 100, 200 ms (±20%) between watches, not one per round trip.
        const at = watches().map((r) => r.at);
        const gaps = at.slice(1).map((t, i) => Math.round(t - at[i]!));
        gaps.forEach((gap, i) => assert.ok(gap >= 0.8 * 50 * 2 ** i - 1, `gap ${i + 1} of ${gaps.join(', ')} ms: each watch waits its backoff`));
        const failed = log.lines.filter((l) => String(l['msg']).startsWith('kubernetes API call failed'));
        assert.deepEqual(
          failed.map((l) => [l['msg'], l['call'], l['status'], l['reason'], l['failures']]),
          [
            ['kubernetes API call failed; retrying with backoff', 'endpointslices.watch', 500, 'InternalError', 1],
            ['kubernetes API call failed again', 'endpointslices.watch', 500, 'InternalError', 2],
            ['kubernetes API call failed again', 'endpointslices.watch', 500, 'InternalError', 3],
          ],
        );
        assert.ok(!log.lines.some((l) => l['msg'] === 'endpointslice watch broken; resuming'), 'not taken for a working watch that broke');
        // The fourth watch works: an event comes through it, and one line ends the three failures.
        failing.putEndpointSlice(slice('llama-e', 8000, [['10.0.10.1', true], ['10.0.10.2', true]]));
        await eventually(() => source.endpoints().length === 2, 5_000, 'an event through the fourth watch');
        await eventually(() => log.lines.some((l) => l['msg'] === 'kubernetes API call recovered'), 5_000, 'the recovery line');
        const recovered = log.lines.filter((l) => l['msg'] === 'kubernetes API call recovered');
        assert.deepEqual(recovered.map((l) => [l['call'], l['failures']]), [['endpointslices.watch', 3]]);
        assert.equal(failing.requests.filter((r) => r.verb === 'list').length, 1, 'no relist: only 410 relists');
      } finally {
        await source.stop();
        await failing.close();
      }
    });
  }

  test('a watch the server ends at its timeoutSeconds resumes from the last resourceVersion (bookmarks move it), without relisting', async () => {
    api.putEndpointSlice(slice('llama-t', 8000, [['10.0.6.1', true]]));
    const listsBefore = api.requests.filter((r) => r.verb === 'list').length;
    const watchesBefore = api.requests.filter((r) => r.verb === 'watch').length;
    const { source } = newSource(kubeconfig, { tuning: { watchTimeoutSeconds: 1 } });
    source.start();
    try {
      await eventually(() => api.requests.filter((r) => r.verb === 'watch').length >= watchesBefore + 3, 10_000, 'three watches');
      const watches = api.requests.filter((r) => r.verb === 'watch').slice(watchesBefore);
      assert.ok(watches.every((r) => r.query['timeoutSeconds'] === '1'));
      // Each resumed watch starts where the last one ended: bookmarks moved the resourceVersion on.
      const rvs = watches.map((r) => Number(r.query['resourceVersion']));
      for (let i = 1; i < rvs.length; i++) assert.ok(rvs[i]! >= rvs[i - 1]!);
      assert.equal(api.requests.filter((r) => r.verb === 'list').length, listsBefore + 1, 'one list only');
      api.putEndpointSlice(slice('llama-t', 8000, [['10.0.6.1', true], ['10.0.6.2', true]]));
      await eventually(() => source.endpoints().length === 2, 5_000, 'an event on a resumed watch');
    } finally {
      await source.stop();
      api.deleteEndpointSlice(NS, 'llama-t');
    }
  });

  test('a watch that stays open but silent is restarted', async () => {
    // No bookmarks from this server and a short stall limit: each silent watch is given up.
    const quiet = await startFakeKube();
    quiet.addDeployment(NS, 'llama', 0);
    quiet.putEndpointSlice(slice('llama-q', 8000, [['10.0.4.1', true]]));
    const { source } = newSource(writeKubeconfig(quiet.url), { tuning: { watchStallMs: 100 } });
    source.start();
    try {
      await eventually(() => quiet.requests.filter((r) => r.verb === 'watch').length >= 3, 10_000, 'restarted watches');
      quiet.putEndpointSlice(slice('llama-q', 8000, [['10.0.4.1', true], ['10.0.4.2', true]]));
      await eventually(() => source.endpoints().length === 2, 5_000, 'an event after the restarts');
      assert.deepEqual(quiet.forbiddenCalls(), []);
    } finally {
      await source.stop();
      await quiet.close();
    }
  });

  test('API server down: the known endpoints stay; one warning per kind of call; after it comes back, new endpoints arrive', async () => {
    api.putEndpointSlice(slice('llama-d', 8000, [['10.0.5.1', true]]));
    const { source, log } = newSource(kubeconfig);
    const everyList: string[][] = [];
    source.onEndpoints((eps) => everyList.push(ids(eps)));
    source.start();
    try {
      await eventually(() => source.endpoints().length === 1 && api.watchCount > 0, 5_000, 'the first list and watch');
      const before = api.requests.length;
      await api.goDown();
      // Several failed attempts (refused connections) while it is down.
      await eventually(() => log.lines.filter((l) => l['msg'] === 'kubernetes API call failed again').length >= 3, 10_000, 'retries');
      assert.equal(api.requests.length, before, 'nothing reached the server while it was down');
      assert.deepEqual(ids(source.endpoints()), ['10.0.5.1:8000'], 'the known endpoint stays');
      const warnings = log.lines.filter((l) => l['msg'] === 'kubernetes API call failed; retrying with backoff');
      assert.equal(warnings.length, 1, JSON.stringify(warnings));
      assert.equal(warnings[0]!['call'], 'endpointslices.watch');
      // The retries find the port closed (the watch cut short is resumed at once if it was working).
      assert.ok(log.lines.some((l) => l['msg'] === 'kubernetes API call failed again' && l['reason'] === 'ECONNREFUSED'));
      api.putEndpointSlice(slice('llama-d', 8000, [['10.0.5.1', true], ['10.0.5.2', true]]));
      await api.comeUp();
      await eventually(() => source.endpoints().length === 2, 10_000, 'the endpoint added while the server was away');
      await eventually(() => log.lines.some((l) => l['msg'] === 'kubernetes API call recovered'), 5_000, 'the recovery line');
      for (const list of everyList) assert.ok(list.includes('10.0.5.1:8000'));
      assert.ok(!log.text().includes(KUBE_TOKEN));
    } finally {
      await source.stop();
      api.deleteEndpointSlice(NS, 'llama-d');
    }
  });
});
