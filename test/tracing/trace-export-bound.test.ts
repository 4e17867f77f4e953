// A collector that hangs or refuses costs spans, within a bound, and never requests
// (docs/operations.md#traces): every answer is the replica's, the spans that do not fit the export
// queue are dropped and counted (`sluice_trace_spans_dropped_total`), a failed export's spans are
// counted lost, the outage is logged once by each data plane thread (and its end once), and
// export resumes when the
// collector does.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { request } from 'undici';
import { AUTH, logged, metricSamples, rawService, startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { readBody, startReplica, type TestReplica } from '../helpers/replica.js';
import { KIND, type OtlpReceiver, startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { eventually } from '../helpers/wait.js';
import { TRACE_BATCH_SPANS, TRACE_QUEUE_SPANS } from '../../src/tunables.js';

let replica: TestReplica;

before(async () => {
  replica = await startReplica(async (req, res) => {
    await readBody(req);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"ok":1}');
  });
});

after(async () => {
  await replica.close();
});

/** Sends `n` requests, `parallel` at a time; every answer must be the replica's. */
async function send(tg: TestGateway, n: number, parallel = 16): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < n) {
      next += 1;
      const res = await request(tg.url('/v1/x'), { method: 'POST', headers: AUTH, body: '{}' });
      assert.equal(res.statusCode, 200);
      assert.equal(await res.body.text(), '{"ok":1}');
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
}

async function dropped(tg: TestGateway): Promise<{ queueFull: number; failed: number; exported: number }> {
  const m = metricSamples(await (await fetch(`${tg.origin}/metrics`)).text());
  return {
    queueFull: m.get('sluice_trace_spans_dropped_total{reason="queue_full"}') ?? Number.NaN,
    failed: m.get('sluice_trace_spans_dropped_total{reason="export_failed"}') ?? Number.NaN,
    exported: m.get('sluice_trace_spans_exported_total') ?? Number.NaN,
  };
}

describe('a collector that hangs', () => {
  let receiver: OtlpReceiver;
  let tg: TestGateway;

  before(async () => {
    receiver = await startOtlpReceiver('hang');
    // A short export timeout, so that the hanging export ends within the test.
    tg = await startTestGateway(rawService({ urls: [replica.url] }), { workers: 1, tracing: { endpoint: receiver.url } }, { OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '5000' });
  });

  after(async () => {
    await tg.close();
    await receiver.close();
  });

  test('requests are answered; spans beyond the queue are dropped and counted; one warning; export resumes', async () => {
    // Two spans a request: more than the queue and one batch in flight can hold.
    const requests = Math.ceil((TRACE_QUEUE_SPANS + TRACE_BATCH_SPANS) / 2) + 200;
    await send(tg, requests);
    await receiver.waitForRequests(1);
    const during = await dropped(tg);
    assert.equal(during.exported, 0);
    // What is neither dropped nor lost is held: at most the queue and one batch in flight.
    assert.ok(during.queueFull + during.failed >= 2 * requests - TRACE_QUEUE_SPANS - TRACE_BATCH_SPANS, `dropped ${during.queueFull}, lost ${during.failed}`);
    assert.equal(logged(tg, 'trace export failing').length, 1, 'the outage is logged once');
    // The collector comes back: the hung export times out (its spans lost), the queue goes out.
    receiver.mode = 'ok';
    await receiver.waitFor((spans) => spans.some((s) => s.kind === KIND.server));
    await eventually(async () => (await dropped(tg)).failed > 0, 30_000, 'the hung export counted lost');
    await eventually(() => logged(tg, 'trace export recovered').length === 1, 30_000, 'the recovery logged');
    await eventually(async () => {
      const now = await dropped(tg);
      return now.exported + now.failed + now.queueFull === 2 * requests;
    }, 30_000, 'every span exported or counted lost');
  });
});

describe('a collector that answers 500', () => {
  let receiver: OtlpReceiver;
  let tg: TestGateway;

  before(async () => {
    receiver = await startOtlpReceiver('fail');
    tg = await startTestGateway(rawService({ urls: [replica.url] }), { workers: 1, tracing: { endpoint: receiver.url } });
  });

  after(async () => {
    await tg.close();
    await receiver.close();
  });

  test("each failed export's spans are counted lost, the outage logged once, and the next export after it succeeds", async () => {
    await send(tg, 40);
    await eventually(async () => (await dropped(tg)).failed === 80, 10_000, 'the spans of 40 requests counted lost');
    await send(tg, 40);
    await eventually(async () => (await dropped(tg)).failed === 160, 10_000, 'and 40 more');
    assert.ok(receiver.requests >= 2, 'each batch was tried');
    assert.equal(logged(tg, 'trace export failing').length, 1);
    receiver.mode = 'ok';
    await send(tg, 5);
    await receiver.waitFor((spans) => spans.filter((s) => s.kind === KIND.server).length === 5);
    await eventually(() => logged(tg, 'trace export recovered').length === 1, 10_000, 'the recovery logged');
    assert.equal(logged(tg, 'trace export recovered')[0]!['lost'], 160);
    assert.equal((await dropped(tg)).queueFull, 0);
  });
});
