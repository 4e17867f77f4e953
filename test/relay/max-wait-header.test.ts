// `X-Sluice-Max-Wait-Ms` through the real gateway: 0 means "do not wait" (503 no_replica at once
// when no replica can take the request now, and a cold launched service still starts, so a retry
// finds it warm); a value lowers the service's queue.maxWaitMs for this request and never raises
// it; anything but an integer ≥ 0 is 400; the header never reaches the replica. The wake of a
// request that would not wait ends once a replica is ready (its idle stop leaves the service cold).
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { request } from 'undici';
import { AUTH, metric, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { serverCommand } from '../fixtures/replica-harness.js';
import { eventually } from '../helpers/wait.js';

const open: { close(): Promise<void> }[] = [];
after(async () => {
  for (const x of open.splice(0).reverse()) await x.close();
});

interface Answer {
  status: number;
  error: string | undefined;
  retryAfter: string | undefined;
  body: string;
  ms: number;
}

async function ask(tg: TestGateway, wait: string | undefined, body = 'x', slug?: string): Promise<Answer> {
  const t0 = performance.now();
  const headers = wait === undefined ? AUTH : { ...AUTH, 'x-sluice-max-wait-ms': wait };
  const res = await request(tg.url('/x', slug), { method: 'POST', headers, body });
  const text = await res.body.text();
  return { status: res.statusCode, error: res.headers['x-sluice-error'] as string | undefined, retryAfter: res.headers['retry-after'] as string | undefined, body: text, ms: performance.now() - t0 };
}

/** A static service of one replica with `concurrency: 1`, whose `hold` request waits for `release()`. */
async function busyService(maxWaitMs: number): Promise<{ tg: TestGateway; replica: TestReplica; seen: string[]; release(): void; held: Promise<Answer> }> {
  const seen: string[] = [];
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const replica = await startReplica(async (req, res) => {
    const body = (await readBody(req)).toString();
    seen.push(body);
    if (body === 'hold') await released;
    res.end(body);
  });
  open.push(replica);
  const tg = await startTestGateway(rawService({ urls: [replica.url], concurrency: 1 }, { queue: { maxWaitMs } }), { workers: 1 });
  open.push(tg);
  const held = ask(tg, undefined, 'hold');
  await eventually(() => seen.length === 1, 10_000, 'the held request at the replica');
  return { tg, replica, seen, release, held };
}

test('0 on a cold launched service: 503 no_replica at once, the replica starts anyway, and a retry finds it warm', async () => {
  const tg = await startTestGateway(rawService({ command: serverCommand(), env: { START_DELAY_MS: '300' }, readyPath: '/health' }, { queue: { maxWaitMs: 30_000 } }), { workers: 1 });
  open.push(tg);
  const first = await ask(tg, '0');
  assert.equal(first.status, 503);
  assert.equal(first.error, 'no_replica');
  assert.equal(first.retryAfter, '1');
  assert.match(first.body, /X-Sluice-Max-Wait-Ms: 0/);
  assert.equal(await metric(tg, 'sluice_queue_depth{service="svc",priority="0"}'), undefined, 'it never queued');
  await eventually(() => tg.logs.some((l) => l.msg === 'replica state' && l.to === 'ready'), 10_000, 'the replica to be ready');
  const answered = tg.logs.findIndex((l) => l.msg === 'request' && l.status === 503);
  const ready = tg.logs.findIndex((l) => l.msg === 'replica state' && l.to === 'ready');
  assert.ok(answered >= 0 && answered < ready, 'the 503 was answered before the replica was ready (it takes 300 ms to start): it did not wait');
  const retry = await ask(tg, '0');
  assert.equal(retry.status, 200, 'warm now');
  assert.equal(tg.logs.filter((l) => l.msg === 'replica state' && l.to === 'starting').length, 1, 'one start');
});

test('the start a request that would not wait asked for ends its wake: after its idle stop the service stays cold', async () => {
  // Regression: the wake held for queue.maxWaitMs even after the replica was ready, so its idle stop started it again.
  const tg = await startTestGateway(rawService({ command: serverCommand(), readyPath: '/health', idleTimeoutMs: 200 }, { queue: { maxWaitMs: 30_000 } }), { workers: 1 });
  open.push(tg);
  assert.equal((await ask(tg, '0')).status, 503);
  await eventually(() => tg.logs.some((l) => l.msg === 'replica state' && l.to === 'stopped'), 10_000, 'the woken replica to stop when idle');
  const started = (state: string): Promise<number | undefined> => metric(tg, `sluice_replicas{service="svc",state="${state}"}`);
  assert.deepEqual([await started('starting'), await started('ready')], [0, 0], 'cold, and nothing starting');
  assert.equal(tg.logs.filter((l) => l.msg === 'replica state' && l.to === 'starting').length, 1, 'one start');
});

test('0 with room: served as usual; 0 with every replica busy: 503 at once, nothing queued', async () => {
  const s = await busyService(10_000);
  const refused = await ask(s.tg, '0', 'no-wait');
  assert.equal(refused.status, 503);
  assert.equal(refused.error, 'no_replica');
  assert.match(refused.body, /asked not to wait/);
  // Answered while the held request still holds the one slot (released below): it did not wait for room.
  assert.equal(await metric(s.tg, 'sluice_queue_wait_seconds_count{service="svc",outcome="expired"}'), undefined, 'it was never queued (nor expired)');
  s.release();
  assert.equal((await s.held).status, 200);
  const served = await ask(s.tg, '0', 'with-room');
  assert.equal(served.status, 200);
  assert.deepEqual(s.seen, ['hold', 'with-room']);
  assert.equal(s.tg.logs.filter((l) => l.msg === 'replica state' && l.to === 'starting').length, 1, 'a static service starts nothing');
});

test('a lower wait expires sooner; a higher one is capped at queue.maxWaitMs; others keep their place', async () => {
  const s = await busyService(1_000);
  const settled: string[] = [];
  const asked = (wait: string | undefined, body: string): Promise<Answer> => ask(s.tg, wait, body).finally(() => settled.push(body));
  const short = asked('150', 'short');
  const capped = asked('600000', 'capped');
  const plain = asked(undefined, 'plain');
  const a = await short;
  assert.equal(a.status, 503);
  assert.equal(a.error, 'no_replica');
  assert.match(a.body, /within 150 ms/);
  assert.ok(a.ms >= 145, `the 150 ms wait ended after ${a.ms.toFixed(0)} ms`);
  const [b, c] = await Promise.all([capped, plain]);
  assert.equal(settled[0], 'short', `the shorter wait ended first: ${settled.join(', ')}`);
  for (const x of [b, c]) {
    assert.equal(x.status, 503);
    assert.match(x.body, /within 1000 ms/);
    assert.ok(x.ms >= 990, `at least the service's 1000 ms (the body says the wait was capped there): ${x.ms.toFixed(0)} ms`);
  }
  s.release();
  await s.held;
  assert.deepEqual(s.seen, ['hold'], 'none of them reached the replica');
});

test('a wait that is not an integer ≥ 0 is 400 and reaches nothing; the header is never forwarded', async () => {
  const s = await busyService(10_000);
  s.release();
  await s.held;
  for (const bad of ['-1', 'abc', '1.5', '', ' ', '10ms', '+5', '1e3', '0x10']) {
    const x = await ask(s.tg, bad, 'bad');
    assert.equal(x.status, 400, JSON.stringify(bad));
    assert.equal(x.error, 'bad_request');
    assert.match(x.body, /X-Sluice-Max-Wait-Ms must be an integer ≥ 0/);
  }
  const twice = await request(s.tg.url('/x'), { method: 'POST', headers: [...Object.entries(AUTH).flat(), 'x-sluice-max-wait-ms', '5', 'x-sluice-max-wait-ms', '6'], body: 'bad' });
  assert.equal(twice.statusCode, 400);
  await twice.body.text();
  assert.ok(!s.seen.includes('bad'));
  assert.equal((await ask(s.tg, '5000', 'fine')).status, 200);
  for (const seen of s.replica.seen) assert.equal(seen.headers['x-sluice-max-wait-ms'], undefined);
});
