// The batch span processor's OTEL_BSP_* variables and OTEL_RESOURCE_ATTRIBUTES, as a collector
// sees them (docs/operations.md#traces): batches of at most OTEL_BSP_MAX_EXPORT_BATCH_SIZE spans,
// sent as soon as one is full while OTEL_BSP_SCHEDULE_DELAY holds back what is not; the
// resource carries the variable's attributes, service.name from OTEL_SERVICE_NAME.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { AUTH, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startReplica, type TestReplica } from '../helpers/replica.js';
import { KIND, type OtlpReceiver, startOtlpReceiver } from '../helpers/otlp-receiver.js';

let replica: TestReplica;
let receiver: OtlpReceiver;
let tg: TestGateway;

before(async () => {
  replica = await startReplica((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"ok":true}');
  });
  receiver = await startOtlpReceiver();
  tg = await startTestGateway(rawService({ urls: [replica.url] }), {}, {
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: receiver.url,
    // A plain request is two spans (SERVER and CLIENT): each request is a batch of its own, sent
    // at once; an hour's delay would hold back anything smaller.
    OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '2',
    OTEL_BSP_SCHEDULE_DELAY: '3600000',
    OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=prod%20eu,service.name=not-this-one',
    OTEL_SERVICE_NAME: 'edge',
  });
});

after(async () => {
  await tg.close();
  await replica.close();
  await receiver.close();
});

test('each full batch is sent at once, with the resource the variables say', async () => {
  for (let i = 1; i <= 3; i++) {
    const res = await request(tg.url('/v1/other'), { method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' }, body: '{}' });
    assert.equal(res.statusCode, 200);
    await res.body.dump();
    // The request's two spans fill a batch: it goes without waiting for the schedule's delay.
    await receiver.waitForRequests(i);
    assert.equal(receiver.spans.length, 2 * i);
  }
  const servers = receiver.spans.filter((s) => s.kind === KIND.server);
  assert.equal(servers.length, 3);
  for (const span of receiver.spans) {
    assert.equal(span.resource['service.name'], 'edge');
    assert.equal(span.resource['deployment.environment.name'], 'prod eu');
    assert.equal(typeof span.resource['service.version'], 'string');
  }
});
