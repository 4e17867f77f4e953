// Without tracing configured, a caller's W3C trace context reaches the replica as it came
// (docs/api.md#what-the-replica-receives): `traceparent` and `tracestate` unchanged, whether or
// not the service lists them in `forwardHeaders`, and nothing invented when the caller sent none.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';

let replica: TestReplica;
let tg: TestGateway;

before(async () => {
  replica = await startReplica(async (req, res) => {
    await readBody(req);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
  });
  tg = await startTestGateway(rawService({ urls: [replica.url] }, { forwardHeaders: ['x-tenant'] }));
});

after(async () => {
  await tg.close();
  await replica.close();
});

const PARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

async function seenFor(headers: Record<string, string | string[]>): Promise<Record<string, string | string[] | undefined>> {
  const before = replica.seen.length;
  const res = await request(tg.url('/v1/chat/completions'), { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json', ...headers }, body: '{"model":"m"}' });
  assert.equal(res.statusCode, 200);
  await res.body.dump();
  return replica.seen[before]!.headers;
}

test('a caller traceparent and tracestate reach the replica unchanged when tracing is off', async () => {
  const seen = await seenFor({ traceparent: PARENT, tracestate: 'vendor=abc,other=1' });
  assert.equal(seen.traceparent, PARENT);
  assert.equal(seen.tracestate, 'vendor=abc,other=1');
});

test('a traceparent Sluice could not continue is still forwarded as it came (it is the caller context, not Sluice)', async () => {
  const odd = '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-future';
  const seen = await seenFor({ traceparent: odd });
  assert.equal(seen.traceparent, odd);
  assert.equal(seen.tracestate, undefined);
});

test('repeated tracestate fields reach the replica combined, in order (RFC 9110 list fields)', async () => {
  const seen = await seenFor({ traceparent: PARENT, tracestate: ['a=1', 'b=2'] });
  assert.equal(seen.tracestate, 'a=1,b=2');
});

test('no trace context from the caller: none is invented', async () => {
  const seen = await seenFor({});
  assert.equal(seen.traceparent, undefined);
  assert.equal(seen.tracestate, undefined);
});
