// With `workers: 2` every traced request has exactly one span tree, built on the worker thread
// that served it: one SERVER span per request id, one trace per request, its CLIENT span under it,
// whichever worker the connection reached.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { KIND, type OtlpReceiver, startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { connectionsOnEveryWorker, type WorkerConnection } from '../helpers/workers.js';

let replica: TestReplica;
let receiver: OtlpReceiver;
let tg: TestGateway;
let connections: WorkerConnection[];

before(async () => {
  replica = await startReplica(async (req, res) => {
    await readBody(req);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
  });
  receiver = await startOtlpReceiver();
  tg = await startTestGateway(rawService({ urls: [replica.url] }), { workers: 2, tracing: { endpoint: receiver.url } });
  connections = (await connectionsOnEveryWorker(tg, tg.origin, 2, 2)).flat();
});

after(async () => {
  for (const c of connections) await c.client.close();
  await tg.close();
  await replica.close();
  await receiver.close();
});

test('workers: 2 — every request has exactly one tree: one SERVER span, one trace, its CLIENT span under it', async () => {
  const path = new URL(tg.url('/v1/x')).pathname;
  const ids: string[] = [];
  for (let round = 0; round < 10; round++) {
    for (const c of connections) {
      const res = await c.client.request({ path, method: 'POST', headers: AUTH, body: '{}' });
      assert.equal(res.statusCode, 200);
      await res.body.dump();
      ids.push(String(res.headers['x-request-id']));
    }
  }
  await receiver.waitFor((spans) => spans.filter((s) => s.kind === KIND.server && s.attributes['sluice.request.id'] !== undefined).length >= ids.length && spans.filter((s) => s.kind === KIND.client).length >= ids.length);
  // The connections were placed with requests to a service that does not exist: refused, traced on their own.
  const servers = receiver.spans.filter((s) => s.kind === KIND.server && s.attributes['error.type'] !== 'service_not_found');
  const placing = receiver.spans.length - receiver.spans.filter((s) => s.attributes['error.type'] !== 'service_not_found').length;
  assert.equal(servers.length, ids.length, 'one SERVER span per request');
  assert.deepEqual(servers.map((s) => String(s.attributes['sluice.request.id'])).sort(), [...ids].sort());
  assert.equal(new Set(servers.map((s) => s.traceId)).size, ids.length, 'one trace per request');
  for (const server of servers) {
    const trace = receiver.spans.filter((s) => s.traceId === server.traceId);
    assert.equal(trace.length, 2);
    const client = trace.find((s) => s.kind === KIND.client)!;
    assert.equal(client.parentSpanId, server.spanId);
  }
  assert.equal(receiver.spans.length, 2 * ids.length + placing, 'no span twice');
});
