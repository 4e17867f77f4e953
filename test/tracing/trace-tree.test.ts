// The span tree of a traced request, as a collector receives it (docs/operations.md#traces): an
// OTLP/HTTP receiver in the test decodes the protobuf Sluice's exporter sends. A plain request; a
// streamed chat with usage (GenAI attributes, first and last token); a caller's trace continued
// and its sampled flag respected; the replica's `traceparent` naming Sluice's upstream span.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { childrenOf, KIND, type OtlpReceiver, type ReceivedSpan, startOtlpReceiver, traceOf } from '../helpers/otlp-receiver.js';

let replica: TestReplica;
let receiver: OtlpReceiver;
let tg: TestGateway;

const CHUNK = (content: string): string => `data: {"id":"c1","object":"chat.completion.chunk","model":"served-model","choices":[{"delta":{"content":"${content}"}}]}\n\n`;
const USAGE = 'data: {"id":"c1","object":"chat.completion.chunk","model":"served-model","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}\n\n';

before(async () => {
  replica = await startReplica(async (req, res) => {
    const body = (await readBody(req)).toString();
    if (req.url === '/v1/chat/completions' && body.includes('"stream":true')) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const word of ['one', 'two', 'three']) res.write(CHUNK(word));
      res.write(USAGE);
      res.end('data: [DONE]\n\n');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"ok":true}');
  });
  receiver = await startOtlpReceiver();
  tg = await startTestGateway(rawService({ urls: [replica.url] }), { tracing: { endpoint: receiver.url, serviceName: 'gw-under-test' } });
});

after(async () => {
  await tg.close();
  await replica.close();
  await receiver.close();
});

/** The request id the caller got, and the trace whose SERVER span carries it, once received. */
async function treeOf(requestId: string): Promise<{ server: ReceivedSpan; spans: ReceivedSpan[] }> {
  const isIt = (s: ReceivedSpan): boolean => s.kind === KIND.server && s.attributes['sluice.request.id'] === requestId;
  await receiver.waitFor((spans) => spans.some(isIt));
  const server = receiver.spans.find(isIt)!;
  // Every span of a request goes in the same export as its SERVER span.
  return { server, spans: traceOf(receiver.spans, server.traceId) };
}

test('a plain request: one SERVER span with its HTTP attributes and one CLIENT span to the replica', async () => {
  const before = replica.seen.length;
  const res = await request(tg.url('/v1/other?x=1'), { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' }, body: '{"a":1}' });
  assert.equal(res.statusCode, 200);
  await res.body.dump();
  const { server, spans } = await treeOf(String(res.headers['x-request-id']));
  assert.equal(server.parentSpanId, '');
  const prefix = new URL(tg.url('')).pathname;
  assert.equal(server.name, `POST ${prefix}/{path}`);
  assert.equal(server.attributes['http.request.method'], 'POST');
  assert.equal(server.attributes['url.path'], `${prefix}/v1/other`);
  assert.equal(server.attributes['http.route'], `${prefix}/{path}`);
  assert.equal(server.attributes['http.response.status_code'], 200);
  assert.equal(server.attributes['sluice.service'], 'svc');
  assert.equal(server.attributes['sluice.token.name'], 'test');
  assert.equal(server.attributes['error.type'], undefined);
  assert.equal(server.attributes['gen_ai.operation.name'], undefined, 'not an OpenAI-style path: no GenAI attributes');
  assert.equal(server.attributes['gen_ai.provider.name'], undefined);
  assert.equal(server.resource['service.name'], 'gw-under-test');
  assert.equal(server.scope, 'sluice');
  assert.equal(spans.length, 2);
  const [client] = childrenOf(spans, server);
  assert.equal(client!.kind, KIND.client);
  assert.equal(client!.attributes['server.address'], '127.0.0.1');
  assert.equal(client!.attributes['server.port'], Number(new URL(replica.url).port));
  assert.equal(client!.attributes['http.response.status_code'], 200);
  assert.equal(client!.attributes['sluice.retried'], false);
  assert.deepEqual(
    client!.events.map((e) => e.name),
    ['status line'],
  );
  assert.ok(client!.startNs >= server.startNs && client!.endNs <= server.endNs, 'the CLIENT span lies within the SERVER span');
  // The replica's parent is the CLIENT span, in the same trace.
  assert.equal(replica.seen[before]!.headers.traceparent, `00-${server.traceId}-${client!.spanId}-01`);
});

test('a streamed chat with usage: GenAI attributes, and the first and last token as events', async () => {
  const res = await request(tg.url('/v1/chat/completions'), {
    method: 'POST',
    headers: { ...AUTH, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'asked-model', max_tokens: 64, stream: true, stream_options: { include_usage: true }, messages: [] }),
  });
  assert.equal(res.statusCode, 200);
  assert.match(await res.body.text(), /\[DONE\]/);
  const { server, spans } = await treeOf(String(res.headers['x-request-id']));
  assert.equal(server.attributes['gen_ai.operation.name'], 'chat');
  assert.equal(server.attributes['gen_ai.provider.name'], 'openai', 'the API the replica speaks (tracing.genAiProvider)');
  assert.equal(server.attributes['gen_ai.request.model'], 'asked-model');
  assert.equal(server.attributes['gen_ai.request.max_tokens'], 64);
  assert.equal(server.attributes['gen_ai.response.model'], 'served-model');
  assert.equal(server.attributes['gen_ai.usage.input_tokens'], 7);
  assert.equal(server.attributes['gen_ai.usage.output_tokens'], 3);
  assert.equal(typeof server.attributes['gen_ai.response.time_to_first_chunk'], 'number');
  const names = server.events.map((e) => e.name);
  assert.deepEqual(names, ['first token', 'last token']);
  assert.ok(server.events[0]!.timeNs <= server.events[1]!.timeNs);
  assert.equal(server.events[1]!.attributes['sluice.stream.events'], 5);
  const [client] = childrenOf(spans, server);
  assert.equal(client!.name, 'chat asked-model');
  assert.equal(client!.attributes['gen_ai.request.model'], 'asked-model');
  assert.equal(client!.attributes['gen_ai.provider.name'], 'openai');
});

test("a caller's sampled traceparent is continued: same trace, Sluice's SERVER span under the caller's span", async () => {
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const before = replica.seen.length;
  const res = await request(tg.url('/v1/other'), { method: 'POST', headers: { ...AUTH, traceparent: `00-${traceId}-00f067aa0ba902b7-01`, tracestate: 'vendor=abc' }, body: '{}' });
  await res.body.dump();
  const { server, spans } = await treeOf(String(res.headers['x-request-id']));
  assert.equal(server.traceId, traceId);
  assert.equal(server.parentSpanId, '00f067aa0ba902b7');
  const [client] = childrenOf(spans, server);
  const seen = replica.seen[before]!.headers;
  assert.equal(seen.traceparent, `00-${traceId}-${client!.spanId}-01`);
  assert.equal(seen.tracestate, 'vendor=abc', "the caller's tracestate goes on unchanged");
});

test("a caller's unsampled traceparent is respected: no spans, and its context reaches the replica as it came", async () => {
  const unsampled = '00-5bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00';
  const before = replica.seen.length;
  const res = await request(tg.url('/v1/other'), { method: 'POST', headers: { ...AUTH, traceparent: unsampled }, body: '{}' });
  await res.body.dump();
  assert.equal(replica.seen[before]!.headers.traceparent, unsampled);
  // A sampled request sent after it is exported; the unsampled one never is.
  const after = await request(tg.url('/v1/other'), { method: 'POST', headers: AUTH, body: '{}' });
  await after.body.dump();
  await treeOf(String(after.headers['x-request-id']));
  assert.equal(
    receiver.spans.filter((s) => s.traceId === '5bf92f3577b34da6a3ce929d0e0e4736').length,
    0,
  );
});
