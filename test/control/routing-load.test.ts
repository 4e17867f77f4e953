// Queue-aware choice (`replicas.load`) through the real gateway: replicas serve a Prometheus
// endpoint with values the test sets, and requests follow the shortest model-server queue as it
// changes, avoid a cache-full replica, fall back to in-flight counts when an endpoint fails or
// hangs (without delaying a request, logged once per replica and once at recovery), and — with
// two gateways in front of the same replicas — follow the queue the other gateway's traffic made.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { request } from 'undici';
import { AUTH, metric, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { type LoadReplica, startLoadReplica } from '../helpers/load-replica.js';
import { eventually } from '../helpers/wait.js';

const open: { close(): Promise<void> }[] = [];
after(async () => {
  for (const x of open.splice(0).reverse()) await x.close();
});

async function replicas(...specs: [name: string, waiting: number, cacheUsage?: number][]): Promise<LoadReplica[]> {
  const list = await Promise.all(specs.map(([name, waiting, cache]) => startLoadReplica(name, waiting, cache ?? 0)));
  open.push(...list);
  return list;
}

/** A gateway in front of `list`, reading their loads with `load` (undefined: not reading). */
async function gateway(list: LoadReplica[], load: Record<string, unknown> | undefined, extra: Record<string, unknown> = {}): Promise<TestGateway> {
  // One thread: equal replicas rotate per thread, so the order of sequential requests is exact.
  const tg = await startTestGateway(rawService({ urls: list.map((r) => r.url), ...(load === undefined ? {} : { load }) }, extra), { workers: 1 });
  open.push(tg);
  return tg;
}

/** `n` sequential requests; the name of the replica that answered each. */
async function served(tg: TestGateway, n: number): Promise<string[]> {
  const names: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await request(tg.url('/v1/chat/completions'), { method: 'POST', headers: AUTH, body: '{}' });
    assert.equal(res.statusCode, 200);
    names.push(await res.body.text());
  }
  return names;
}

/** Waits until the gateway's gauges show these waiting values (null: no valid reading). */
async function readings(tg: TestGateway, want: Record<string, number | null>): Promise<void> {
  await eventually(
    async () => {
      for (const [replica, value] of Object.entries(want)) {
        const got = await metric(tg, `sluice_replica_waiting{service="svc",replica="${replica}"}`);
        if ((got ?? null) !== value) return false;
      }
      return true;
    },
    10_000,
    `readings ${JSON.stringify(want)}`,
  );
}

const count = (names: string[]): Record<string, number> => names.reduce<Record<string, number>>((c, n) => ((c[n] = (c[n] ?? 0) + 1), c), {});

test('requests follow the shortest model-server queue as it changes', async () => {
  const [a, b, c] = await replicas(['a', 5], ['b', 0], ['c', 9]);
  const tg = await gateway([a!, b!, c!], { preset: 'vllm', intervalMs: 500 });
  await readings(tg, { 'svc-1': 5, 'svc-2': 0, 'svc-3': 9 });
  assert.deepEqual(count(await served(tg, 12)), { b: 12 }, 'the empty queue takes every request (fewest in flight would rotate)');
  a!.waiting = 1;
  b!.waiting = 7;
  await readings(tg, { 'svc-1': 1, 'svc-2': 7 });
  assert.deepEqual(count(await served(tg, 12)), { a: 12 });
  // Equal queues share the traffic in turn.
  a!.waiting = 2;
  b!.waiting = 2;
  c!.waiting = 2;
  await readings(tg, { 'svc-1': 2, 'svc-2': 2, 'svc-3': 2 });
  assert.deepEqual(count(await served(tg, 12)), { a: 4, b: 4, c: 4 });
});

test('a cache-full replica is avoided while another has room, whatever the queues', async () => {
  const [a, b] = await replicas(['a', 0, 0.95], ['b', 3, 0.2]);
  const tg = await gateway([a!, b!], { waiting: 'vllm:num_requests_waiting', cacheUsage: 'vllm:kv_cache_usage_perc', cacheUsageHigh: 0.9, intervalMs: 500 });
  await readings(tg, { 'svc-1': 0, 'svc-2': 3 });
  assert.equal(await metric(tg, 'sluice_replica_cache_usage{service="svc",replica="svc-1"}'), 0.95);
  assert.deepEqual(count(await served(tg, 8)), { b: 8 }, 'the empty but full replica is passed over');
  b!.cacheUsage = 0.9; // at the threshold counts as full
  await eventually(async () => (await metric(tg, 'sluice_replica_cache_usage{service="svc",replica="svc-2"}')) === 0.9, 10_000, 'b full');
  assert.deepEqual(count(await served(tg, 8)), { a: 8 }, 'every replica full: the queues decide again');
});

test('failing and hanging endpoints fall back to in-flight counts without delaying any request; logged once per replica and recovery', async () => {
  const [hang, fail, garbage, reset, good] = await replicas(['hang', 0], ['fail', 0], ['garbage', 0], ['reset', 0], ['good', 2]);
  hang!.metrics = 'hang';
  fail!.metrics = 'fail';
  garbage!.metrics = 'garbage';
  reset!.metrics = 'reset';
  const interval = 250; // a reading may take 500 ms
  const tg = await gateway([hang!, fail!, garbage!, reset!, good!], { preset: 'vllm', intervalMs: interval });
  await readings(tg, { 'svc-5': 2 });
  // Requests while the hanging endpoint holds its reading for 500 ms at a time.
  const started = performance.now();
  const names: string[] = [];
  // Requests sent and answered while one hanging reading stayed open: none could be if requests
  // waited for readings. Sent until three were (a busy machine may need more tries; the guard
  // fails the test only if none ever is).
  let withinHang = 0;
  while (performance.now() - started < 6 * interval || hang!.scrapes < 3 || fail!.scrapes < 3 || withinHang < 3) {
    assert.ok(performance.now() - started < 60_000, `no request waited for a reading: ${withinHang} of ${names.length} were answered within one hanging reading`);
    const [scrapes, open] = [hang!.scrapes, hang!.hangingOpen()];
    names.push(...(await served(tg, 1)));
    if (open > 0 && hang!.hangingOpen() > 0 && hang!.scrapes === scrapes) withinHang++;
  }
  const c = count(names);
  assert.equal(c['good'], undefined, 'the replica with a queue of 2 is passed over: the others weigh their in-flight 0');
  for (const n of ['hang', 'fail', 'garbage', 'reset']) assert.ok((c[n] ?? 0) > 0, `${n} served`);

  const failures = (): Record<string, unknown>[] => tg.logs.filter((l) => l.msg?.toString().startsWith('load reading failed'));
  await eventually(() => failures().length === 4, 10_000, 'four failures logged');
  assert.deepEqual(failures().map((l) => l.replica).sort(), ['svc-1', 'svc-2', 'svc-3', 'svc-4']);
  const problems = Object.fromEntries(failures().map((l) => [l.replica, String(l.problem)]));
  assert.match(problems['svc-1']!, /no answer within 500 ms|stale/);
  assert.equal(problems['svc-2'], 'status 500');
  assert.equal(problems['svc-3'], 'no vllm:num_requests_waiting sample');
  assert.match(problems['svc-4']!, /ECONNRESET|closed|socket hang up/);
  assert.ok(hang!.scrapes >= 2 && fail!.scrapes >= 3, 'readings were retried, logged once');
  // At most one reading per replica at a time: a hanging one is read again only after its 500 ms.
  const elapsed = performance.now() - started;
  assert.ok(hang!.scrapes <= Math.ceil(elapsed / 500) + 2, `${hang!.scrapes} readings of the hanging endpoint in ${Math.round(elapsed)} ms`);
  // The failing endpoint (answering at once) is read again while one hanging reading stays open:
  // readings do not wait for each other. (Not "read more often" by count: on a busy machine the
  // interval's ticks can come as far apart as a hanging reading lasts.)
  let mark: { hang: number; fail: number } | undefined;
  await eventually(
    () => {
      if (hang!.hangingOpen() === 0) mark = undefined;
      else if (mark === undefined || mark.hang !== hang!.scrapes) mark = { hang: hang!.scrapes, fail: fail!.scrapes };
      else return fail!.scrapes > mark.fail;
      return false;
    },
    30_000,
    'a reading of the failing endpoint while one hanging reading stays open',
  );
  for (const r of ['svc-1', 'svc-2', 'svc-3', 'svc-4']) assert.equal(await metric(tg, `sluice_replica_waiting{service="svc",replica="${r}"}`), undefined);

  // Recovery is logged once; a new failure is a new episode.
  fail!.metrics = 'ok';
  fail!.waiting = 1;
  await readings(tg, { 'svc-2': 1 });
  const readsOfFail = fail!.scrapes;
  await eventually(() => fail!.scrapes >= readsOfFail + 3, 10_000, 'three more readings');
  const recovered = tg.logs.filter((l) => l.msg === 'load reading recovered');
  assert.deepEqual(recovered.map((l) => l.replica), ['svc-2']);
  assert.equal(recovered[0]!.problem, 'status 500');
  fail!.metrics = 'fail';
  await eventually(() => failures().length === 5, 10_000, 'the new failure logged');
  const readsOfFailing = fail!.scrapes;
  await eventually(() => fail!.scrapes >= readsOfFailing + 3, 10_000, 'three more failing readings');
  assert.equal(failures().length, 5, 'once');
  assert.equal(tg.logs.filter((l) => l.level === 50).length, 0, 'nothing at error level');
});

test('a reading gone stale stops counting: the replica is weighed by its requests in flight again', async () => {
  const [a, b] = await replicas(['a', 0], ['b', 4]);
  const tg = await gateway([a!, b!], { preset: 'vllm', intervalMs: 300 });
  await readings(tg, { 'svc-1': 0, 'svc-2': 4 });
  // Five long requests on a, one per reading: with its queue of 0 it wins over b's 4 each time
  // (what was sent before a reading is the server's to report, not counted on top).
  const held = [];
  for (let i = 1; i <= 5; i++) {
    held.push(await request(tg.url('/hold'), { method: 'POST', headers: AUTH, body: '' }));
    assert.equal(a!.holding(), i, `long request ${i} on a`);
    const scrapes = a!.scrapes;
    await eventually(() => a!.scrapes >= scrapes + 2, 10_000, 'a new reading');
  }
  assert.deepEqual(count(await served(tg, 3)), { a: 3 });
  // a's endpoint stops answering: its reading goes stale and it weighs 5 in flight, above b's 4
  // (kept, its reading would weigh 0 + the 3 sent since it, below b's 4).
  a!.metrics = 'hang';
  await readings(tg, { 'svc-1': null });
  assert.deepEqual(count(await served(tg, 3)), { b: 3 });
  a!.release();
  for (const res of held) await res.body.text();
});

test("two gateways in front of the same replica: the second sees the queue the first one's traffic made", async () => {
  const [a, b] = await replicas(['a', 0], ['b', 0]);
  a!.batch = 1; // a runs one request at a time; its other /hold requests wait in its queue
  const first = await gateway([a!], undefined);
  const second = await gateway([a!, b!], { preset: 'vllm', intervalMs: 500 });
  const held = [0, 1, 2].map(() => request(first.url('/hold'), { method: 'POST', headers: AUTH, body: '' }));
  await eventually(() => a!.holding() === 3, 10_000, 'three held on a');
  // The second gateway has nothing in flight anywhere: only a's endpoint tells it a is busy.
  await readings(second, { 'svc-1': 2, 'svc-2': 0 });
  assert.deepEqual(count(await served(second, 6)), { b: 6 }, 'every request goes to the replica without a queue (in-flight counts would rotate)');
  a!.release();
  for (const res of await Promise.all(held)) await res.body.text();
  await readings(second, { 'svc-1': 0 });
  assert.deepEqual(await served(second, 6), ['a', 'b', 'a', 'b', 'a', 'b'], 'empty queues again: in turn');
});
