// GET /status on the admin listener: its shape, the kinds and states of
// services, a cold start seen as cold → starting → ready, the figures it derives from the
// counters, never on the relay listener, and no token (nor its digest) anywhere in it.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { request } from 'undici';
import { AUTH, TEST_TOKEN, TEST_TOKEN_SHA256, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { type OverviewFixture, type ServiceStatusJson, startOverviewFixture } from '../helpers/overview.js';
import { startReplica } from '../helpers/replica.js';
import { eventually } from '../helpers/wait.js';

const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function fixture(): Promise<OverviewFixture> {
  const f = await startOverviewFixture();
  cleanups.push(() => f.close());
  return f;
}

async function post(url: string, body = '{}'): Promise<{ status: number; text: string }> {
  const res = await request(url, { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' }, body });
  return { status: res.statusCode, text: await res.body.text() };
}

const KEYS = ['baseUrl', 'ejections', 'expectedStartMs', 'inflight', 'kind', 'lastMinute', 'limits', 'loads', 'queued', 'replicas', 'requestsPerSecond', 'routing', 'slug', 'state', 'stream', 'ttfbMs'];

test('/status: one entry per service with its fields, kinds and states, and a base URL that works', async () => {
  const f = await fixture();
  const res = await fetch(`${f.admin}/status`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
  assert.equal(res.headers.get('cache-control'), 'no-store');
  const body = (await res.json()) as { generatedAt: string; services: ServiceStatusJson[] };
  assert.ok(!Number.isNaN(Date.parse(body.generatedAt)));
  assert.deepEqual(
    body.services.map((s) => s.slug),
    ['api', 'llm'],
    'services in config order',
  );
  for (const s of body.services) assert.deepEqual(Object.keys(s).sort(), KEYS);
  const [api, llm] = body.services as [ServiceStatusJson, ServiceStatusJson];

  assert.equal(api.kind, 'static');
  assert.equal(api.state, 'ready', 'static replicas are in rotation from the start');
  assert.deepEqual(api.replicas, { starting: 0, ready: 1, unreachable: 0, draining: 0 });
  assert.equal(api.baseUrl, `${f.tg.origin}/api/v1/services/api`);

  assert.equal(llm.kind, 'launched');
  assert.equal(llm.state, 'cold', 'no replica runs before the first request');
  assert.deepEqual(llm.replicas, { starting: 0, ready: 0, unreachable: 0, draining: 0 });
  for (const s of [api, llm]) {
    assert.equal(s.queued, 0);
    assert.equal(s.inflight, 0);
    assert.equal(s.requestsPerSecond, 0);
    assert.deepEqual(s.ttfbMs, { p50: null, p99: null });
    assert.deepEqual(s.stream, { active: 0, eventsPerSecond: 0, firstEventMs: { p50: null, p99: null }, betweenEventsMs: { p50: null, p99: null } });
    assert.deepEqual(s.lastMinute, { requests: 0, errors: 0 });
    assert.deepEqual(s.routing, { policy: 'fewest-in-flight', affinityHeader: null, prefix: null });
    assert.deepEqual(s.loads, []);
  }

  // The base URL is the one callers use: {baseUrl}/request{path}.
  const answer = await post(`${api.baseUrl}/request/echo`);
  assert.equal(answer.status, 200);
  assert.deepEqual(JSON.parse(answer.text), { path: '/echo', status: 200 });
});

test('/status shows a cold start as it happens: cold → starting (queue filling) → ready (queue drained)', async () => {
  const f = await fixture();
  const states: string[] = [];
  const seen = (s: ServiceStatusJson): ServiceStatusJson => {
    if (states.at(-1) !== s.state) states.push(s.state);
    return s;
  };
  seen(await f.service('llm'));

  const chat = (content: string): Promise<{ status: number; text: string }> =>
    post(f.tg.url('/v1/chat/completions', 'llm'), JSON.stringify({ model: 'demo', stream: true, messages: [{ role: 'user', content }] }));
  const first = chat('one two');
  const second = chat('three four');
  await eventually(async () => seen(await f.service('llm')).queued === 2, 10_000, 'two requests queued');
  const starting = seen(await f.service('llm'));
  assert.equal(starting.state, 'starting');
  assert.equal(starting.replicas['starting'], 1);
  assert.equal(starting.inflight, 0, 'queued requests are not in flight');

  f.openGate();
  const answers = await Promise.all([first, second]);
  for (const a of answers) {
    assert.equal(a.status, 200);
    assert.match(a.text, /^data: /m);
    assert.match(a.text, /data: \[DONE\]/);
  }
  // The in-flight count may trail the callers' last bytes by a moment (a CI run on Node 22 read 1
  // right after both answers were complete); it must come back to 0.
  await eventually(async () => seen(await f.service('llm')).inflight === 0, 10_000, 'nothing in flight');
  const ready = seen(await f.service('llm'));
  assert.equal(ready.state, 'ready');
  assert.deepEqual(ready.replicas, { starting: 0, ready: 1, unreachable: 0, draining: 0 });
  assert.equal(ready.queued, 0);
  assert.deepEqual(states, ['cold', 'starting', 'ready']);

  // The figures come from the counters, sampled once a second.
  await eventually(async () => (await f.service('llm')).lastMinute.requests === 2, 10_000, 'the two requests counted');
  const counted = await f.service('llm');
  assert.equal(counted.lastMinute.errors, 0);
  assert.ok(counted.ttfbMs.p50 !== null && counted.ttfbMs.p50 > 0, 'a time to first byte');
  assert.ok(counted.ttfbMs.p99 !== null && counted.ttfbMs.p99 >= counted.ttfbMs.p50);
});

test('/status counts requests in flight, errors (5xx) and requests per second', async () => {
  const f = await fixture();
  const held = post(f.tg.url('/hold', 'api'));
  await eventually(async () => (await f.service('api')).inflight === 1, 10_000, 'the held request in flight');
  const failed = await post(f.tg.url('/fail', 'api'));
  assert.equal(failed.status, 500);
  assert.equal((await post(f.tg.url('/ok', 'api'))).status, 200);
  // A request the gateway refuses (wrong token) is not relayed and not counted.
  const refused = await request(f.tg.url('/ok', 'api'), { method: 'POST', headers: { authorization: 'Bearer nope' }, body: 'x' });
  await refused.body.dump();
  assert.equal(refused.statusCode, 401);
  await eventually(() => f.holding() === 1, 10_000, 'the replica to hold the request');
  f.release();
  assert.equal((await held).status, 200);

  await eventually(async () => (await f.service('api')).lastMinute.requests === 3, 10_000, 'three requests counted');
  const api = await f.service('api');
  assert.deepEqual(api.lastMinute, { requests: 3, errors: 1 });
  assert.equal(api.inflight, 0);
  assert.ok(api.requestsPerSecond > 0, 'requests in the last 10 s give a rate');
  const llm = await f.service('llm');
  assert.deepEqual(llm.lastMinute, { requests: 0, errors: 0 }, 'figures are per service');
});

test('/status shows draining services while the gateway drains', async () => {
  const f = await fixture();
  const held = post(f.tg.url('/hold', 'api'));
  await eventually(async () => (await f.service('api')).inflight === 1, 10_000, 'the held request in flight');
  const drained = f.tg.gateway.drain();
  await eventually(async () => (await f.status()).services.every((s) => s.state === 'draining'), 10_000, 'every service draining');
  await eventually(() => f.holding() === 1, 10_000, 'the replica to hold the request');
  f.release();
  assert.equal((await held).status, 200, 'the request in flight finishes');
  await drained;
});

test('/status, / and /status/events are never served on the relay listener', async () => {
  const f = await fixture();
  for (const path of ['/status', '/', '/status/events', '/ui/app.js']) {
    const res = await request(`${f.tg.origin}${path}`);
    const text = await res.body.text();
    assert.equal(res.statusCode, 404, `${path} on the relay listener`);
    assert.equal(res.headers['x-sluice-error'], 'not_found');
    assert.doesNotMatch(text, /llm|"api"/);
  }

  // Without an admin listener the operations endpoints are on the relay listener, the overview is not.
  const replica = await startReplica((_req, res) => {
    res.end('ok');
  });
  cleanups.push(() => replica.close());
  const tg: TestGateway = await startTestGateway(rawService({ urls: [replica.url] }));
  cleanups.push(() => tg.close());
  assert.equal(tg.gateway.adminPort, undefined);
  assert.equal((await fetch(`${tg.origin}/healthz`)).status, 200);
  for (const path of ['/status', '/', '/status/events']) {
    const res = await request(`${tg.origin}${path}`);
    await res.body.dump();
    assert.equal(res.statusCode, 404, `${path} without an admin listener`);
  }
});

test('no token or digest appears in /status or its event stream, nor the name of a token without limits', async () => {
  const f = await fixture();
  assert.equal((await post(f.tg.url('/ok', 'api'))).status, 200);
  await eventually(async () => (await f.service('api')).lastMinute.requests === 1, 10_000, 'the request counted');
  const texts = [await (await fetch(`${f.admin}/status`)).text()];
  const controller = new AbortController();
  const events = await fetch(`${f.admin}/status/events`, { signal: controller.signal });
  assert.match(events.headers.get('content-type') ?? '', /^text\/event-stream/);
  const reader = events.body!.getReader();
  let text = '';
  while ((text.match(/^event: status$/gm) ?? []).length < 2) {
    const { value, done } = await reader.read();
    if (done) break;
    text += Buffer.from(value).toString();
  }
  controller.abort();
  texts.push(text);
  assert.match(text, /^event: history$/m);
  for (const t of texts) {
    assert.ok(!t.includes(TEST_TOKEN), 'no token');
    assert.ok(!t.includes(TEST_TOKEN_SHA256), 'no digest');
    assert.ok(!t.toLowerCase().includes('sha256'), 'no digest field');
    assert.ok(!t.includes('"test"'), 'no token name');
  }
});

test('with the relay on every address, baseUrl names the host the admin listener was reached by', async () => {
  const replica = await startReplica((_req, res) => {
    res.end('ok');
  });
  cleanups.push(() => replica.close());
  const tg = await startTestGateway(rawService({ urls: [replica.url] }), { listen: { host: '0.0.0.0', port: 0 }, admin: { host: '127.0.0.1', port: 0 } });
  cleanups.push(() => tg.close());
  const statusVia = async (host: string): Promise<string> => {
    const res = await request(`http://127.0.0.1:${tg.gateway.adminPort}/status`, { headers: { host } });
    return ((await res.body.json()) as { services: Array<{ baseUrl: string }> }).services[0]!.baseUrl;
  };
  assert.equal(await statusVia('gateway.example:9091'), `http://gateway.example:${tg.port}/api/v1/services/svc`);
  assert.equal(await statusVia('[::1]:9091'), `http://[::1]:${tg.port}/api/v1/services/svc`);
  assert.equal(await statusVia('bad host/<x>'), `http://127.0.0.1:${tg.port}/api/v1/services/svc`, 'a malformed Host is not echoed');
});
