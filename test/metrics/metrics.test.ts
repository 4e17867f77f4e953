// Per-request metrics: the typed-array counter stores and their sum (unit level), and /metrics
// of a real gateway counting every relayed request exactly once by service, status and outcome.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { Readable } from 'node:stream';
import { after, test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { request } from 'undici';
import { Metrics } from '../../src/metrics/metrics.js';
import { CounterLayout, PAIR_SLOTS, RequestCounters, sumCounters } from '../../src/metrics/request-counters.js';
import { AUTH, metricSamples, rawService, startTestGateway } from '../helpers/gateway.js';
import { closedPort, readBody, startReplica } from '../helpers/replica.js';
import { eventually } from '../helpers/wait.js';

const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const cleanup of cleanups) await cleanup();
});

/** The samples of one family whose name starts with `prefix{`. */
function family(all: Map<string, number>, prefix: string): Map<string, number> {
  return new Map([...all].filter(([name]) => name.startsWith(`${prefix}{`)));
}

test('summing two counter stores (one on a SharedArrayBuffer) gives the sum of what each counted', () => {
  const layout = new CounterLayout(['a', 'b']);
  const one = new RequestCounters(layout);
  const two = new RequestCounters(layout, new SharedArrayBuffer(layout.byteLength));
  one.started();
  one.started();
  one.finished('a', 200, 'ok', 10, 100, 0.002, 0.003);
  two.started();
  two.finished('a', 200, 'ok', 5, 50, 0.0005, 2);
  two.started();
  two.finished('a', 502, 'upstream_unavailable', 7, 0, -1, 0.01);
  two.started();
  two.finished('b', 404, 'ok', 0, 20, 0.001, 0.001);
  two.started(); // still in flight

  const totals = sumCounters(layout, [one, two]);
  assert.equal(totals.inflight, 2);
  const [a, b] = totals.services;
  assert.deepEqual(
    [...a!.requests.values()].sort((x, y) => x.status.localeCompare(y.status)),
    [
      { status: '200', outcome: 'ok', count: 2 },
      { status: '502', outcome: 'upstream_unavailable', count: 1 },
    ],
  );
  assert.deepEqual([...b!.requests.values()], [{ status: '404', outcome: 'ok', count: 1 }]);
  assert.equal(a!.bytesIn, 22);
  assert.equal(a!.bytesOut, 150);
  assert.equal(b!.bytesOut, 20);
  // ttfb of a: 0.0005 (le=0.0005, bounds are inclusive) and 0.002 (le=0.0025); the 502 wrote nothing.
  assert.equal(a!.ttfb[0], 1);
  assert.equal(a!.ttfb[2], 1);
  assert.equal(a!.ttfb.slice(0, -1).reduce((s, n) => s + n, 0), 2);
  assert.equal(a!.ttfb.at(-1), 0.0025);
  // duration of a: three requests, summing 2.013 s; 2 s falls in le=2.5 (index 11).
  assert.equal(a!.duration.slice(0, -1).reduce((s, n) => s + n, 0), 3);
  assert.equal(a!.duration[11], 1);
  assert.ok(Math.abs(a!.duration.at(-1)! - 2.013) < 1e-9);
  assert.equal(b!.ttfb[1], 1); // 0.001 → le=0.001

  // The same through Metrics and prom-client's rendering, with `two` added as another thread's store.
  const metrics = new Metrics(['a', 'b']);
  const local = metrics.counters;
  local.started();
  local.finished('a', 200, 'ok', 1, 1, 0.002, 0.003);
  metrics.addCounters(two);
  return metrics.render().then((text) => {
    const all = metricSamples(text);
    assert.equal(all.get('sluice_requests_total{service="a",status="200",outcome="ok"}'), 2);
    assert.equal(all.get('sluice_requests_total{service="a",status="502",outcome="upstream_unavailable"}'), 1);
    assert.equal(all.get('sluice_requests_total{service="b",status="404",outcome="ok"}'), 1);
    assert.equal(all.get('sluice_request_duration_seconds_count{service="a"}'), 3);
    assert.equal(all.get('sluice_request_duration_seconds_bucket{le="+Inf",service="a"}'), 3);
    assert.equal(all.get('sluice_request_duration_seconds_bucket{le="0.005",service="a"}'), 1);
    assert.equal(all.get('sluice_request_duration_seconds_bucket{le="0.01",service="a"}'), 2);
    assert.equal(all.get('sluice_time_to_first_byte_seconds_count{service="a"}'), 2);
    assert.equal(all.get('sluice_time_to_first_byte_seconds_count{service="b"}'), 1);
    assert.equal(all.get('sluice_bytes_relayed_total{service="a",direction="in"}'), 13);
    assert.equal(all.get('sluice_inflight_requests'), 1);
  });
});

test('the status label set is bounded: past the table, and outside 100..999, a status counts as "other"', () => {
  const layout = new CounterLayout(['a']);
  const store = new RequestCounters(layout);
  for (let status = 200; status < 200 + PAIR_SLOTS + 6; status++) store.finished('a', status, 'ok', 0, 0, -1, 0);
  store.finished('a', 200, 'ok', 0, 0, -1, 0); // an existing pair still counts exactly
  store.finished('a', 42, 'internal_error', 0, 0, -1, 0);
  store.finished('a', 200, 'no_such_outcome', 0, 0, -1, 0);
  store.finished('nobody', 200, 'ok', 0, 0, -1, 0); // not in the layout: not counted
  const requests = sumCounters(layout, [store]).services[0]!.requests;
  assert.equal(requests.size, PAIR_SLOTS + 3);
  assert.equal(requests.get('200 ok')!.count, 2);
  assert.equal(requests.get('other ok')!.count, 6);
  assert.equal(requests.get('other internal_error')!.count, 1);
  // 200 other is the 65th pair: the table is full, so it is "other" too.
  assert.equal(requests.get('other other')!.count, 1);
  const total = [...requests.values()].reduce((sum, pair) => sum + pair.count, 0);
  assert.equal(total, PAIR_SLOTS + 6 + 1 + 1 + 1);
});

test('a store must fit its layout, and only stores of the same services can be summed', () => {
  const layout = new CounterLayout(['a', 'b']);
  assert.throws(() => new RequestCounters(layout, new SharedArrayBuffer(layout.byteLength - 8)), /needs \d+ bytes/);
  assert.throws(() => new CounterLayout(['a', 'a']), /duplicate/);
  const metrics = new Metrics(['a', 'b']);
  metrics.addCounters(new RequestCounters(new CounterLayout(['a', 'b']), new SharedArrayBuffer(layout.byteLength)));
  assert.throws(() => metrics.addCounters(new RequestCounters(new CounterLayout(['b', 'a']))), /another layout/);
});

test('a worker thread counts into a SharedArrayBuffer; the scrape on the main thread includes it', async () => {
  const slugs = ['a', 'b'];
  const main = new Metrics(slugs);
  const shared = new SharedArrayBuffer(main.layout.byteLength);
  main.addCounters(new RequestCounters(main.layout, shared));
  main.requestStarted();
  main.requestFinished('b', 200, 'ok', 1, 1, 0.001, 0.001);
  const countersModule = new URL('../../src/metrics/request-counters.js', import.meta.url).href;
  const worker = new Worker(
    `import { workerData, parentPort } from 'node:worker_threads';
     const { CounterLayout, RequestCounters } = await import(workerData.module);
     const store = new RequestCounters(new CounterLayout(workerData.slugs), workerData.shared);
     for (let i = 0; i < 1000; i++) { store.started(); store.finished('b', i % 10 === 0 ? 503 : 200, i % 10 === 0 ? 'queue_full' : 'ok', 3, 5, 0.001, 0.002); }
     store.started();
     parentPort.postMessage('done');`,
    { eval: true, workerData: { module: countersModule, slugs, shared } },
  );
  await once(worker, 'message');
  await worker.terminate();
  const all = metricSamples(await main.render());
  assert.equal(all.get('sluice_requests_total{service="b",status="200",outcome="ok"}'), 901);
  assert.equal(all.get('sluice_requests_total{service="b",status="503",outcome="queue_full"}'), 100);
  assert.equal(all.get('sluice_request_duration_seconds_count{service="b"}'), 1001);
  assert.equal(all.get('sluice_bytes_relayed_total{service="b",direction="out"}'), 5001);
  assert.equal(all.get('sluice_inflight_requests'), 1);
  assert.equal(all.get('sluice_request_duration_seconds_count{service="a"}'), 0);
});

test('/metrics counts every relayed request once by service, status and outcome; refused requests are logged, not counted', async () => {
  const replica = await startReplica(async (req, res) => {
    await readBody(req);
    const status = req.url === '/ok' ? 200 : req.url === '/created' ? 201 : req.url === '/missing' ? 404 : 500;
    res.writeHead(status, { 'content-type': 'text/plain' });
    res.end(`status ${status}`);
  });
  const downPort = await closedPort();
  const tg = await startTestGateway([
    rawService({ urls: [replica.url] }, { slug: 'svc', maxRequestBytes: 1000 }),
    rawService({ urls: [`http://127.0.0.1:${downPort}`] }, { slug: 'down' }),
  ]);
  cleanups.push(() => tg.close(), () => replica.close());

  const send = async (url: string, init: { method?: string; headers?: Record<string, string>; body?: string | Buffer | Readable } = {}): Promise<number> => {
    const answer = await request(url, { method: 'POST', headers: AUTH, body: 'abc', ...init });
    await answer.body.dump();
    return answer.statusCode;
  };
  // Relayed: answered by the replica (any status is outcome ok), or failed by Sluice after it began.
  assert.equal(await send(tg.url('/ok')), 200);
  assert.equal(await send(tg.url('/ok')), 200);
  assert.equal(await send(tg.url('/ok')), 200);
  assert.equal(await send(tg.url('/created')), 201);
  assert.equal(await send(tg.url('/missing')), 404);
  assert.equal(await send(tg.url('/boom')), 500);
  assert.equal(await send(tg.url('/x', 'down')), 502);
  assert.equal(await send(tg.url('/x', 'down')), 502);
  async function* tooLong() {
    for (let i = 0; i < 20; i++) {
      yield Buffer.alloc(100, 0x61);
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
  // Past maxRequestBytes mid-stream: a relayed request that ends 413 payload_too_large. (The
  // gateway closes the connection after its answer; a client still sending may see a reset.)
  await send(tg.url('/ok'), { body: Readable.from(tooLong()) }).catch(() => undefined);
  const relayed = 9;

  // Refused before relaying: logged as `request refused`, not in sluice_requests_total.
  assert.equal(await send(tg.url('/ok'), { headers: {} }), 401);
  assert.equal(await send(`${tg.origin}/nowhere`), 404);
  assert.equal(await send(tg.url('/ok', 'nosuch')), 404);
  assert.equal(await send(tg.url('/ok'), { body: Buffer.alloc(1001) }), 413);
  assert.equal(await send(tg.url('/ok'), { method: 'GET', body: undefined as unknown as string }), 405);

  const requestLines = () => tg.logs.filter((l) => l['msg'] === 'request');
  await eventually(() => requestLines().length === relayed, 5000, `${relayed} request log lines`);
  await eventually(() => tg.logs.filter((l) => l['msg'] === 'request refused').length === 5, 5000, 'five refused lines');

  const all = metricSamples(await (await request(`${tg.origin}/metrics`)).body.text());
  assert.deepEqual(
    Object.fromEntries(family(all, 'sluice_requests_total')),
    {
      'sluice_requests_total{service="svc",status="200",outcome="ok"}': 3,
      'sluice_requests_total{service="svc",status="201",outcome="ok"}': 1,
      'sluice_requests_total{service="svc",status="404",outcome="ok"}': 1,
      'sluice_requests_total{service="svc",status="500",outcome="ok"}': 1,
      'sluice_requests_total{service="svc",status="413",outcome="payload_too_large"}': 1,
      'sluice_requests_total{service="down",status="502",outcome="upstream_unavailable"}': 2,
    },
  );
  // The histograms and byte counters agree with the access log, service by service.
  for (const service of ['svc', 'down']) {
    const lines = requestLines().filter((l) => l['service'] === service);
    assert.equal(all.get(`sluice_request_duration_seconds_count{service="${service}"}`), lines.length);
    assert.equal(all.get(`sluice_request_duration_seconds_bucket{le="+Inf",service="${service}"}`), lines.length);
    const answered = lines.filter((l) => typeof l['ttfbMs'] === 'number').length;
    assert.equal(all.get(`sluice_time_to_first_byte_seconds_count{service="${service}"}`), answered);
    const bytesIn = lines.reduce((sum, l) => sum + (l['bytesIn'] as number), 0);
    assert.equal(all.get(`sluice_bytes_relayed_total{service="${service}",direction="in"}`), bytesIn);
  }
  assert.equal(all.get('sluice_time_to_first_byte_seconds_count{service="svc"}')! >= 6, true);
  assert.equal(all.get('sluice_inflight_requests'), 0);
});
