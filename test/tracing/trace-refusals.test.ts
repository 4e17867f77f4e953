// Refusals before the relay are traced (docs/operations.md#traces): each gets a SERVER span with
// its status and `error.type`, in the caller's trace when it sent a sampled `traceparent` — a
// missing or wrong token (401), a malformed Authorization or X-Sluice-Priority (400), an unknown
// service (404, no route) or path outside any service (404), a method the service does not take
// (405), a declared body over the limit (413) — and the refusals of a relayed request too: the
// queue full (503 queue_full) and a wait that ran out (503 no_replica).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { childrenOf, KIND, type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from '../helpers/otlp-receiver.js';

let replica: TestReplica;
let receiver: OtlpReceiver;
let tg: TestGateway;
/** The held requests' answers, sent by the test. */
const held: (() => void)[] = [];
let heldCount = 0;
let heldArrived: (() => void) | undefined;

before(async () => {
  replica = await startReplica(async (req, res) => {
    await readBody(req);
    if (req.url === '/hold') {
      heldCount++;
      heldArrived?.();
      await new Promise<void>((resolve) => held.push(resolve));
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
  });
  receiver = await startOtlpReceiver();
  tg = await startTestGateway(
    [
      rawService({ urls: [replica.url] }, { maxRequestBytes: 100 }),
      rawService({ urls: [replica.url], concurrency: 1 }, { slug: 'one', queue: { maxRequests: 1 } }),
    ],
    { tracing: { endpoint: receiver.url }, workers: 1 },
  );
});

after(async () => {
  for (const answer of held) answer();
  await tg.close();
  await replica.close();
  await receiver.close();
});

let next = 1;
/** A sampled `traceparent` of a trace of its own, and the trace's id. */
function traceparent(): { header: string; traceId: string } {
  const traceId = (next++).toString(16).padStart(32, 'a');
  return { header: `00-${traceId}-00f067aa0ba902b7-01`, traceId };
}

/** The SERVER span of trace `traceId`, once received. */
async function serverOf(traceId: string): Promise<ReceivedSpan> {
  const isIt = (s: ReceivedSpan): boolean => s.kind === KIND.server && s.traceId === traceId;
  await receiver.waitFor((spans) => spans.some(isIt));
  return receiver.spans.find(isIt)!;
}

async function refused(path: string, slug: string | undefined, init: { method?: string; headers?: Record<string, string>; body?: string }, status: number): Promise<ReceivedSpan> {
  const { header, traceId } = traceparent();
  const res = await request(tg.url(path, slug), { method: (init.method ?? 'POST') as 'POST', headers: { ...init.headers, traceparent: header }, body: init.body ?? '{}' });
  assert.equal(res.statusCode, status);
  await res.body.dump();
  const span = await serverOf(traceId);
  assert.equal(span.parentSpanId, '00f067aa0ba902b7', "in the caller's trace");
  assert.equal(span.attributes['http.response.status_code'], status);
  assert.deepEqual(childrenOf(receiver.spans, span), [], 'refused before any replica: no child span');
  return span;
}

test('401 without a token and with a wrong one: error.type unauthorized, no token name', async () => {
  for (const headers of [{}, { authorization: 'Bearer wrong' }] as Record<string, string>[]) {
    const span = await refused('/v1/chat/completions', undefined, { headers }, 401);
    assert.equal(span.attributes['error.type'], 'unauthorized');
    assert.equal(span.attributes['sluice.service'], 'svc');
    assert.equal(span.attributes['sluice.token.name'], undefined);
    assert.equal(span.attributes['gen_ai.operation.name'], 'chat');
    assert.equal(span.status, 0, 'a 4xx is not an error of the server');
  }
});

test('400 for a malformed Authorization and for a bad X-Sluice-Priority', async () => {
  const malformed = await refused('/v1/a', undefined, { headers: { authorization: 'Basic x' } }, 400);
  assert.equal(malformed.attributes['error.type'], 'bad_request');
  const priority = await refused('/v1/a', undefined, { headers: { ...AUTH, 'x-sluice-priority': 'high' } }, 400);
  assert.equal(priority.attributes['error.type'], 'bad_request');
  assert.equal(priority.attributes['sluice.token.name'], 'test', 'authenticated: its token named');
});

test('404 for an unknown service and outside any service: no route, the span named by its method', async () => {
  const unknown = await refused('/v1/chat/completions', 'nope', { headers: AUTH }, 404);
  assert.equal(unknown.attributes['error.type'], 'service_not_found');
  assert.equal(unknown.name, 'POST');
  assert.equal(unknown.attributes['http.route'], undefined);
  assert.equal(unknown.attributes['url.path'], new URL(tg.url('/v1/chat/completions', 'nope')).pathname);
  assert.equal(unknown.attributes['sluice.service'], undefined);
  assert.equal(unknown.attributes['gen_ai.operation.name'], undefined, 'no service: not OpenAI-style traffic of one');
  const { header, traceId } = traceparent();
  const res = await request(new URL('/elsewhere', tg.url('')).href, { method: 'GET', headers: { traceparent: header } });
  assert.equal(res.statusCode, 404);
  await res.body.dump();
  const outside = await serverOf(traceId);
  assert.equal(outside.attributes['error.type'], 'not_found');
  assert.equal(outside.attributes['url.path'], '/elsewhere');
});

test('405 for a method the service does not take, 413 for a declared body over the limit', async () => {
  const method = await refused('/v1/a', undefined, { method: 'PATCH', headers: AUTH }, 405);
  assert.equal(method.attributes['error.type'], 'method_not_allowed');
  assert.equal(method.attributes['http.request.method'], 'PATCH');
  const large = await refused('/v1/a', undefined, { headers: { ...AUTH, 'content-type': 'application/json' }, body: `{"a":"${'x'.repeat(200)}"}` }, 413);
  assert.equal(large.attributes['error.type'], 'payload_too_large');
  assert.equal(large.attributes['sluice.token.name'], 'test');
});

test('503 queue_full and 503 no_replica: the relayed request refused while it waited', async () => {
  // The replica's one place taken, and the queue's one place.
  const arrived = new Promise<void>((resolve) => (heldArrived = resolve));
  const first = request(tg.url('/hold', 'one'), { method: 'POST', headers: AUTH, body: '{}' });
  await arrived;
  assert.equal(heldCount, 1);
  const { header: waitingHeader, traceId: waitingTrace } = traceparent();
  const waiting = request(tg.url('/v1/a', 'one'), { method: 'POST', headers: { ...AUTH, traceparent: waitingHeader, 'x-sluice-max-wait-ms': '60000' }, body: '{}' });
  // The queue is full once the waiting request is in it: the next is refused.
  let full: ReceivedSpan | undefined;
  for (let tries = 0; full === undefined; tries++) {
    assert.ok(tries < 100, 'the queue filled');
    const { header, traceId } = traceparent();
    const res = await request(tg.url('/v1/a', 'one'), { method: 'POST', headers: { ...AUTH, traceparent: header, 'x-sluice-max-wait-ms': '1' }, body: '{}' });
    await res.body.dump();
    if (res.statusCode === 503) full = await serverOf(traceId);
  }
  assert.ok(full.attributes['error.type'] === 'queue_full' || full.attributes['error.type'] === 'no_replica', String(full.attributes['error.type']));
  assert.equal(full.status, 2, 'a 503 is an error');
  for (const answer of held.splice(0)) answer();
  assert.equal((await first).statusCode, 200);
  assert.equal((await waiting).statusCode, 200);
  const served = await serverOf(waitingTrace);
  assert.equal(served.attributes['http.response.status_code'], 200);
});
